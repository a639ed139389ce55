"""What a chat with tools shows beyond the call card: a server's command line asked about in
the chat before it first runs (Run it / Don't run), Esc while the servers are still connecting,
the stats of the message that called a tool, and a real server's image as a thumbnail. With a
scripted engine and real MCP servers (mcp-server-time, the SDK-written test server)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from app.tools.config import McpConfig, ServerConfig
from app.ui.chat.tool_card import CommandCard
from app.ui.chat.tool_message import THUMBNAIL
from app.ui.chat.tool_turn import CommandRequest, ToolSetup
from app.ui.main_window import MainWindow
from tests.helpers.mcp_config import TIME_ARGS, approved, sdk_server, silent_server
from tests.helpers.mcp_servers import PICTURE_SIZE
from tests.helpers.scripted_engine import ScriptedEngine, call_text
from tests.helpers.tool_turn import TIME_CALL, new_chat_with_tools, send_until_asked

WAIT_MS = 120_000  # a failsafe for a busy machine, never reached when it works
TIME = ServerConfig("time", command=sys.executable, args=TIME_ARGS)


def test_a_command_line_never_run_is_asked_about_in_the_chat_and_runs_after_run_it(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    new_chat_with_tools(window, TIME, ScriptedEngine([TIME_CALL, "Noon."]))
    McpConfig().update("time", always_allow=frozenset({"get_current_time"}))
    controller, panel = window.controller, window.chat.tool_panel
    assert isinstance(send_until_asked(qtbot, window, "What time is it?"), CommandRequest)
    card = panel.pending()
    assert isinstance(card, CommandCard)
    assert card.title.text() == "Start the MCP server time?"
    assert card.command.text() == TIME.command_line  # the exact command line
    assert not controller.answers.tools.manager.log_path("time").exists()  # nothing ran yet
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        card.run_button.click()
    assert finished.args[0].status == "complete" and finished.args[0].content == "Noon."
    assert not McpConfig().get("time").needs_approval  # approved for good
    assert [m.role for m in controller.branch] == ["user", "assistant", "tool", "assistant"]
    assert '"timezone"' in controller.branch[2].content  # the server ran and answered
    assert panel.cards == {}


def asked_to_start_time(qtbot: QtBot, window: MainWindow, answer: str) -> ScriptedEngine:
    """A new chat offered the time server never run: "What time is it?" sent, and the chat asks
    whether to start the server. The tool loop's engine, which would write ``answer``."""
    engine = ScriptedEngine([answer])
    new_chat_with_tools(window, TIME, engine)
    assert isinstance(send_until_asked(qtbot, window, "What time is it?"), CommandRequest)
    return engine


def test_dont_run_answers_without_that_servers_tools_and_says_so(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    engine = asked_to_start_time(qtbot, window, "Without tools, I cannot tell the time.")
    controller, panel = window.controller, window.chat.tool_panel
    card = panel.pending()
    assert isinstance(card, CommandCard)
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        card.skip_button.click()
    answer = finished.args[0]
    assert answer.status == "complete"
    assert answer.content == "Without tools, I cannot tell the time."
    (request,) = engine.requests
    assert request.tools is None
    assert all("get_current_time" not in (m.get("content") or "") for m in request.messages)
    assert McpConfig().get("time").needs_approval  # asked again next time
    assert not controller.answers.tools.manager.log_path("time").exists()  # it never ran
    assert panel.cards == {card.call.id: card} and panel.pending() is None  # a note stays
    assert card.title.text() == "time was not started"
    assert "goes on without time's tools" in card.state.text()
    send_until_asked(qtbot, window, "And now?")  # a new answer: a new question
    assert isinstance(panel.pending(), CommandCard) and card not in panel.cards.values()


def test_esc_while_a_command_line_is_asked_about_stops_the_answer_and_runs_nothing(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    engine = asked_to_start_time(qtbot, window, "never asked")
    controller, panel = window.controller, window.chat.tool_panel
    assert isinstance(panel.pending(), CommandCard)
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        controller.stop()  # what Esc does
    assert finished.args[0].status == "stopped" and engine.requests == []
    qtbot.waitUntil(lambda: panel.cards == {})  # no note: the answer itself was stopped
    assert McpConfig().get("time").needs_approval
    assert not controller.answers.tools.manager.log_path("time").exists()


def test_esc_while_a_server_is_still_connecting_stops_the_answer_at_once(
    qtbot: QtBot, make_window: Callable[[], MainWindow], tmp_path: Path
) -> None:
    window = make_window()
    started = tmp_path / "pid"
    engine = ScriptedEngine(["never asked"])
    new_chat_with_tools(
        window, silent_server("silent", started), engine
    )  # connecting waits out 30 s
    controller = window.controller
    window.chat.composer.send_requested.emit("What time is it?")
    qtbot.waitUntil(started.exists, timeout=WAIT_MS)
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        controller.stop()  # what Esc does
    stopped = finished.args[0]
    assert stopped.status == "stopped" and "error" not in stopped.metadata
    assert controller.answer is None and engine.requests == []
    # Ready for the next question at once (this chat without the silent server).
    controller.set_tool_setup(ToolSetup())
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as again:
        window.chat.composer.send_requested.emit("Hello?")
    assert again.args[0].status == "complete"


def test_the_message_that_calls_a_tool_shows_the_tokens_it_produced(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    new_chat_with_tools(window, approved(TIME), ScriptedEngine([TIME_CALL, "Noon."]))
    McpConfig().update("time", always_allow=frozenset({"get_current_time"}))
    controller = window.controller
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS):
        window.chat.composer.send_requested.emit("What time is it?")
    calling, answer = controller.branch[1], controller.branch[3]
    assert calling.metadata["tokens"] == len(TIME_CALL)  # its own round, not 0 nor the total
    assert calling.metadata["prompt_tokens"] == 100
    assert answer.metadata["tokens"] == len("Noon.")
    shown = window.chat.view.widget_for(calling.id)
    assert shown is not None
    assert shown.stats_label.text().startswith(f"{len(TIME_CALL)} tokens")
    window.close()
    again = make_window()  # reopened: the same stats
    assert again.controller.branch[1].metadata["tokens"] == len(TIME_CALL)


def test_an_image_from_a_real_server_is_a_thumbnail_under_the_call(
    qtbot: QtBot, make_window: Callable[[], MainWindow], tmp_path: Path
) -> None:
    window = make_window()
    pictures = sdk_server("pictures", tmp_path / "markers")
    engine = ScriptedEngine([call_text("picture", "{}"), "A red rectangle."])
    new_chat_with_tools(window, pictures, engine)
    McpConfig().update("pictures", always_allow=frozenset({"picture"}))
    controller = window.controller
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS):
        window.chat.composer.send_requested.emit("Show me a picture")
    result = controller.branch[2]
    assert result.role == "tool" and result.content == "A red rectangle.\n[image: image/png]"
    (image,) = result.metadata["output"]["images"]
    assert image["mime"] == "image/png"
    shown = window.chat.view.widget_for(result.id)
    assert shown is not None and shown.tool_view.toggle is not None
    thumbnail = shown.tool_view.folded[-1]
    assert isinstance(thumbnail, QLabel) and not thumbnail.isVisible()  # folded with the text
    shown.tool_view.toggle.click()
    assert thumbnail.isVisible()
    width, height = PICTURE_SIZE
    assert thumbnail.pixmap().width() == THUMBNAIL
    assert thumbnail.pixmap().height() == THUMBNAIL * height // width
    assert thumbnail.pixmap().toImage().pixelColor(5, 5).name() == "#ff0000"
