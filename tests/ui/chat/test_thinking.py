"""A reasoning model's thinking in the app: folded above the answer ("Thought for 12 s"), and
the per-chat thinking control (Off / Low / Medium / High / Model default), saved with the
chat's settings and sent as ChatRequest.reasoning_effort."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.types import ChatRequest, LoadedModel, LoadRequest, Request
from app.engine.worker import Job, Sink
from app.ui.chat.markdown import MarkdownRenderer
from app.ui.chat.thinking import reasoning_effort, split_thinking, supports_thinking
from app.ui.chat.thought_block import AnswerBody
from app.ui.main_window import MainWindow
from app.ui.theme import LIGHT
from tests.helpers import parallel_fake
from tests.helpers.fake_app import FakeEngine, load_fake, model_file, own_fake_window
from tests.helpers.parallel_fake import ParallelFakeWorker
from tests.helpers.spying import spy
from tests.helpers.window import send, widget

THINKS = "{% if enable_thinking %}<think>{% endif %}{{ messages[0].content }}"


def test_thinking_is_split_from_the_answer() -> None:
    assert split_thinking("<think>plan it</think>\n\nHello") == split_thinking(
        "  <think> plan it </think>Hello"
    )
    split = split_thinking("<think>plan it</think>\n\nHello")
    assert (split.thinking, split.answer, split.open) == ("plan it", "Hello", False)
    assert split_thinking("<think>still going").open
    # a template that opens the thinking in the prompt: only the end tag is written
    assert split_thinking("plan it</think>Hello").answer == "Hello"
    assert not split_thinking("Hello <think> in prose").thought
    assert supports_thinking(THINKS) and not supports_thinking(None)
    assert not supports_thinking("{{ messages[0].content }}")
    assert reasoning_effort({"thinking": "low"}) == "low"
    assert reasoning_effort({"thinking": "none"}) == "none"  # Off
    assert reasoning_effort({}) is None and reasoning_effort({"thinking": "max!"}) is None


def test_the_block_says_thinking_then_how_long(qtbot: QtBot, ember_app: QApplication) -> None:
    body = AnswerBody(MarkdownRenderer(LIGHT))
    qtbot.addWidget(body)
    body.show()
    for piece in ("<th", "ink>First, the ", "greeting."):
        body.append(piece)
    assert body.thought is not None and body.thought.title == "Thinking…"
    assert body.thought.isVisible() and not body.thought.unfolded  # folded while it thinks
    body.append("</think>Hello ")
    body.append("there.")
    assert body.thought.title == "Thought for a moment"
    assert body.text == "<think>First, the greeting.</think>Hello there."  # whole, as saved
    assert "First" not in _shown_answer(body) and "Hello there." in _shown_answer(body)
    body.set_thought_seconds(12.4)  # the saved message's
    assert body.thought.title == "Thought for 12 s"
    body.thought.button.click()
    assert body.thought.unfolded and body.thought.text.isVisible()
    assert body.thought.text.text() == "First, the greeting."
    body.set_markdown("Plain answer")
    assert not body.thought.isVisible()


def _shown_answer(body: AnswerBody) -> str:
    from app.ui.chat.message_body import RichTextLabel

    return " ".join(label.text() for label in body.findChildren(RichTextLabel))


class _Recording(ParallelFakeWorker):
    """The fake worker, its chat requests kept; models load with a template that thinks."""

    def __init__(self) -> None:
        super().__init__(tokens_per_second=200)
        self.requests: list[ChatRequest] = []

    def submit(self, request: Request, sink: Sink | None = None) -> Job:
        if isinstance(request, ChatRequest):
            self.requests.append(request)
        return super().submit(request, sink)


FAKE_ENGINE = FakeEngine(max_tokens=6)


@pytest.fixture
def fake_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Recording]:
    describe = parallel_fake._describe

    def thinking_model(request: LoadRequest) -> LoadedModel:
        from dataclasses import replace

        return replace(describe(request), chat_template=THINKS)

    monkeypatch.setattr(parallel_fake, "_describe", thinking_model)
    pieces = ("<think>", "The user ", "greets me.", "</think>", "Hello ", "there.")
    monkeypatch.setattr(parallel_fake, "PIECES", pieces)
    worker = _Recording()
    load_fake(worker, model_file(tmp_path, "qwen3-think.gguf"))
    yield worker
    worker.shutdown()


def test_a_thinking_answer_is_folded_above_it_and_timed(
    qtbot: QtBot, window: MainWindow, fake_worker: _Recording
) -> None:
    message = send(qtbot, window, "Hi")
    assert message.content == "<think>The user greets me.</think>Hello there."
    seconds: Any = message.metadata.get("thought_seconds")
    assert isinstance(seconds, float) and seconds >= 0
    qtbot.waitUntil(lambda: not widget(window, message.id).streaming)  # all on screen
    body = widget(window, message.id).body
    assert body is not None and body.thought is not None
    assert body.thought.title.startswith("Thought for") and not body.thought.unfolded
    assert "Hello there." in _shown_answer(body) and "greets" not in _shown_answer(body)
    window.controller.reload_conversation()  # as when the chat is opened again
    body = widget(window, message.id).body
    assert body is not None and body.thought is not None and body.thought.title.startswith("Th")


def test_the_thinking_control_is_saved_with_the_chat_and_sent(
    qtbot: QtBot, window: MainWindow, fake_worker: _Recording
) -> None:
    panel = window.panel
    panel.show()
    assert panel.thinking_box.isVisibleTo(panel)  # the loaded model's template thinks
    assert fake_worker.requests == [] and panel.thinking_combo.currentText() == "Model default"
    send(qtbot, window, "Hi")
    assert fake_worker.requests[-1].reasoning_effort is None  # the model's default
    panel.thinking_combo.setCurrentIndex(panel.thinking_combo.findText("Low"))
    panel.flush()
    send(qtbot, window, "Think a little")
    assert fake_worker.requests[-1].reasoning_effort == "low"
    panel.thinking_combo.setCurrentIndex(panel.thinking_combo.findText("Off"))
    panel.flush()
    send(qtbot, window, "Do not think")
    assert fake_worker.requests[-1].reasoning_effort == "none"
    conversation = window.controller.conversation_id
    window.new_chat()
    assert panel.thinking_combo.currentText() == "Model default"
    window.controller.open_conversation(conversation)
    assert panel.thinking_combo.currentText() == "Off"  # kept with the chat's settings


def test_no_thinking_control_for_a_model_that_does_not_think(
    qtbot: QtBot, ember_app: QApplication, tmp_path: Path
) -> None:
    with own_fake_window(qtbot, tmp_path, "plain.gguf") as window:
        window.panel.show()
        assert not window.panel.thinking_box.isVisibleTo(window.panel)


def test_an_answer_without_thinking_streams_without_splitting_it_again(
    qtbot: QtBot, ember_app: QApplication, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the start is known not to be thinking, each piece goes straight to the Markdown:
    a long answer is not split from its start on every piece (quadratic)."""
    from app.ui.chat import thought_block

    splits = spy(monkeypatch, thought_block, "split_thinking", len)
    body = AnswerBody(MarkdownRenderer(LIGHT))
    qtbot.addWidget(body)
    for i in range(200):
        body.append(f"word{i} ")
    assert len(splits) <= 2 and body.thought is None
    assert body.text.startswith("word0 word1") and body.text.endswith("word199 ")
