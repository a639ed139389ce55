"""The context in the app: what is dropped when a conversation no longer fits, and how it
shows (the rule itself: tests/engine/test_fitting.py)."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.window import SMALL_CTX, send, widget

ENGINE_WORKER = "small_gemma_worker"  # a 512-token context, filled quickly


def test_full_context_drops_oldest_turns_and_says_so(qtbot: QtBot, window: MainWindow) -> None:
    store = window.services.store
    conversation = store.create_conversation("Long chat")
    filler = "The quick brown fox jumps over the lazy dog. " * 4  # ~40 tokens
    for i in range(8):
        store.add_message(conversation.id, "user", f"Question {i}: {filler}")
        store.add_message(conversation.id, "assistant", f"Answer {i}: {filler}")
    window.controller.open_conversation(conversation.id)
    meter = window.chat.composer.meter
    assert meter.total == SMALL_CTX
    assert meter.level in ("warn", "full")  # the meter warns before sending

    answer = send(qtbot, window, "And the last question?")
    assert answer.status == "complete"
    dropped = answer.metadata["dropped_turns"]
    assert dropped >= 2 and dropped % 2 == 0
    assert answer.metadata["prompt_tokens"] < SMALL_CTX
    shown = widget(window, answer.id)
    assert shown.notice.isVisible()
    assert f"{dropped} earlier messages no longer fit" in shown.notice.text()
    assert "system prompt was kept" in shown.notice.text()
