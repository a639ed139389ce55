"""Reading a long prompt shows progress: the answer's message says "Reading the prompt… 40%"
and so does the status bar, from the engine's chunk progress (PromptProgress); the context
meter never drops to 0 meanwhile, and its tooltip is on all of it. The real test model."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.ui.helpers import ANSWER_TIMEOUT, type_and_send

# About 1,400 tokens: three chunks of the default 512-token batch.
LONG = "Please read this list: " + " ".join(f"item{i}" for i in range(450))


def test_a_long_prompt_shows_how_far_it_has_been_read(qtbot: QtBot, window: MainWindow) -> None:
    controller = window.controller
    waiting: list[str] = []
    status: list[str] = []
    used: list[int] = []
    controller.answers.waiting_changed.connect(lambda _c, _m, text: waiting.append(text))
    controller.answers.activity_changed.connect(
        lambda: status.append(window.status.state_label.text())
    )
    controller.context_changed.connect(lambda n, _total: used.append(n))
    before = controller.context_used()
    with qtbot.waitSignal(controller.answer_finished, timeout=ANSWER_TIMEOUT):
        type_and_send(window, LONG)
        assert controller.answer is not None
        assert controller.context_used() > before  # counted, not 0, before the answer starts
    reading = [t for t in waiting if t.startswith("Reading the prompt… ")]
    assert reading, waiting
    percents = [int(t.removeprefix("Reading the prompt… ").rstrip("%")) for t in reading]
    assert percents == sorted(percents) and 0 < percents[0] < 100
    assert any(s.startswith("Reading the prompt… ") for s in status), status
    assert used and min(used) > before  # never 0 while the prompt was read
    meter = window.chat.composer.meter
    assert meter.label.toolTip() == meter.toolTip() != ""
