"""Switching to a long chat: the view is laid out with its messages before anything decides
whether older ones are needed (issue 10, item 7: widgets built for nothing right after a switch
held the GUI thread while answers were streaming)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.chats.models import Message, Role
from app.ui.chat.chat_view import INITIAL
from app.ui.chat.message_widget import MessageWidget
from tests.helpers.chat_view import shown_chat_view


def _message(message_id: str, role: Role, content: str) -> Message:
    return Message(message_id, "chat", None, role, content, "complete", time.time())


def test_switching_from_a_tall_chat_to_a_long_one_renders_no_older_messages(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """The new messages used to be shown by Qt a turn later: the first layout had none of
    them, the scroll range fell to 0, and 'scrolled to the top' rendered older messages."""
    view = shown_chat_view(qtbot)
    answer = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(60))
    view.set_messages([_message("q", "user", "Question"), _message("a", "assistant", answer)])
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())

    ranges: list[int] = []
    bar.rangeChanged.connect(lambda _low, high: ranges.append(high))
    view.set_messages(
        [
            _message(f"m{i}", "user", f"Question {i}")
            if i % 2 == 0
            else _message(f"m{i}", "assistant", "\n\n".join([f"Answer {i}: **bold**."] * 5))
            for i in range(500)
        ]
    )
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    for _ in range(10):
        QApplication.processEvents()
    assert 0 not in ranges  # never laid out without its messages
    # The newest INITIAL messages fill the window: nothing older is needed yet.
    assert view.rendered_count == INITIAL


def test_opening_a_long_chat_builds_about_a_window_of_messages_at_once(
    qtbot: QtBot, ember_app: QApplication, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A switch built the newest 24 messages in one go (~10 ms each; the window, and an answer
    streaming in another chat, waited for all of them); older ones come in turns as needed."""
    built = 0
    real = MessageWidget.__init__

    def init(widget: MessageWidget, *args: Any, **kwargs: Any) -> None:
        nonlocal built
        built += 1
        real(widget, *args, **kwargs)

    monkeypatch.setattr(MessageWidget, "__init__", init)
    view = shown_chat_view(qtbot)
    answer = "\n\n".join(f"Paragraph {i} of an answer." for i in range(5))
    view.set_messages(
        [
            _message(f"m{i}", "user", f"Question {i}")
            if i % 2 == 0
            else _message(f"m{i}", "assistant", answer)
            for i in range(500)
        ]
    )
    assert built <= 10
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    assert bar.maximum() >= view.viewport().height() // 2  # more than a window of them
