"""What a chat with tools shows while the model writes: "Writing a tool call" while a call is
held back until complete, and the model's thinking between <think> tags in the answer's text
(folded by the chat, as without tools). A scripted engine and the real mcp-server-time."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.types import ChatRequest, Delta, Finished, PromptProgress, Request, Started, Usage
from app.engine.worker import Job
from app.tools.manager import ToolManager
from app.ui.chat.tool_turn import ToolSetup
from app.ui.chat.waiting_label import WRITING_CALL, WaitingLabel
from tests.helpers.scripted_engine import ScriptedEngine
from tests.helpers.tool_turn import TIME_CALL, WAIT_MS, make_turn

QUESTION = [{"role": "user", "content": "What time is it?"}]


def test_the_chat_hears_that_a_call_is_being_written(
    qtbot: QtBot, ember_app: QApplication, time_manager: ToolManager
) -> None:
    turn = make_turn(time_manager, ScriptedEngine(["Let me look. " + TIME_CALL, "never written"]))
    events: list[str] = []
    turn.writing.connect(lambda: events.append("writing"))
    turn.text.connect(lambda text: events.append(f"text:{text}"))
    turn.approval_requested.connect(lambda _call: events.append("asked"))
    with qtbot.waitSignal(turn.approval_requested, timeout=WAIT_MS):
        turn.start(QUESTION)  # type: ignore[arg-type]
    assert events.index("writing") < events.index("asked")
    assert events.count("writing") == 1
    with qtbot.waitSignal(turn.done, timeout=WAIT_MS):
        turn.cancel()
    turn.deleteLater()
    label = WaitingLabel()
    label.set_what(WRITING_CALL)
    label.run(True)
    assert label.moving  # its dots move, as "Thinking"'s do
    label.deleteLater()


def test_thinking_reaches_the_chat_between_think_tags(
    qtbot: QtBot, ember_app: QApplication, time_manager: ToolManager
) -> None:
    engine = ScriptedEngine(["<think>The user wants the time.</think>I can tell without tools."])
    turn = make_turn(time_manager, engine)
    assert turn.setup == ToolSetup(("time",), "auto")
    texts: list[str] = []
    turn.text.connect(texts.append)
    with qtbot.waitSignal(turn.done, timeout=WAIT_MS) as done:
        turn.start(QUESTION)  # type: ignore[arg-type]
    assert "".join(texts) == "<think>The user wants the time.</think>I can tell without tools."
    assert done.args[0].answer == "I can tell without tools."  # the history gets the answer
    turn.deleteLater()


class _ReadingEngine(ScriptedEngine):
    """Reads a long prompt in two chunks before it answers."""

    def submit(self, request: Request) -> Job:
        assert isinstance(request, ChatRequest)
        self.requests.append(request)
        job = Job(request)
        job.emit(Started(job.id))
        job.emit(PromptProgress(job.id, 512, 1400))
        job.emit(PromptProgress(job.id, 1024, 1400))
        job.emit(Delta(job.id, "Noon."))
        job.finish(Finished(job.id, "stop", Usage(1400, 2)))
        return job


def test_a_round_says_how_far_it_has_read_its_prompt(
    qtbot: QtBot, ember_app: QApplication, time_manager: ToolManager
) -> None:
    turn = make_turn(time_manager, _ReadingEngine([]))
    read: list[tuple[int, int]] = []
    turn.reading.connect(lambda done, total: read.append((done, total)))
    with qtbot.waitSignal(turn.done, timeout=WAIT_MS):
        turn.start(QUESTION)  # type: ignore[arg-type]
    assert read == [(512, 1400), (1024, 1400)]
    turn.deleteLater()
