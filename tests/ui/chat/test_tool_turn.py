"""A chat's tool loop runs as a task of the app's task runner (the "tools" lane): Esc stops it
with one ``done``; quitting stops it through the task's token (``LoopControl.cancel``) instead
of leaving a thread that waits for an answer nobody will give. With a scripted engine and the
real mcp-server-time."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.tools.loop import LoopResult
from app.tools.manager import ToolManager
from app.ui.task_runner import StopToken, shutdown_tasks, tasks
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tool_turn import TIME_CALL, WAIT_MS, make_turn


def test_the_tool_loop_is_a_task_on_the_tools_lane_and_esc_ends_it_once(
    qtbot: QtBot, ember_app: QApplication, time_manager: ToolManager
) -> None:
    turn = make_turn(time_manager, ScriptedEngine([TIME_CALL, "never written"]))
    done: list[object] = []
    turn.done.connect(done.append)
    with qtbot.waitSignal(turn.approval_requested, timeout=WAIT_MS):
        turn.start([{"role": "user", "content": "What time is it?"}])
    assert turn.task is not None and turn.task.lane is tasks().lanes["tools"]
    assert isinstance(turn.task.token, StopToken)
    assert tasks().busy("tools")
    with qtbot.waitSignal(turn.done, timeout=WAIT_MS):
        turn.cancel()  # what Esc does: denies the call, stops the loop
    assert turn.loop.control.cancelled
    qtbot.waitUntil(lambda: turn.task is not None and turn.task.settled)
    assert len(done) == 1 and isinstance(done[0], LoopResult) and done[0].cancelled
    turn.deleteLater()


def test_quitting_stops_a_tool_loop_that_waits_for_a_decision(
    qtbot: QtBot, ember_app: QApplication, time_manager: ToolManager
) -> None:
    turn = make_turn(time_manager, ScriptedEngine([TIME_CALL, "never written"]))
    with qtbot.waitSignal(turn.approval_requested, timeout=WAIT_MS):
        turn.start([{"role": "user", "content": "What time is it?"}])
    task = turn.task
    assert task is not None and not task.finished.is_set()
    abandoned = shutdown_tasks(wait=0)  # the tools lane never holds the quit
    assert abandoned == [task]
    assert turn.loop.control.cancelled  # the token stopped the loop ...
    assert task.finished.wait(WAIT_MS / 1000)  # ... so its thread ends instead of waiting
    turn.deleteLater()
