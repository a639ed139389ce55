"""Answers written with tools, for the ``AnswerRunner``: each runs a ``ToolTurn`` and is saved
as it goes, so a call and its result survive closing or killing the app.

The streaming answer message becomes the assistant message that calls the tools (its text, if
the model wrote any, ``tool_calls`` and the stats of the round that wrote it in its metadata);
each result is a ``tool`` message under it; the next round streams into a new assistant
message under the last result. The runner's ``message_saved`` tells the chat about each message
saved mid-answer. Calls wait for the person (``approval_requested``; ``decide`` answers); Esc
cancels (``AnswerRunner.stop``).

What the person sees while no text streams: the streaming message says "Starting <server>…"
while the chat's servers connect, nothing while a server's command line waits on its card
(the card asks), "Thinking" while the model reads; a call waits and runs on its card, also one
always allowed (``call_running``; the message that made it shows the call); once a round's
results are all saved, the next round's message streams at once (it says "Thinking" while the
model reads the results).

The MCP servers are the runner's ``manager`` (made on first use, stopped at quit).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Slot

from app.chats.models import ChatStoreError, Status
from app.chats.tool_messages import call_metadata, chat_messages, result_metadata
from app.engine.types import ChatMessage, Failed, FinalEvent, LoadedModel
from app.ui.chat.chat_record import answer_stats, save_partial_stats
from app.ui.chat.tool_turn import CommandRequest, ToolTurn
from app.ui.chat.waiting_label import THINKING, WRITING_CALL

if TYPE_CHECKING:  # the tools are imported with their first use, not at start-up
    from app.tools.loop import Engine, ToolCall
    from app.tools.manager import ToolManager
    from app.ui.chat.answers import Answer, AnswerRunner

log = logging.getLogger(__name__)


class ToolAnswers(QObject):
    """See the module docstring. GUI thread only."""

    def __init__(self, runner: AnswerRunner) -> None:
        super().__init__(runner)
        self.runner = runner
        self._manager: ToolManager | None = None
        self._calls: dict[str, ToolCall] = {}  # call id -> the call, until its result is saved
        self._rounds: dict[str, FinalEvent] = {}  # conversation id -> its answer's last round
        # conversation id -> the round whose calls were saved last (its message has its stats)
        self._saved_rounds: dict[str, FinalEvent] = {}
        self._due: dict[str, int] = {}  # conversation id -> results of its round still to come
        self.engine: Engine | None = None  # None: the session's engine worker

    @property
    def manager(self) -> ToolManager:
        if self._manager is None:
            from app.tools.manager import ToolManager

            self._manager = ToolManager()
        return self._manager

    def run(self, answer: Answer, loaded: LoadedModel, dropped: int) -> None:
        """Answer with tools; ``dropped``: the oldest messages the context has no room for."""
        assert answer.tools is not None
        history = answer.history[dropped:]
        while history and history[0].role == "tool":  # a result without its call: leave it out
            history = history[1:]
        messages: list[ChatMessage] = []
        if answer.system_prompt:
            messages.append({"role": "system", "content": answer.system_prompt})
        messages += chat_messages(history)
        settings = self.runner.engine.settings
        turn = ToolTurn(
            self.engine or self.runner.engine.worker,
            self.manager,
            answer.tools,
            loaded,
            answer.sampling,
            timeout=float(settings.get("tools.timeout")),
            max_rounds=int(settings.get("tools.max_rounds")),
            reasoning_effort=answer.reasoning_effort,
            parent=self,
        )
        answer.turn = turn
        answer.submitted_at = time.perf_counter()
        turn.text.connect(self._on_text)
        turn.message.connect(self._on_message)
        turn.round_finished.connect(self._on_round_finished)
        turn.starting.connect(self._on_starting)
        turn.approval_requested.connect(self._on_approval_requested)
        turn.running.connect(self._on_running)
        turn.call_finished.connect(self._on_call_finished)
        turn.done.connect(self._on_done)
        turn.writing.connect(self._on_writing)
        turn.reading.connect(self._on_reading)
        turn.start(messages)

    def known_tools(self, server: str) -> list[str] | None:
        """The tool names of a server this session has connected to (None: not yet)."""
        if self._manager is None:
            return None
        tools = self._manager.known_tools(server)
        return [t.name for t in tools] if tools is not None else None

    def shutdown(self) -> None:
        if self._manager is not None:
            self._manager.shutdown()

    # -- from the turn ---------------------------------------------------------------------

    def _answer_of(self, turn: object) -> Answer | None:
        return next((a for a in self.runner.all() if a.turn is turn), None)

    def ensure_streaming(self, answer: Answer) -> str:
        """The answer's streaming message; a new one after a round of calls."""
        if not answer.message_id:
            message = self.runner.store.begin_streaming_message(
                answer.conversation_id, metadata={"model": answer.model}
            )
            answer.message_id = message.id
            self.runner.message_saved.emit(answer.conversation_id, message, True)
        return answer.message_id

    @Slot(str)
    def _on_text(self, text: str) -> None:
        answer = self._answer_of(self.sender())
        if answer is None or not text:
            return
        message_id = self.ensure_streaming(answer)
        now = time.perf_counter()
        if answer.first_delta_at is None:
            answer.first_delta_at = now
        answer.last_delta_at = now
        answer.text += text
        answer.unsaved.append(text)
        answer.tokens += 1
        self.runner.text_added.emit(answer.conversation_id, message_id, text)

    @Slot(dict)
    def _on_message(self, message: dict[str, Any]) -> None:
        answer = self._answer_of(self.sender())
        if answer is None:
            return
        try:
            if message.get("role") == "assistant" and message.get("tool_calls"):
                self._save_calls(answer, message["tool_calls"])
            elif message.get("role") == "tool":
                self._save_result(answer, message)
        except (ChatStoreError, ValueError):
            log.exception("Could not save a tool call or its result")

    @Slot(object)
    def _on_round_finished(self, final: FinalEvent) -> None:
        answer = self._answer_of(self.sender())
        if answer is not None:
            self._rounds[answer.conversation_id] = final

    @Slot()
    def _on_writing(self) -> None:
        """The model writes a call, which shows once complete: its message says so."""
        answer = self._answer_of(self.sender())
        if answer is not None:
            self.ensure_streaming(answer)
            self.runner.set_waiting(answer, WRITING_CALL)

    @Slot(int, int)
    def _on_reading(self, done: int, total: int) -> None:
        """A round reads a long prompt (the results of calls, say): its message says how far."""
        answer = self._answer_of(self.sender())
        if answer is not None and total > 0:
            self.ensure_streaming(answer)
            self.runner.set_waiting(answer, f"Reading the prompt… {min(99, done * 100 // total)}%")

    @Slot(list)
    def _on_starting(self, servers: list[str]) -> None:
        answer = self._answer_of(self.sender())
        if answer is not None:
            text = f"Starting {', '.join(servers)}…" if servers else THINKING
            answer.starting = tuple(servers)
            self.runner.set_waiting(answer, text)
            self.runner.activity_changed.emit()

    def _save_calls(self, answer: Answer, calls: list[dict[str, Any]]) -> None:
        self._due[answer.conversation_id] = len(calls)
        message_id = self.ensure_streaming(answer)
        self.runner.save(answer)
        metadata = {"model": answer.model, "model_path": answer.model_path, **call_metadata(calls)}
        final = self._rounds.pop(answer.conversation_id, None)
        if final is not None:  # like any answer, the message shows what writing it took
            self._saved_rounds[answer.conversation_id] = final
            metadata.update(answer_stats(final.usage, final.timings, final.reason))
        saved = self.runner.store.finish_message(
            message_id, "complete", metadata, content=answer.text
        )
        if answer.saved_stats_tokens:  # the message carries its own stats now
            save_partial_stats(self.runner.store, answer.conversation_id, message_id, None)
        answer.message_id, answer.text = "", ""
        # The next round's message measures itself from its own start.
        answer.tokens = answer.saved_stats_tokens = answer.first_delta_tokens = 0
        answer.first_delta_at = answer.last_delta_at = None
        answer.submitted_at = time.perf_counter()
        answer.waiting = THINKING  # the next round's message: the model reads the results
        self.runner.message_saved.emit(answer.conversation_id, saved, False)

    def _save_result(self, answer: Answer, message: dict[str, Any]) -> None:
        call_id = str(message.get("tool_call_id", ""))
        call = self._calls.pop(call_id, None)
        metadata = result_metadata(
            tool_call_id=call_id,
            name=str(message.get("name", "")),
            server=call.server if call else "",
            tool=call.tool if call else "",
            decision=call.decision if call else None,
            output=call.output.to_json() if call and call.output else None,
        )
        saved = self.runner.store.add_message(
            answer.conversation_id, "tool", str(message.get("content") or ""), metadata=metadata
        )
        self.runner.message_saved.emit(answer.conversation_id, saved, False)
        due = self._due.get(answer.conversation_id, 0) - 1
        self._due[answer.conversation_id] = due
        if due <= 0:  # the model reads the results now: its next message shows it thinking
            del self._due[answer.conversation_id]
            self.ensure_streaming(answer)

    @Slot(object)
    def _on_approval_requested(self, call: ToolCall | CommandRequest) -> None:
        answer = self._answer_of(self.sender())
        if answer is not None and answer.turn is not None:
            answer.turn.pending = call
            if isinstance(call, CommandRequest):  # its card asks: the message says nothing
                self.runner.set_waiting(answer, "")
            self.runner.approval_requested.emit(answer.conversation_id, call)
            self.runner.activity_changed.emit()

    @Slot(object)
    def _on_running(self, call: ToolCall) -> None:
        answer = self._answer_of(self.sender())
        if answer is not None and answer.turn is not None:
            answer.turn.running_call = call
            self.runner.call_running.emit(answer.conversation_id, call)
            self.runner.activity_changed.emit()

    @Slot(object)
    def _on_call_finished(self, call: ToolCall | CommandRequest) -> None:
        answer = self._answer_of(self.sender())
        if answer is not None and answer.turn is not None and answer.turn.running_call is call:
            answer.turn.running_call = None
        if not isinstance(call, CommandRequest):  # a command line has no result to save
            self._calls[call.id] = call
        elif answer is not None:
            self.runner.set_waiting(answer, THINKING)
        if answer is not None:
            self.runner.call_finished.emit(answer.conversation_id, call)
            self.runner.activity_changed.emit()

    @Slot(object)
    def _on_done(self, result: object) -> None:
        turn = self.sender()
        answer = self._answer_of(turn)
        if isinstance(turn, ToolTurn):
            turn.deleteLater()
        if answer is None:
            return
        answer.turn = None
        self._rounds.pop(answer.conversation_id, None)
        saved_round = self._saved_rounds.pop(answer.conversation_id, None)
        self._due.pop(answer.conversation_id, None)
        self.ensure_streaming(answer)  # the answer's own message, also when a call ended it
        from app.tools.loop import LoopResult

        if not isinstance(result, LoopResult):
            self.runner.finish(answer, "error", {"error": str(result)})
            return
        # stopped during a round's calls, the last round is the one that made them: its stats
        # are its message's, not this one's (which wrote nothing)
        final = result.final if result.final is not saved_round else None
        status: Status = "stopped" if result.cancelled else "complete"
        metadata: dict[str, Any] = {"tool_rounds": result.rounds}
        if final is not None:
            metadata.update(answer_stats(final.usage, final.timings, final.reason))
            if isinstance(final, Failed):
                status = "error"
                metadata["error"] = str(final.error)
        self.runner.finish(answer, status, metadata)
