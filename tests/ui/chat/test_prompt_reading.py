"""Reading a long prompt shows progress: the answer's message says "Reading the prompt… 40%"
and so does the status bar, from the engine's chunk progress (PromptProgress); the context
meter never drops to 0 meanwhile, and its tooltip is on all of it. The real test model."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.ui.main_window import MainWindow
from tests.helpers.window import ANSWER_TIMEOUT, type_and_send

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
    # a long prompt on a busy machine: a failsafe, never reached when it works
    with qtbot.waitSignal(controller.answer_finished, timeout=4 * ANSWER_TIMEOUT):
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


def test_the_meter_keeps_what_it_showed_at_the_send_until_the_prompt_is_counted(
    qtbot: QtBot, window: MainWindow
) -> None:
    """With files the meter counted them before the send; while they are read (the answer's
    prompt not counted yet) it does not fall back to the question's words alone."""
    controller, composer = window.controller, window.chat.composer
    composer.set_text("Summarize it")
    composer.set_context(4177, composer.meter.total or 2048)  # as with a long PDF attached
    with qtbot.waitSignal(controller.answer_finished, timeout=ANSWER_TIMEOUT):
        composer.send_button.click()
        answer = controller.answer
        assert answer is not None and answer.prompt_tokens == 0  # not counted yet
        assert controller.context_used() >= 4177 and composer.meter.used >= 4177
    assert controller.context_used() < 4177  # then the real count
