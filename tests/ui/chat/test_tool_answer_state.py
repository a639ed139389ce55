"""While an answer with tools is in progress, in the real window with the real MCP test server
(the model's rounds scripted, or the fake worker's): what the status bar says, and which
actions its chat's messages offer.

Proves: while a call waits for Allow the bar says "Waiting for your approval to run hang"
(amber dot), while it runs "Running hang…", between the rounds "Generating…" (it said "Idle"
whenever no engine job of the session ran), and a round written on the engine worker is not
counted as an API client's answer; meanwhile the message that made the call, its result and
the question offer only copy (regenerate, edit and delete only brought the "busy" banner),
and once the answer ends (stopped, finished) they offer them all again. An answer stopped while
its call runs does not show the stats of the round that made the call (that message has them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QEnterEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.types import Request
from app.engine.worker import EngineWorker, Job
from app.ui.chat.message_widget import MessageWidget
from app.ui.chat.tool_card import ToolCallCard
from app.ui.engine_session import GENERATING, LOADING
from app.ui.main_window import MainWindow
from tests.helpers.fake_app import load_fake, model_file
from tests.helpers.mcp_config import sdk_server
from tests.helpers.parallel_fake import ParallelFakeWorker
from tests.helpers.scripted_engine import ScriptedEngine, call_text
from tests.helpers.tool_turn import new_chat_with_tools, send_until_asked
from tests.helpers.window import widget

WAIT_MS = 60_000


@pytest.fixture
def engine_worker(ember_home: Path, tmp_path: Path) -> Iterator[EngineWorker]:
    """A slow fake worker: a round written on it runs until it is stopped."""
    worker = ParallelFakeWorker(tokens_per_second=5)
    load_fake(worker, model_file(tmp_path, "small.gguf"))
    yield worker
    worker.shutdown()


class HoldsTheSecondRound(ScriptedEngine):
    """The first round calls the tool; the second waits until it is cancelled."""

    def submit(self, request: Request) -> Job:
        self.hold = len(self.requests) >= 1
        return super().submit(request)


def hovered(message: MessageWidget) -> list[str]:
    """The actions ``message`` offers with the pointer over it."""
    QApplication.sendEvent(message, QEnterEvent(QPointF(4, 4), QPointF(4, 4), QPointF(4, 4)))
    actions: tuple[str, ...] = ("copy", "edit", "regenerate", "delete")
    buttons = message._buttons
    return [a for a in actions if a in buttons and buttons[a].isVisibleTo(message)]


def status(window: MainWindow) -> tuple[str, object]:
    return window.status.state_label.text(), window.status.dot.property("state")


def test_while_a_call_waits_and_runs_the_bar_says_so_and_the_chat_offers_only_copy(
    qtbot: QtBot, make_window: Callable[[], MainWindow], tmp_path: Path
) -> None:
    window = make_window()
    slow = sdk_server("slow", tmp_path / "markers")
    new_chat_with_tools(window, slow, ScriptedEngine([call_text("hang", "{}"), "Done."]))
    controller = window.controller

    send_until_asked(qtbot, window, "Wait for it.")
    assert status(window) == ("Waiting for your approval to run hang", LOADING)
    question, call = controller.branch[:2]
    assert call.metadata.get("tool_calls") and call.status == "complete"
    assert hovered(widget(window, call.id)) == ["copy"]  # it offered regenerate and delete
    assert hovered(widget(window, question.id)) == ["copy"]  # and edit, delete
    card = window.chat.tool_panel.pending()
    assert isinstance(card, ToolCallCard)
    qtbot.waitUntil(card.isVisible)  # shown by its layout in the next event-loop turn
    window.grab().save(str(tmp_path / "tool_answer_waiting.png"))

    with qtbot.waitSignal(controller.tool_call_running, timeout=WAIT_MS):
        card.allow_button.click()
    assert status(window) == ("Running hang…", GENERATING)
    assert hovered(widget(window, call.id)) == ["copy"]
    window.grab().save(str(tmp_path / "tool_answer_running.png"))

    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        controller.stop()  # what Esc does
    stopped = finished.args[0]
    assert stopped.status == "stopped" and stopped.content == ""
    # it wrote nothing: the stats of the round that made the call stay that message's own
    assert "tokens" not in stopped.metadata and call.metadata["tokens"] > 0
    assert widget(window, stopped.id).stats_label.text() == ""
    text, dot = status(window)
    assert text.startswith("Idle · small") and dot == "idle"
    assert hovered(widget(window, call.id)) == ["copy", "regenerate", "delete"]
    assert hovered(widget(window, question.id)) == ["copy", "edit", "delete"]
    window.grab().save(str(tmp_path / "tool_answer_stopped.png"))


def test_between_the_rounds_the_answer_counts_as_generating(
    qtbot: QtBot, make_window: Callable[[], MainWindow], tmp_path: Path
) -> None:
    window = make_window()
    engine = HoldsTheSecondRound([call_text("echo", '{"text": "hi"}')])
    new_chat_with_tools(window, sdk_server("slow", tmp_path / "markers"), engine)
    controller = window.controller

    send_until_asked(qtbot, window, "Say hi.")
    card = window.chat.tool_panel.pending()
    assert isinstance(card, ToolCallCard)
    card.allow_button.click()
    # the next round asked (and held), the result and the new message saved
    qtbot.waitUntil(
        lambda: len(engine.requests) == 2 and len(controller.branch) == 4, timeout=WAIT_MS
    )
    assert [m.role for m in controller.branch] == ["user", "assistant", "tool", "assistant"]
    assert status(window) == ("Generating…", GENERATING)  # it said "Idle · small · …"
    _, call, result, _ = controller.branch
    assert hovered(widget(window, call.id)) == ["copy"]
    assert hovered(widget(window, result.id)) == ["copy"]

    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS):
        controller.stop()
    assert status(window)[0].startswith("Idle · small")
    assert hovered(widget(window, result.id)) == ["copy", "regenerate", "delete"]


def test_a_round_on_the_engine_worker_is_not_an_api_clients_answer(
    qtbot: QtBot,
    make_window: Callable[[], MainWindow],
    tmp_path: Path,
    engine_worker: ParallelFakeWorker,
) -> None:
    window = make_window()
    new_chat_with_tools(window, sdk_server("slow", tmp_path / "markers"))
    window.services.settings.set("sampling.max_tokens", 1000)  # it writes until stopped
    controller = window.controller
    window.chat.composer.send_requested.emit("Tell me a story.")
    qtbot.waitUntil(lambda: engine_worker.running == 1, timeout=WAIT_MS)  # its first round
    assert controller.answer is not None and controller.answer.turn is not None
    window.status._poll_api_answers()  # what its timer does twice a second
    assert status(window) == ("Generating…", GENERATING)  # not "… (1 for an API client)"

    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS):
        controller.stop()
    qtbot.waitUntil(lambda: engine_worker.running == 0, timeout=WAIT_MS)
    window.status._poll_api_answers()
    assert status(window)[0].startswith("Idle · small")
