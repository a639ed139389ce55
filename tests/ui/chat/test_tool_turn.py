"""A chat's tool loop runs as a task of the app's task runner (the "tools" lane): Esc stops it
with one ``done``; quitting stops it through the task's token (``LoopControl.cancel``) instead
of leaving a thread that waits for an answer nobody will give. With a scripted engine and the
real mcp-server-time."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.types import LoadedModel, LoadParams, SamplingParams
from app.tools.config import McpConfig, ServerConfig
from app.tools.loop import LoopResult
from app.tools.manager import ToolManager
from app.ui.chat.tool_turn import ToolSetup, ToolTurn
from app.ui.task_runner import StopToken, shutdown_tasks, tasks
from tests.helpers.scripted_engine import ScriptedEngine, call_text

WAIT_MS = 60_000  # a failsafe for a busy machine, never reached when it works
TIME_CALL = call_text("get_current_time", '{"timezone": "UTC"}')


@pytest.fixture
def manager(ember_home: Path) -> Iterator[ToolManager]:
    server = ServerConfig("time", command=sys.executable, args=("-m", "mcp_server_time"))
    config = McpConfig()
    config.add(dataclasses.replace(server, approved_command=server.command_line))
    manager = ToolManager(config)
    yield manager
    manager.shutdown()


def make_turn(manager: ToolManager, engine: ScriptedEngine) -> ToolTurn:
    loaded = LoadedModel("scripted", "scripted.gguf", 2048, 2048, 1, LoadParams(), None, False, 0)
    return ToolTurn(
        engine,
        manager,
        ToolSetup(("time",), "auto"),
        loaded,
        SamplingParams(),
        timeout=30.0,
        max_rounds=2,
    )


def test_the_tool_loop_is_a_task_on_the_tools_lane_and_esc_ends_it_once(
    qtbot: QtBot, ember_app: QApplication, manager: ToolManager
) -> None:
    turn = make_turn(manager, ScriptedEngine([TIME_CALL, "never written"]))
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
    qtbot: QtBot, ember_app: QApplication, manager: ToolManager
) -> None:
    turn = make_turn(manager, ScriptedEngine([TIME_CALL, "never written"]))
    with qtbot.waitSignal(turn.approval_requested, timeout=WAIT_MS):
        turn.start([{"role": "user", "content": "What time is it?"}])
    task = turn.task
    assert task is not None and not task.finished.is_set()
    abandoned = shutdown_tasks(wait=0)  # the tools lane never holds the quit
    assert abandoned == [task]
    assert turn.loop.control.cancelled  # the token stopped the loop ...
    assert task.finished.wait(WAIT_MS / 1000)  # ... so its thread ends instead of waiting
    turn.deleteLater()
