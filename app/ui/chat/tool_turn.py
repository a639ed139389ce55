"""One answer with tools: the tool loop (app.tools.loop) as a task on the app's task runner
(the ``"tools"`` lane, app/ui/task_runner.py), its hooks brought back to the GUI thread as
signals. The runner's shutdown stops the loop through the task's token (``LoopControl.cancel``).

The loop thread first shows the command line of each of the chat's stdio servers that has not
been approved (a :class:`CommandRequest`: "Run it" approves it, "Don't run" leaves that
server's tools out of this answer), then connects to the servers (which may take seconds),
then runs rounds on the engine worker. Before a call it asks the GUI (``approval_requested``)
and waits until ``decide`` is called; ``cancel`` (Esc) stops the answer being written, the
call being run or the wait for the servers, and answers a pending question with "deny".
Exactly one ``done`` follows ``start`` (none once the app is quitting: the runner's shutdown
cancels the loop and calls nothing back).

Signals (GUI thread): ``text(str)``; ``message(dict)`` each message the loop adds (an assistant
message with ``tool_calls``, a ``tool`` result, the answer); ``round_finished(FinalEvent)``
each round the model wrote, before its message; ``starting(list[str])`` the chat's servers
that are not up yet, before they are connected to (``[]`` once they are);
``approval_requested(ToolCall | CommandRequest)``; ``running(ToolCall)`` a call runs now
(allowed, now or always); ``call_finished(ToolCall |
CommandRequest)`` (a command request once it is decided); ``done(object)`` a LoopResult, or an
exception when the servers could not be reached.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.engine.types import ChatMessage, FinalEvent, LoadedModel, SamplingParams
from app.tools.choices import TOOL_CHOICES, Decision, ToolChoice
from app.ui.chat.thinking import CLOSE as THINK_CLOSE
from app.ui.chat.thinking import OPEN as THINK_OPEN
from app.ui.task_runner import StopToken, Task, tasks

if TYPE_CHECKING:  # the loop reads answers as the API does: imported with the first tool use
    from app.tools.config import ServerConfig
    from app.tools.loop import Engine, ToolCall
    from app.tools.manager import ToolManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolSetup:
    """A chat's tools: the servers it may use, how, and the tools it leaves out
    (``"server/tool"``); ``tools`` in its settings blob."""

    servers: tuple[str, ...] = ()
    choice: ToolChoice = "auto"
    tools_off: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.servers) and self.choice != "none"

    def to_json(self) -> dict[str, Any]:
        return {"servers": list(self.servers), "choice": self.choice, "off": list(self.tools_off)}

    @classmethod
    def from_blob(cls, blob: dict[str, Any] | None) -> ToolSetup:
        data = (blob or {}).get("tools")
        if not isinstance(data, dict):
            return cls()
        servers = data.get("servers")
        choice = data.get("choice")
        off = data.get("off")
        return cls(
            tuple(str(s) for s in servers) if isinstance(servers, list) else (),
            choice if choice in TOOL_CHOICES else "auto",
            tuple(str(t) for t in off) if isinstance(off, list) else (),
        )


@dataclass(slots=True)
class CommandRequest:
    """A chat's stdio server whose exact command line the person has not approved: shown
    before it first runs (or after it changed). ``id`` keys its card like a call's."""

    server: ServerConfig
    decision: Decision | None = None

    @property
    def id(self) -> str:
        return f"command:{self.server.name}"


@dataclass(slots=True)
class _Question:
    call: ToolCall | CommandRequest
    answered: threading.Event = field(default_factory=threading.Event)
    decision: Decision = "deny"


class ToolTurn(QObject):
    """See the module docstring. Made and driven on the GUI thread."""

    text = Signal(str)
    message = Signal(dict)
    round_finished = Signal(object)
    starting = Signal(list)
    approval_requested = Signal(object)
    running = Signal(object)
    call_finished = Signal(object)
    done = Signal(object)
    writing = Signal()
    reading = Signal(int, int)  # a round's long prompt: tokens read, of how many

    def __init__(
        self,
        engine: Engine,
        manager: ToolManager,
        setup: ToolSetup,
        loaded: LoadedModel,
        sampling: SamplingParams,
        *,
        timeout: float,
        max_rounds: int,
        reasoning_effort: str | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        from app.tools.loop import LoopHooks, ToolLoop

        self.setup = setup
        self.loop = ToolLoop(
            engine,
            manager,
            toolbox=manager.toolbox([]),  # the servers' tools are listed on the loop thread
            hooks=LoopHooks(
                approve=self._approve,
                on_text=self._on_text,
                on_run=self.running.emit,
                on_result=self.call_finished.emit,
                on_message=self._on_message,
                on_round=self._on_round,
                on_writing=self.writing.emit,
                on_reasoning=self._on_reasoning,
                on_prompt=self.reading.emit,
            ),
            sampling=sampling,
            model=loaded.model_id,
            chat_template=loaded.chat_template,
            tool_choice=setup.choice,
            timeout=timeout,
            max_rounds=max_rounds,
            reasoning_effort=reasoning_effort,
        )
        self._manager = manager
        self._lock = threading.Lock()
        self._question: _Question | None = None
        self.task: Task | None = None
        self.pending: ToolCall | CommandRequest | None = None  # waiting for a decision (GUI)
        self.running_call: ToolCall | None = None  # the call running now (GUI)
        self.skipped: list[str] = []  # servers whose command line the person did not run

    def start(self, messages: list[ChatMessage]) -> None:
        self.task = tasks().submit(
            lambda: self._run(messages),
            self._on_finished,
            lane="tools",
            receiver=self,
            token=StopToken(self.cancel),
            name="tool-turn",
        )

    def decide(self, decision: Decision) -> None:
        """The person's answer to the pending question (any thread)."""
        with self._lock:
            question = self._question
        if question is not None:
            question.decision = decision
            question.answered.set()
        self.pending = None

    def cancel(self) -> None:
        """Stop the answer or the call now; a pending question is answered "deny"."""
        self.loop.control.cancel()
        self.decide("deny")

    def join(self, timeout: float | None = None) -> None:
        if self.task is not None:
            self.task.finished.wait(timeout)

    def _on_finished(self, result: object) -> None:  # GUI thread, after every hook's signal
        self.done.emit(result)

    # -- the loop thread -------------------------------------------------------------------

    def _run(self, messages: list[ChatMessage]) -> object:
        from app.tools.loop import LoopResult

        try:
            setup = self.setup
            servers = list(setup.servers)
            for server in self._manager.unapproved(servers):
                if not self._approve_command(server):
                    servers.remove(server.name)
                if self.loop.control.cancelled:
                    return LoopResult(cancelled=True)
            down = [name for name in servers if self._manager.known_tools(name) is None]
            if down:
                self.starting.emit(down)
            self.loop.toolbox = self._manager.toolbox(
                servers, exclude=setup.tools_off, wait=self.loop.control.wait
            )
            if down:
                self.starting.emit([])
            return self.loop.run(messages)
        except concurrent.futures.CancelledError:  # Esc while the servers were connecting
            return LoopResult(cancelled=True)
        except Exception as error:  # a server that cannot start: the answer says why
            log.info("Tools unavailable: %s", error)
            return error

    def _approve_command(self, server: ServerConfig) -> bool:
        """Ask whether ``server``'s command line may run (approved for good on "Run it")."""
        request = CommandRequest(server)
        decision = self._ask(request)
        if self.loop.control.cancelled:  # Esc: the answer ends, the card just goes
            self.call_finished.emit(request)
            return False
        request.decision = decision
        try:
            if decision == "deny":
                self.skipped.append(server.name)
            else:  # raises, failing the answer, if the entry changed while it was shown
                self._manager.config.approve_command(server.name, seen=server.command_line)
        finally:
            self.call_finished.emit(request)
        return decision != "deny"

    def _approve(self, call: ToolCall) -> Decision:
        return self._ask(call)

    def _ask(self, call: ToolCall | CommandRequest) -> Decision:
        question = _Question(call)
        with self._lock:
            self._question = question
        if self.loop.control.cancelled:
            return "deny"
        self.approval_requested.emit(call)
        question.answered.wait()
        with self._lock:
            self._question = None
        return question.decision

    def _on_message(self, message: ChatMessage) -> None:
        self.message.emit(dict(message))

    # The answer's text carries the thinking as the model wrote it, between <think> tags
    # (the chat folds it, app/ui/chat/thinking.py).
    _thinking = False

    def _on_reasoning(self, text: str) -> None:
        if not self._thinking:
            self._thinking = True
            self.text.emit(THINK_OPEN)
        self.text.emit(text)

    def _on_text(self, text: str) -> None:
        self._end_thinking()
        self.text.emit(text)

    def _on_round(self, final: FinalEvent) -> None:
        self._end_thinking()
        self.round_finished.emit(final)

    def _end_thinking(self) -> None:
        if self._thinking:
            self._thinking = False
            self.text.emit(THINK_CLOSE)
