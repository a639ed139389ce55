"""Tools in the chat window, with the real model and the real mcp-server-time: the card asks,
the call runs after "Allow once", the result is folded under the card and goes back to the
model; the calls are saved, come back after a restart and are in the export; Esc cancels."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QLabel, QMenu
from pytestqt.qtbot import QtBot

from app.chats.tool_messages import tool_calls
from app.tools.config import McpConfig
from app.ui.chat.tool_card import ToolCallCard
from app.ui.chat.tool_panel import ToolPanel
from app.ui.chat.tool_turn import ToolSetup
from app.ui.main_window import MainWindow
from tests.helpers.mcp_config import time_server
from tests.helpers.scripted_engine import ScriptedEngine, call_text
from tests.helpers.tool_turn import TIME_CALL, send_until_asked

WAIT_MS = 240_000


def add_time_server(window: MainWindow, max_rounds: int = 1) -> None:
    McpConfig().add(time_server())
    window.services.settings.set("sampling.max_tokens", 40)  # room for the whole call
    window.services.settings.set("tools.max_rounds", max_rounds)  # then an answer without tools
    window.controller.new_conversation()


def answer_the_time_without_asking(qtbot: QtBot, window: MainWindow, *answers: str) -> None:
    """The time tool allowed always, the tool loop's engine scripted to call it in UTC and then
    write ``answers``: "What time is it?" is sent and answered."""
    add_time_server(window)
    window.controller.set_tool_setup(ToolSetup(("time",), "auto"))
    McpConfig().update("time", always_allow=frozenset({"get_current_time"}))
    window.controller.answers.tools.engine = ScriptedEngine([TIME_CALL, *answers])
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        window.chat.composer.send_requested.emit("What time is it?")


def test_a_chat_calls_the_time_tool_after_allow_once(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    add_time_server(window)
    controller, panel = window.controller, window.chat.tool_panel
    assert panel.button.text() == "Tools: no server chosen"
    panel.choose_servers(["time"])
    panel.choose("required")
    assert controller.tool_setup() == ToolSetup(("time",), "required")
    assert panel.button.text() == "Tools: time (a call first)"
    with qtbot.waitSignal(controller.tool_approval_requested, timeout=WAIT_MS) as asked:
        window.chat.composer.set_text("What time is it?")
        window.chat.composer.send_requested.emit("What time is it?")
    call = asked.args[0]
    assert call.tool == "get_current_time" and call.server == "time"
    card = panel.pending()
    assert isinstance(card, ToolCallCard)
    assert card.title.text() == "get_current_time · time"
    assert '"timezone"' in card.arguments.text()  # pretty-printed arguments
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        card.allow_button.click()
        assert card.state.text() == "Running… (Esc stops it)"
    assert panel.cards == {}  # done: the chat shows the call and its result instead

    answer = finished.args[0]
    branch = controller.branch
    assert [m.role for m in branch] == ["user", "assistant", "tool", "assistant"]
    assert tool_calls(branch[1])[0]["function"]["name"] == "get_current_time"
    assert branch[1].metadata["tokens"] > 0  # the call's own round, like any answer
    assert '"timezone"' in branch[2].content
    assert branch[2].metadata["decision"] == "once"
    assert branch[-1].id == answer.id and answer.status == "complete"
    for message in branch:
        assert window.chat.view.widget_for(message.id) is not None
    result = window.chat.view.widget_for(branch[2].id)
    assert result is not None and result.tool_view.toggle is not None
    assert not result.tool_view.folded[0].isVisible()  # folded under the call
    result.tool_view.toggle.click()
    assert result.tool_view.folded[0].isVisible()

    # A restart: the calls and results are in the chat, and in its export.
    conversation_id = controller.conversation_id
    assert conversation_id is not None
    window.close()
    again = make_window()
    assert again.controller.conversation_id == conversation_id
    assert [m.role for m in again.controller.branch] == ["user", "assistant", "tool", "assistant"]
    exported = again.services.store.export_markdown(conversation_id)
    assert "**Tool call:** `get_current_time`" in exported
    assert "**Result of** `get_current_time` on time:" in exported
    assert again.controller.tool_setup() == ToolSetup(("time",), "required")


def test_esc_while_a_call_waits_denies_it_and_stops_the_answer(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    add_time_server(window)
    controller = window.controller
    controller.set_tool_setup(ToolSetup(("time",), "required"))
    send_until_asked(qtbot, window, "What time is it?")
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        controller.stop()  # what Esc does
    assert finished.args[0].status == "stopped"
    tool = next(m for m in controller.branch if m.role == "tool")
    assert tool.content == "Error: the user stopped the answer before this call ran."
    qtbot.waitUntil(lambda: window.chat.tool_panel.cards == {})
    shown = window.chat.view.widget_for(tool.id)
    assert shown is not None and shown.tool_view.title is not None
    assert shown.tool_view.title.text() == "Result of get_current_time · time (denied)"
    assert not McpConfig().get("time").always_allow


def test_always_allow_asks_once_and_the_next_call_just_runs(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    """The same flow with a scripted engine (the real one above): fast and exact."""
    window = make_window()
    add_time_server(window, max_rounds=8)
    controller = window.controller
    controller.set_tool_setup(ToolSetup(("time",), "auto"))
    tokyo = call_text("get_current_time", '{"timezone": "Asia/Tokyo"}')
    controller.answers.tools.engine = ScriptedEngine([TIME_CALL, tokyo, "Noon in London."])
    asked: list[object] = []
    controller.tool_approval_requested.connect(asked.append)
    send_until_asked(qtbot, window, "What time is it?")
    card = window.chat.tool_panel.pending()
    assert isinstance(card, ToolCallCard)
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS):
        card.always_button.click()
    assert len(asked) == 1  # the second call of that tool did not ask
    assert McpConfig().get("time").always_allow == {"get_current_time"}
    roles = [m.role for m in controller.branch]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert "Asia/Tokyo" in controller.branch[4].content
    assert controller.branch[-1].content == "Noon in London."
    assert window.chat.tool_panel.cards == {}


def test_regenerate_after_a_tool_result_keeps_the_calls_and_makes_a_branch(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    answer_the_time_without_asking(qtbot, window, "First answer.", "Second answer.")
    controller = window.controller
    first = controller.branch[-1]
    assert first.content == "First answer."
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as again:
        controller.regenerate(first.id)
    second = again.args[0]
    assert second.content == "Second answer." and second.parent_id == first.parent_id
    assert [m.role for m in controller.branch] == ["user", "assistant", "tool", "assistant"]
    assert len(window.services.store.siblings(second.id)) == 2
    # The regenerated answer saw the call and its result.
    engine = controller.answers.tools.engine
    assert isinstance(engine, ScriptedEngine)
    last_request = engine.requests[-1].messages
    assert [m["role"] for m in last_request][-2:] == ["assistant", "tool"]


def test_a_result_image_is_a_thumbnail_folded_under_the_call(
    qtbot: QtBot, ember_app: object
) -> None:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QColor, QImage

    from app.chats.models import Message
    from app.tools.results import ToolImage, ToolOutput
    from app.ui.chat.tool_message import THUMBNAIL, ToolMessageView

    image = QImage(400, 200, QImage.Format.Format_RGB32)
    image.fill(QColor("red"))
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs say bytes; Qt wants str
    output = ToolOutput("[image: image/png]", images=(ToolImage("image/png", bytes(data.data())),))
    meta = {"name": "shot", "tool": "shot", "server": "screen", "output": output.to_json()}
    message = Message("m", "c", "a", "tool", output.text, "complete", 0.0, meta)
    view = ToolMessageView()
    qtbot.addWidget(view)
    view.set_message(message)
    view.show()
    assert view.title is not None and view.title.text() == "Result of shot · screen"
    thumbnail = view.folded[-1]
    assert isinstance(thumbnail, QLabel) and not thumbnail.isVisible()  # folded
    assert view.toggle is not None
    view.toggle.click()
    assert thumbnail.isVisible() and thumbnail.pixmap().width() == THUMBNAIL


def test_calls_and_results_show_in_the_chat_also_after_a_restart(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    answer_the_time_without_asking(qtbot, window, "Noon.")
    window.close()

    again = make_window()
    branch = again.controller.branch
    assert [m.role for m in branch] == ["user", "assistant", "tool", "assistant"]
    calling = again.chat.view.widget_for(branch[1].id)
    result = again.chat.view.widget_for(branch[2].id)
    assert calling is not None and result is not None
    labels = [w.text() for w in calling.tool_view.findChildren(QLabel)]
    assert "Called get_current_time" in labels
    assert any('"timezone": "UTC"' in text for text in labels)
    view = result.tool_view
    assert view.title is not None and view.title.text() == "Result of get_current_time · time"
    assert view.toggle is not None and result.body is not None and result.body.text == ""
    assert not view.folded[0].isVisible()  # folded
    view.toggle.click()
    shown = view.folded[0]
    # read as "name: value" lines (issue 23, finding 9), no longer as raw JSON
    assert isinstance(shown, QLabel) and shown.isVisible() and "datetime: " in shown.text()


def tool_items(panel: ToolPanel) -> list[str]:
    """The entries of the Tools menu's submenu of the chat's server."""
    return [a.text() for a in submenu_of(panel).actions()]


def submenu_of(panel: ToolPanel) -> QMenu:
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)  # the last menu's are gone
    (submenu,) = panel.menu.findChildren(QMenu)
    return submenu


def test_a_chat_can_turn_single_tools_off(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    add_time_server(window, max_rounds=8)
    controller, panel = window.controller, window.chat.tool_panel
    panel.choose_servers(["time"])
    panel.fill_menu()
    assert tool_items(panel) == ["Listed once the server has run in a chat"]
    engine = ScriptedEngine(["No tool needed.", "Still none."])
    controller.answers.tools.engine = engine
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS):
        window.chat.composer.send_requested.emit("Hello")
    assert "convert_time" in (engine.requests[0].messages[0]["content"] or "")
    panel.fill_menu()
    tools = {a.text(): a for a in submenu_of(panel).actions()}
    assert set(tools) == {"get_current_time", "convert_time"}
    tools["convert_time"].setChecked(False)
    assert controller.tool_setup().tools_off == ("time/convert_time",)
    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS):
        window.chat.composer.send_requested.emit("And now?")
    offered = engine.requests[1].messages[0]["content"] or ""
    assert "get_current_time" in offered and "convert_time" not in offered
