"""What a streamed answer costs the GUI thread, counted in the work that makes it stall (issue
10, item 7: the GUI keeps up with two answers at once; bench/gui_stream.py times it)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from app.chats.models import Message, Status
from app.ui.chat import chat_view
from app.ui.chat.chat_view import ChatView
from app.ui.chat.message_widget import MessageWidget
from tests.helpers.chat_view import shown_chat_view
from tests.helpers.fake_app import WAIT_MS, ask, fake_services, load_fake, model_file, show_window
from tests.helpers.parallel_fake import ParallelFakeWorker

PARAGRAPHS = 40


def _message(content: str = "", status: Status = "streaming") -> Message:
    return Message(
        "answer",
        "chat",
        "question",
        "assistant",
        content,
        status,
        time.time(),
    )


def test_finishing_a_long_answer_does_not_lay_its_paragraphs_out_again(
    qtbot: QtBot, ember_app: QApplication, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = shown_chat_view(qtbot)
    streaming = _message()
    view.append_message(streaming, streaming=True)
    shown = view.widget_for(streaming.id)
    assert isinstance(shown, MessageWidget)
    text = "\n\n".join(
        f"Paragraph {i}: a sentence long enough to wrap in the column, and then some more "
        "words so that laying it out is real work for the label."
        for i in range(PARAGRAPHS)
    )
    for start in range(0, len(text), 300):  # as the bridge hands it over, ~30 times a second
        view.append_stream(streaming.id, text[start : start + 300])
        QApplication.processEvents()
    assert shown.body is not None
    body = shown.body
    qtbot.waitUntil(lambda: body.text == text)  # all on screen (a turn renders one block)
    QApplication.processEvents()

    layouts = 0
    real = QLabel.heightForWidth

    def counting(label: QLabel, width: int) -> int:
        nonlocal layouts
        layouts += 1
        return real(label, width)

    monkeypatch.setattr(QLabel, "heightForWidth", counting)
    view.update_message(dataclasses.replace(streaming, content=text, status="complete"))
    for _ in range(3):
        QApplication.processEvents()
    assert not shown.streaming
    # Only what was still open (the last paragraph or two) is laid out; not all of them.
    assert layouts < PARAGRAPHS / 4, layouts


def test_the_meter_and_the_status_bar_do_not_change_with_every_update(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    worker = ParallelFakeWorker(tokens_per_second=1500)
    load_fake(worker, model_file(tmp_path, "fake-model.gguf"))
    services = fake_services(worker, max_tokens=1500)
    window = show_window(qtbot, services)
    try:
        controller, engine = window.controller, services.engine
        counts = {"updates": 0, "meter": 0, "rate": 0}

        def count(name: str) -> Callable[..., None]:
            def bump(*_args: object) -> None:
                counts[name] += 1

            return bump

        controller.stream_text.connect(count("updates"))
        controller.context_changed.connect(count("meter"))
        engine.rate_changed.connect(count("rate"))
        message_id = ask(qtbot, window, "Go")
        qtbot.waitUntil(
            lambda: services.store.get_message(message_id).status == "complete", timeout=WAIT_MS
        )
    finally:
        window.close()
        services.close()
        worker.shutdown()
    assert counts["updates"] >= 12  # ~30 a second for about a second
    assert counts["meter"] <= counts["updates"] / 4 + 2
    assert counts["rate"] <= counts["updates"] / 10 + 1


def test_older_messages_are_rendered_a_few_per_event_loop_turn(
    qtbot: QtBot, ember_app: QApplication, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scrolling up a long chat (or opening one) renders older messages in short turns, so an
    answer streaming meanwhile is never held up by a batch of them."""
    added: list[int] = []
    real = ChatView.render_older

    def spy(view: ChatView, *args: Any, **kwargs: Any) -> int:
        count = real(view, *args, **kwargs)
        added.append(count)
        return count

    monkeypatch.setattr(ChatView, "render_older", spy)
    monkeypatch.setattr(chat_view, "TURN_BUDGET", 0.0, raising=False)  # one message a turn
    view = shown_chat_view(qtbot)
    messages = [
        dataclasses.replace(_message(f"Answer {i}: **bold**, `code`.", "complete"), id=f"m{i}")
        for i in range(200)
    ]
    view.set_messages(messages)
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())  # laid out
    bar.setValue(0)
    qtbot.waitUntil(lambda: view.rendered_count >= chat_view.INITIAL + 4)
    assert added and max(added) == 1
