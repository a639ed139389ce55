"""A chat's tool turn on the scripted engine and the real mcp-server-time: the call the model
writes, the turn to run it in, and a window's chat sent a message that the turn asks about."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.engine.types import LoadedModel, LoadParams, SamplingParams
from app.tools.config import McpConfig, ServerConfig
from app.tools.manager import ToolManager
from app.ui.chat.tool_turn import ToolSetup, ToolTurn
from app.ui.main_window import MainWindow
from tests.helpers.scripted_engine import ScriptedEngine, call_text

WAIT_MS = 60_000  # a failsafe for a busy machine, never reached when it works
ASK_MS = 240_000  # the same, for a real model's round that writes the call


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


def send_until_asked(qtbot: QtBot, window: MainWindow, text: str) -> object:
    """Send ``text`` in the window's chat; what the tool turn asks the user to approve (a call,
    or a server's command line), once it asks."""
    with qtbot.waitSignal(window.controller.tool_approval_requested, timeout=ASK_MS) as asked:
        window.chat.composer.send_requested.emit(text)
    return asked.args[0]


def offer_tools(
    window: MainWindow, server: ServerConfig, engine: ScriptedEngine | None = None
) -> None:
    """The window's chat offered ``server``'s tools (the server added to the MCP config), the
    tool loop's model being ``engine`` (none: the window's own)."""
    McpConfig().add(server)
    window.controller.set_tool_setup(ToolSetup((server.name,), "auto"))
    if engine is not None:
        window.controller.answers.tools.engine = engine


def new_chat_with_tools(
    window: MainWindow, server: ServerConfig, engine: ScriptedEngine | None = None
) -> None:
    """A new chat offered ``server``'s tools for up to 8 rounds (see ``offer_tools``)."""
    window.services.settings.set("tools.max_rounds", 8)
    window.controller.new_conversation()
    offer_tools(window, server, engine)
