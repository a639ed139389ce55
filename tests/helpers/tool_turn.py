"""A chat's tool turn on the scripted engine and the real mcp-server-time: the call the model
writes, and the turn to run it in."""

from __future__ import annotations

from app.engine.types import LoadedModel, LoadParams, SamplingParams
from app.tools.manager import ToolManager
from app.ui.chat.tool_turn import ToolSetup, ToolTurn
from tests.helpers.scripted_engine import ScriptedEngine, call_text

WAIT_MS = 60_000  # a failsafe for a busy machine, never reached when it works


TIME_CALL = call_text("get_current_time", '{"timezone": "UTC"}')


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
