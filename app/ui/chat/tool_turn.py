"""One answer with tools: the tool loop (app.tools.loop) as a task on the app's task runner
(the ``"tools"`` lane, app/ui/task_runner.py), its hooks brought back to the GUI thread as
signals. The runner's shutdown stops the loop through the task's token (``LoopControl.cancel``).

The loop thread connects to the chat's MCP servers (which may take seconds), then runs rounds
on the engine worker. Before a call it asks the GUI (``approval_requested``) and waits until
``decide`` is called; ``cancel`` (Esc) stops the answer being written or the call being run,
and answers a pending question with "deny". Exactly one ``done`` follows ``start`` (none once
the app is quitting: the runner's shutdown cancels the loop and calls nothing back).

Signals (GUI thread): ``text(str)``; ``message(dict)`` each message the loop adds (an assistant
message with ``tool_calls``, a ``tool`` result, the answer); ``approval_requested(ToolCall)``;
``call_finished(ToolCall)``; ``done(object)`` a LoopResult, or an exception when the servers
could not be reached.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.engine.types import ChatMessage, LoadedModel, SamplingParams
from app.tools.choices import TOOL_CHOICES, Decision, ToolChoice
from app.ui.task_runner import StopToken, Task, tasks

if TYPE_CHECKING:  # the loop reads answers as the API does: imported with the first tool use
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
class _Question:
    call: ToolCall
    answered: threading.Event = field(default_factory=threading.Event)
    decision: Decision = "deny"


class ToolTurn(QObject):
    """See the module docstring. Made and driven on the GUI thread."""

    text = Signal(str)
    message = Signal(dict)
    approval_requested = Signal(object)
    call_finished = Signal(object)
    done = Signal(object)

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
                on_text=self.text.emit,
                on_result=self.call_finished.emit,
                on_message=self._on_message,
            ),
            sampling=sampling,
            model=loaded.model_id,
            chat_template=loaded.chat_template,
            tool_choice=setup.choice,
            timeout=timeout,
            max_rounds=max_rounds,
        )
        self._manager = manager
        self._lock = threading.Lock()
        self._question: _Question | None = None
        self.task: Task | None = None
        self.pending: ToolCall | None = None  # the call waiting for a decision (GUI side)

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
        try:
            setup = self.setup
            self.loop.toolbox = self._manager.toolbox(list(setup.servers), exclude=setup.tools_off)
            return self.loop.run(messages)
        except Exception as error:  # a server that cannot start: the answer says why
            log.info("Tools unavailable: %s", error)
            return error

    def _approve(self, call: ToolCall) -> Decision:
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
