"""The context: what is dropped when a conversation no longer fits, and how it shows."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from app.engine.fitting import Turn, answer_room, plan_context
from app.engine.worker import EngineWorker
from app.ui.main_window import MainWindow
from tests.helpers.window import SMALL_CTX, send, widget


def _turns(n: int, tokens: int) -> list[Turn]:
    turns = []
    for i in range(n):
        turns.append(Turn("user", f"q{i}", tokens))
        turns.append(Turn("assistant", f"a{i}", tokens))
    return [*turns, Turn("user", "last", tokens)]


def test_plan_keeps_everything_that_fits() -> None:
    plan = plan_context("Be brief.", 5, _turns(3, 10), n_ctx=4096, room=512)
    assert plan.fits and plan.dropped == 0
    assert plan.messages[0] == {"role": "system", "content": "Be brief."}
    assert len(plan.messages) == 1 + 7


def test_plan_drops_whole_old_turns_and_keeps_the_system_prompt() -> None:
    plan = plan_context("Be brief.", 5, _turns(10, 100), n_ctx=1024, room=256)
    assert plan.fits and plan.dropped > 0 and plan.dropped % 2 == 0
    assert plan.messages[0]["role"] == "system"
    assert plan.messages[1]["role"] == "user"
    assert plan.messages[-1]["content"] == "last"
    assert plan.prompt_tokens <= 1024 - 256


def test_plan_says_when_even_the_last_message_is_too_long() -> None:
    plan = plan_context("", 0, [Turn("user", "huge", 5000)], n_ctx=2048, room=256)
    assert not plan.fits


def test_answer_room() -> None:
    assert answer_room(4096, None) == 512
    assert answer_room(4096, 100) == 100
    assert answer_room(512, 4000) == 256


@pytest.fixture
def engine_worker(small_gemma_worker: EngineWorker) -> EngineWorker:
    return small_gemma_worker


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
