"""What sending a question costs the GUI thread in one event-loop turn (issue 10, item 7):
the question's message is built at once, the answer's a turn later (counted, not timed:
bench/gui_stream.py times it)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QLabel, QToolButton
from pytestqt.qtbot import QtBot

from app.chats.models import Message, Role
from app.ui import theme
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.message_widget import MessageWidget
from app.ui.main_window import MainWindow
from tests.helpers.fake_app import WAIT_MS, FakeEngine
from tests.helpers.spying import spy

FAKE_ENGINE = FakeEngine(options={"tokens_per_second": 2000}, max_tokens=200)


def role_built(_widget: MessageWidget, message: Message, *_args: Any, **_kwargs: Any) -> str:
    """Whose message a MessageWidget is built for."""
    return message.role


def test_sending_builds_one_message_per_event_loop_turn(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = spy(monkeypatch, MessageWidget, "__init__", role_built)
    controller = window.controller
    done: list[object] = []
    controller.answer_finished.connect(done.append)
    window.chat.composer.set_text("Stream an answer, please.")
    window.chat.composer.send_button.click()
    assert built == ["user"]  # the answer's waits for a turn of its own
    QApplication.processEvents()
    assert built == ["user", "assistant"]
    answer = controller.answer
    assert answer is not None
    qtbot.waitUntil(lambda: bool(done), timeout=WAIT_MS)
    shown = window.chat.view.widget_for(answer.message_id)
    assert shown is not None
    qtbot.waitUntil(lambda: not shown.streaming, timeout=WAIT_MS)
    assert shown.plain_text == answer.text and answer.text
    assert built == ["user", "assistant"]  # never built twice


def test_a_timer_due_at_sending_runs_before_the_answer_is_built(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer's message waits for a turn of its own: a posted event (QTimer.singleShot(0))
    ran before any timer or paint was due, in the same stretch as the send."""
    order = spy(monkeypatch, MessageWidget, "__init__", role_built)
    probe = QTimer()
    probe.setSingleShot(True)
    probe.setInterval(0)
    probe.timeout.connect(lambda: order.append("timer"))
    probe.start()  # due by the time the send is done: a paint or a key press stands in line
    window.chat.composer.set_text("Hello")
    window.chat.composer.send_button.click()
    qtbot.waitUntil(lambda: "assistant" in order, timeout=WAIT_MS)
    assert order == ["user", "timer", "assistant"]


def test_text_that_comes_before_the_answer_is_built_is_shown(
    qtbot: QtBot, window: MainWindow
) -> None:
    """Streamed text (or any other need) builds the answer's message at once."""
    view = window.chat.view
    controller = window.controller
    window.chat.composer.set_text("Hello")
    window.chat.composer.send_button.click()
    answer = controller.answer
    assert answer is not None
    assert view.rendered_count == 1  # the question
    view.append_stream(answer.message_id, "Early words.")
    assert view.rendered_count == 2
    shown = view.widget_for(answer.message_id)
    assert shown is not None and shown.plain_text.startswith("Early words.")
    QApplication.processEvents()
    assert view.rendered_count == 2


def test_a_message_builds_only_the_buttons_it_can_show(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """Sibling arrows for a message without versions, a question's regenerate button and an
    answer's edit button were built (and styled) for every message, never to be shown."""
    renderer = MarkdownRenderer(theme.current())
    roles: list[Role] = ["user", "assistant"]
    for role in roles:
        message = Message(f"{role}-1", "chat", None, role, "Text", "complete", time.time())
        shown = MessageWidget(message, renderer)
        qtbot.addWidget(shown)
        shown.show()
        assert len(shown.findChildren(QToolButton)) == 3  # copy, edit or regenerate, delete
        if role == "user":
            assert not shown.findChildren(QLabel, "Stats")  # a question shows no stats
        shown.set_message(dataclasses.replace(message, sibling_index=1, sibling_count=2))
        assert len(shown.findChildren(QToolButton)) == 5
        assert shown.previous_button.isVisible() and shown.next_button.isVisible()
        assert shown.sibling_label.text() == "2/2"
        assert shown.previous_button.isEnabled() and not shown.next_button.isEnabled()
