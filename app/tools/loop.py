"""The tool-calling loop: the model answers or calls tools; each call is approved (or not),
run, and its result goes back to the model; until the model answers or the round limit.

It reads the engine's raw text the way the API does (:mod:`app.server.output`): with
``required`` the answer is constrained to a call by a grammar, so even a model never trained
for tools calls one; with ``auto`` the tools go to the chat template, or, for a template
without tool support, into a system message (Ember's tool prompt). ``required`` applies to the
first round only: after a result the model may answer. When the rounds run out while the model
still calls tools, one last answer is asked for without tools.

A model stuck writing the same call again and again is stopped at the first repeat, and the
same call (tool and arguments) made again in one turn keeps the person's first answer rather
than asking again (:mod:`app.tools.repeats`). ``on_writing`` says when a round starts writing
a call, which the chat shows while the call is held back until it is complete.

The loop runs on the caller's thread (a worker thread in the app, the main thread in the
terminal); :class:`LoopControl` cancels it from any thread: the current answer or call stops
at once. A tool result is data for the model, never an instruction to Ember.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from app.engine.types import (
    BadRequestError,
    ChatMessage,
    ChatRequest,
    Delta,
    Failed,
    FinalEvent,
    Finished,
    PromptProgress,
    Request,
    SamplingParams,
    content_text,
)
from app.engine.worker import Job
from app.server.output import ChatOutput
from app.server.toolcalls import format_for, lazy_grammar
from app.server.toolcalls.render import for_template
from app.server.tools import call_schema, template_supports_tools, tools_prompt
from app.tools.choices import Decision, ToolChoice
from app.tools.manager import ToolBox, ToolError, ToolManager
from app.tools.repeats import RepeatWatch, call_key
from app.tools.results import ToolOutput, error_output

DEFAULT_TIMEOUT = 60.0
DEFAULT_ROUNDS = 8
MAX_ARGUMENT_CHARS = 64_000

T = TypeVar("T")


class Engine(Protocol):
    def submit(self, request: Request) -> Job: ...


@dataclass(slots=True)
class ToolCall:
    """A call the model made. ``name`` is what the model called (see :class:`ToolBox`);
    ``server``/``tool`` what it stands for (empty when the model named no offered tool)."""

    id: str
    name: str
    arguments: str
    server: str = ""
    tool: str = ""
    decision: Decision | None = None
    output: ToolOutput | None = None

    def parsed_arguments(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def pretty_arguments(self) -> str:
        value = self.parsed_arguments()
        return (
            json.dumps(value, ensure_ascii=False, indent=2) if value is not None else self.arguments
        )

    def as_message_call(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


class LoopControl:
    """Cancels a running loop from any thread: the answer being written, the call being run
    and the servers being waited for (:meth:`wait`) stop, and no further round starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled = False
        self._job: Job | None = None
        self._futures: list[concurrent.futures.Future[Any]] = []

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            job, futures = self._job, list(self._futures)
        if job is not None:
            job.cancel()
        for future in futures:
            future.cancel()

    def wait(self, futures: list[concurrent.futures.Future[T]]) -> list[T]:
        """The futures' results, in order; a cancel (also one before) cancels them and raises
        ``concurrent.futures.CancelledError`` at once instead of waiting them out."""
        if not self._running(futures=futures):
            raise concurrent.futures.CancelledError
        try:
            return [future.result() for future in futures]
        finally:
            self._running()

    def _running(
        self,
        job: Job | None = None,
        call: concurrent.futures.Future[ToolOutput] | None = None,
        futures: list[concurrent.futures.Future[T]] | None = None,
    ) -> bool:
        """Record what runs now; False when the loop was cancelled meanwhile."""
        waiting: list[concurrent.futures.Future[Any]] = list(futures or [])
        if call is not None:
            waiting.append(call)
        with self._lock:
            self._job, self._futures = job, waiting
            cancelled = self.cancelled
        if cancelled:
            if job is not None:
                job.cancel()
            for future in waiting:
                future.cancel()
        return not cancelled


@dataclass(slots=True)
class LoopHooks:
    """What the loop tells its caller, on the loop's thread. ``approve`` may block (it asks
    a person); every other hook must return quickly."""

    approve: Callable[[ToolCall], Decision]
    on_text: Callable[[str], None] = lambda text: None
    on_call: Callable[[ToolCall], None] = lambda call: None
    on_result: Callable[[ToolCall], None] = lambda call: None
    on_message: Callable[[ChatMessage], None] = lambda message: None
    # each round the model wrote to the end, before its message: its usage and timings
    on_round: Callable[[FinalEvent], None] = lambda final: None
    # a call about to run (allowed, now or always), after ``approve``; ``on_result`` follows
    # (last: callers pass the fields above by position)
    on_run: Callable[[ToolCall], None] = lambda call: None
    # a round began writing a tool call (held back until complete); once per round
    on_writing: Callable[[], None] = lambda: None
    # the model's thinking (``<think>…</think>`` split off), as it comes
    on_reasoning: Callable[[str], None] = lambda text: None
    # how far a long prompt has been read: tokens done, of how many (the engine's chunks)
    on_prompt: Callable[[int, int], None] = lambda done, total: None


@dataclass(slots=True)
class LoopResult:
    """``messages``: what the loop added (assistant calls, tool results, the answer);
    ``final``: the last answer's final event (a cancel or a failure ends the loop early)."""

    messages: list[ChatMessage] = field(default_factory=list)
    final: FinalEvent | None = None
    rounds: int = 0
    calls: list[ToolCall] = field(default_factory=list)
    cancelled: bool = False

    @property
    def answer(self) -> str:
        last = self.messages[-1] if self.messages else None
        if last is None or last.get("role") != "assistant" or last.get("tool_calls"):
            return ""
        return content_text(last.get("content"))


@dataclass(slots=True)
class ToolLoop:
    """One conversation turn with tools. ``chat_template``: the loaded model's template
    source (None: Ember's plain fallback), which decides how tools reach the model."""

    engine: Engine
    manager: ToolManager
    toolbox: ToolBox
    hooks: LoopHooks
    sampling: SamplingParams = field(default_factory=SamplingParams)
    model: str | None = None
    chat_template: str | None = None
    tool_choice: ToolChoice = "auto"
    timeout: float = DEFAULT_TIMEOUT
    max_rounds: int = DEFAULT_ROUNDS
    reasoning_effort: str | None = None  # ChatRequest.reasoning_effort, every round
    control: LoopControl = field(default_factory=LoopControl)
    # the calls run or refused in this turn (call_key) -> what became of them
    _answered: dict[str, ToolCall] = field(default_factory=dict, init=False)

    def run(self, messages: list[ChatMessage]) -> LoopResult:
        """Answer the conversation ``messages`` (not changed; see ``LoopResult.messages``)."""
        result = LoopResult()
        self._answered = {}
        history = list(messages)
        choice: ToolChoice = self.tool_choice if self.toolbox else "none"
        while True:
            offer = choice if result.rounds < self.max_rounds else "none"
            text, calls, final = self._generate(history, offer)
            result.final = final
            if isinstance(final, Failed) or final.reason == "cancelled" or self.control.cancelled:
                result.cancelled = final.reason == "cancelled" or self.control.cancelled
                if text:
                    result.messages.append({"role": "assistant", "content": text})
                return result
            result.rounds += 1
            self.hooks.on_round(final)
            if not calls:
                answer: ChatMessage = {"role": "assistant", "content": text}
                result.messages.append(answer)
                self.hooks.on_message(answer)
                return result
            asked: ChatMessage = {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [c.as_message_call() for c in calls],
            }
            history.append(asked)
            result.messages.append(asked)
            self.hooks.on_message(asked)
            for call in calls:
                self._run_call(call)
                result.calls.append(call)
                assert call.output is not None
                reply: ChatMessage = {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": call.output.text,
                }
                history.append(reply)
                result.messages.append(reply)
                self.hooks.on_message(reply)
                if self.control.cancelled:
                    result.cancelled = True
                    return result
            if choice == "required":
                choice = "auto"  # forced once; then the model may answer

    # -- one answer ----------------------------------------------------------------------------

    def _generate(
        self, history: list[ChatMessage], choice: ToolChoice
    ) -> tuple[str, list[ToolCall], FinalEvent]:
        request = self.request(history, choice)
        names = frozenset(self.toolbox.route)
        output = ChatOutput(
            tool_mode=choice if choice != "none" else "none",
            tool_names=names,
            reasoning=True,
            tool_format=format_for(self.chat_template),
            tools={
                t["function"]["name"]: t["function"].get("parameters") or {}
                for t in self.toolbox.tools
            },
        )
        job = self.engine.submit(request)
        if not self.control._running(job=job):
            return "", [], job.wait()
        text: list[str] = []
        pieces = []
        watch = RepeatWatch()
        repeated = False
        for event in job.events():
            if isinstance(event, PromptProgress):
                self.hooks.on_prompt(event.done, event.total)
            elif isinstance(event, Delta):
                pieces += self._take(output.feed(event.text), text)
                writing = watch.writing_call
                if watch.feed(event.text):
                    repeated = True
                    job.cancel()
                    break
                if watch.writing_call and not writing:
                    self.hooks.on_writing()
        final = job.wait()
        self.control._running()
        if repeated and final.reason == "cancelled" and not self.control.cancelled:
            # stopped here, not by the person: the calls written before the repeat stand
            final = dataclasses.replace(final, reason="stop")  # type: ignore[arg-type]
            fresh = ChatOutput(tool_mode=choice, tool_names=names, reasoning=True)
            raw = watch.raw[: watch.cut]
            pieces = [p for p in fresh.feed(raw) + fresh.finish() if p.kind == "tool"]
        elif isinstance(final, Finished):
            pieces += self._take(output.finish(), text)
        calls = self._calls(pieces)
        return "".join(text), calls, final

    def _take(self, pieces: list[Any], text: list[str]) -> list[Any]:
        """Content goes to ``on_text`` as it comes, the model's thinking to ``on_reasoning``;
        tool pieces are returned."""
        calls = []
        for piece in pieces:
            if piece.kind == "reasoning" and piece.text:
                self.hooks.on_reasoning(piece.text)
            elif piece.kind == "content":
                text.append(piece.text)
                self.hooks.on_text(piece.text)
            elif piece.kind == "tool":
                calls.append(piece)
        return calls

    def _calls(self, pieces: list[Any]) -> list[ToolCall]:
        calls: dict[int, ToolCall] = {}
        for piece in pieces:
            call = calls.setdefault(piece.index, ToolCall(id="", name="", arguments=""))
            if piece.id is not None:
                call.id = piece.id
            if piece.name is not None:
                call.name = piece.name
            call.arguments += piece.text
        out: dict[str, ToolCall] = {}
        for call in calls.values():  # the same call twice in one answer is made once
            call.server, call.tool = self.toolbox.route.get(call.name, ("", ""))
            out.setdefault(call_key(call.name, call.arguments), call)
        return list(out.values())

    def request(self, history: list[ChatMessage], choice: ToolChoice) -> ChatRequest:
        """The engine request for ``history`` with the tools offered as ``choice`` says:
        earlier calls in the shape the model's template takes, and in ``auto`` the lazy
        grammar of the model family's call format (``app.server.toolcalls``)."""
        native = template_supports_tools(self.chat_template)
        fmt = format_for(self.chat_template)
        messages = for_template(history, self.chat_template, fmt)
        sampling = self.sampling
        tools = self.toolbox.tools if choice != "none" else []
        if tools and not native:
            messages = _with_system(messages, (fmt.tools_prompt or tools_prompt)(tools))
        functions = [t["function"] for t in tools]
        if tools and choice == "required":
            sampling = dataclasses.replace(sampling, json_schema=call_schema(functions))
        elif tools and sampling.grammar is None and sampling.json_schema is None:
            try:
                grammar, triggers = lazy_grammar(fmt, functions)
            except BadRequestError:  # schemas too large for a grammar: calls go unconstrained
                pass
            else:
                sampling = dataclasses.replace(sampling, grammar=grammar, grammar_triggers=triggers)
        return ChatRequest(
            messages=messages,
            sampling=sampling,
            model=self.model,
            tools=tools if tools and native else None,
            priority=1,
            special_tokens=bool(tools) or fmt.own_reasoning,  # the family's markers, as text
            reasoning_effort=self.reasoning_effort,
            prompt_progress=True,  # on_prompt
        )

    # -- one call ------------------------------------------------------------------------------

    def _run_call(self, call: ToolCall) -> None:
        self.hooks.on_call(call)
        call.output = self._outcome(call)
        self.hooks.on_result(call)

    def _outcome(self, call: ToolCall) -> ToolOutput:
        if not call.server:
            offered = ", ".join(self.toolbox.route) or "none"
            return error_output(f"there is no tool called {call.name!r} (tools: {offered}).")
        if len(call.arguments) > MAX_ARGUMENT_CHARS:
            return error_output(f"the arguments are longer than {MAX_ARGUMENT_CHARS:,} characters.")
        arguments = call.parsed_arguments()
        if arguments is None:
            return error_output("the arguments are not a JSON object; call the tool again.")
        key = call_key(call.name, call.arguments)
        before = self._answered.get(key)
        server = self.manager.config.find(call.server)
        if server is not None and call.tool in server.always_allow:
            call.decision = "always"
        elif before is not None and before.decision is not None:
            # the same call again in this turn: the person's answer stands (not asked twice)
            call.decision = before.decision
        else:
            call.decision = self.hooks.approve(call)
        self._answered[key] = call
        if self.control.cancelled:
            return error_output("the user stopped the answer before this call ran.")
        if call.decision == "deny" and before is not None:
            return error_output(
                "the user did not allow this call, and you made it again: do not call it "
                "again; answer the user now."
            )
        if call.decision == "deny":
            return error_output("the user did not allow this call.")
        if call.decision == "always":
            self.manager.config.set_always_allow(call.server, call.tool, True)
        self.hooks.on_run(call)
        try:
            future = self.manager.call(call.server, call.tool, arguments, self.timeout)
        except ToolError as e:
            return error_output(str(e))
        if not self.control._running(call=future):
            return error_output("the user cancelled this call.")
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            return error_output("the user cancelled this call.")
        except ToolError as e:
            return error_output(str(e))
        finally:
            self.control._running()


def _with_system(messages: list[ChatMessage], text: str) -> list[ChatMessage]:
    if messages and messages[0].get("role") == "system":
        first: ChatMessage = {**messages[0]}
        first["content"] = f"{first.get('content') or ''}\n\n{text}".strip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]
