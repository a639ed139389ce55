"""What an answer's message says before its text comes, in the real window with the real
mcp-server-time (the model's rounds scripted: exact and fast).

Proves: while a server's command line waits on its card, the message says nothing (no
"Thinking" under the card that asks), also after switching chats and back; after "Run it" it
says "Starting time…" while the server connects; while a call waits for Allow and while it
runs, no message thinks (the card says it); once the results are saved, the next round's
message is there at once and says "Thinking" while the model reads them. A call of a tool that
is always allowed gets its card too while it runs (nothing showed that it ran), also after
switching chats and back."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.engine.types import Request
from app.engine.worker import Job
from app.tools.config import McpConfig, ServerConfig
from app.ui.chat.message_widget import MessageWidget
from app.ui.chat.tool_card import CommandCard, ToolCallCard
from app.ui.chat.tool_turn import ToolSetup
from app.ui.chat.waiting_label import THINKING, WRITING_CALL
from app.ui.main_window import MainWindow
from tests.helpers.mcp_config import sdk_server
from tests.helpers.scripted_engine import ScriptedEngine, call_text
from tests.helpers.tool_turn import TIME_CALL, send_until_asked
from tests.helpers.window import widget

WAIT_MS = 60_000


class HoldsTheSecondRound(ScriptedEngine):
    """The first round calls the tool; the second waits until it is cancelled."""

    def submit(self, request: Request) -> Job:
        self.hold = len(self.requests) >= 1
        return super().submit(request)


def thinking(window: MainWindow) -> list[MessageWidget]:
    """The messages on screen that show a waiting label."""
    return [w for w in window.chat.view.widgets() if not w.is_user and w.thinking.isVisible()]


def streaming_widget(window: MainWindow) -> MessageWidget:
    answer = window.controller.answer
    assert answer is not None and answer.message_id
    return widget(window, answer.message_id)


def test_the_message_tells_what_the_answer_waits_for(
    qtbot: QtBot, make_window: Callable[[], MainWindow]
) -> None:
    window = make_window()
    McpConfig().add(ServerConfig("time", command=sys.executable, args=("-m", "mcp_server_time")))
    window.services.settings.set("tools.max_rounds", 8)
    controller = window.controller
    controller.new_conversation()
    controller.set_tool_setup(ToolSetup(("time",), "auto"))
    engine = HoldsTheSecondRound([TIME_CALL])
    controller.answers.tools.engine = engine
    said: list[str] = []
    controller.answer_waiting.connect(lambda _id, text: said.append(text))

    send_until_asked(qtbot, window, "What time is it?")
    assert isinstance(window.chat.tool_panel.pending(), CommandCard)
    first = streaming_widget(window)
    assert first.streaming and not first.thinking.isVisible()  # the card asks, not "Thinking"
    assert thinking(window) == []
    conversation_id = controller.conversation_id
    controller.new_conversation()
    controller.open_conversation(conversation_id)  # still waiting: still nothing under the card
    card = window.chat.tool_panel.pending()
    assert isinstance(card, CommandCard)
    assert streaming_widget(window).streaming and thinking(window) == []

    with qtbot.waitSignal(controller.tool_approval_requested, timeout=WAIT_MS) as asked:
        card.run_button.click()
    assert "Starting time…" in said  # while the server connected
    # then the model read the question, then wrote a call (held back until complete)
    assert said[-2:] == [THINKING, WRITING_CALL]
    call = asked.args[0]
    card = window.chat.tool_panel.pending()
    assert isinstance(card, ToolCallCard) and card.call is call
    assert controller.answer is not None and controller.answer.message_id == ""
    assert thinking(window) == []  # the call waits on its card; its message shows the call

    with qtbot.waitSignal(controller.tool_call_finished, timeout=WAIT_MS):
        card.allow_button.click()
        assert card.state.text() == "Running… (Esc stops it)"
        assert thinking(window) == []
    # the next round asked (loop thread), the result and the new message saved (GUI thread)
    qtbot.waitUntil(
        lambda: len(engine.requests) == 2 and len(controller.branch) == 4, timeout=WAIT_MS
    )
    roles = [m.role for m in controller.branch]
    assert roles == ["user", "assistant", "tool", "assistant"]
    last = streaming_widget(window)
    assert last.message.id == controller.branch[-1].id and last.streaming
    assert thinking(window) == [last] and last.thinking.text().startswith(THINKING)

    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        controller.stop()
    stopped = finished.args[0]
    assert isinstance(stopped, Message) and stopped.id == last.message.id
    assert stopped.status == "stopped" and thinking(window) == []


def test_a_call_always_allowed_shows_its_card_while_it_runs(
    qtbot: QtBot, make_window: Callable[[], MainWindow], tmp_path: Path
) -> None:
    window = make_window()
    server = sdk_server("slow", tmp_path / "markers")  # its "hang" runs until it is cancelled
    McpConfig().add(dataclasses.replace(server, always_allow=frozenset({"hang"})))
    controller, panel = window.controller, window.chat.tool_panel
    controller.new_conversation()
    controller.set_tool_setup(ToolSetup(("slow",), "auto"))
    controller.answers.tools.engine = ScriptedEngine([call_text("hang", "{}"), "Done."])
    asked: list[object] = []
    controller.tool_approval_requested.connect(asked.append)

    with qtbot.waitSignal(controller.tool_call_running, timeout=WAIT_MS) as running:
        window.chat.composer.send_requested.emit("Wait for it.")
    assert asked == []  # always allowed: nobody was asked
    card = panel.cards.get(running.args[0].id)
    assert isinstance(card, ToolCallCard)
    qtbot.waitUntil(card.isVisible)  # shown by its layout in the next event-loop turn
    assert card.title.text() == "hang · slow"
    assert card.state.text() == "Running… (Esc stops it)" and not card.waiting
    assert not card.allow_button.isVisible() and not card.deny_button.isVisible()
    assert thinking(window) == []

    conversation_id = controller.conversation_id
    controller.new_conversation()
    assert panel.cards == {}
    controller.open_conversation(conversation_id)  # still running: its card is back
    again = panel.cards.get(running.args[0].id)
    assert isinstance(again, ToolCallCard) and again.state.text() == "Running… (Esc stops it)"
    assert not again.waiting and thinking(window) == []

    with qtbot.waitSignal(controller.answer_finished, timeout=WAIT_MS) as finished:
        controller.stop()  # what Esc does
    assert finished.args[0].status == "stopped"
    qtbot.waitUntil(lambda: panel.cards == {}, timeout=WAIT_MS)
    tool = next(m for m in controller.branch if m.role == "tool")
    assert tool.content == "Error: the user cancelled this call."
