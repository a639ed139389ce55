"""How an engine job's text becomes Ollama's answer: NDJSON lines while it streams, or one
object. The text goes through the same ChatOutput as the OpenAI routes (reasoning, tool
calls); Ollama's shapes differ: reasoning is ``thinking``, a tool call's arguments are a JSON
object, and the final line carries the counts and durations.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from app.engine.types import Delta, Event, Failed, Finished
from app.server.convert import ChatPlan, chat_output
from app.server.errors import APIError, from_engine_error
from app.server.gateway import JobStream

# The OpenAI routes' steps for a job's events: first events before the headers, the next
# event (or a tick of silence), the whole answer, the cancelled error.
from app.server.jobs import TICK, cancelled, collect, first_events, next_event
from app.server.ollama.common import NDJSONResponse
from app.server.ollama.shapes import done_fields, iso, line
from app.server.output import ChatOutput
from app.server.pieces import Piece
from app.server.requestlog import LogNote

After = Callable[[], Awaitable[None]]


class Answer(ABC):
    """One answer's lines. ``started``: perf_counter at the request's start."""

    def __init__(self, model: str, started: float, load_seconds: float) -> None:
        self.model, self.started, self.load_seconds = model, started, load_seconds

    def head(self) -> dict[str, Any]:
        return {"model": self.model, "created_at": iso()}

    def done(self, final: Finished) -> dict[str, Any]:
        reason = "length" if final.reason == "length" else "stop"
        return done_fields(final, reason, self.started, self.load_seconds, time.perf_counter())

    @abstractmethod
    def delta(self, text: str) -> list[dict[str, Any]]: ...

    @abstractmethod
    def finish(self, final: Finished) -> list[dict[str, Any]]:
        """The last lines, the final (done) one last."""

    @abstractmethod
    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]: ...


class _Pieces:
    """Content, thinking and tool calls gathered from ChatOutput pieces."""

    def __init__(self) -> None:
        self.calls: dict[int, list[str]] = {}  # index -> [name, arguments' JSON text]

    def split(self, pieces: list[Piece]) -> tuple[str, str]:
        content, thinking = [], []
        for p in pieces:
            if p.kind == "content":
                content.append(p.text)
            elif p.kind == "reasoning":
                thinking.append(p.text)
            else:
                call = self.calls.setdefault(p.index, ["", ""])
                call[0] = p.name or call[0]
                call[1] += p.text
        return "".join(content), "".join(thinking)

    def tool_calls(self) -> list[dict[str, Any]]:
        out = []
        for index in sorted(self.calls):
            name, text = self.calls[index]
            try:
                arguments: Any = json.loads(text or "{}")
            except (ValueError, RecursionError):  # RecursionError: nested thousands deep
                arguments = None
            if not isinstance(arguments, dict):
                arguments = {"arguments": text}
            out.append({"function": {"index": index, "name": name, "arguments": arguments}})
        return out


def _output(plan: ChatPlan) -> ChatOutput:
    return chat_output(plan)  # the model family's tool-call format, as for every protocol


class ChatAnswer(Answer):
    """/api/chat: ``message`` objects."""

    def __init__(self, model: str, started: float, load_seconds: float, plan: ChatPlan) -> None:
        super().__init__(model, started, load_seconds)
        self.output = _output(plan)
        self.pieces = _Pieces()

    def _line(self, content: str, thinking: str) -> list[dict[str, Any]]:
        if not content and not thinking:
            return []
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        return [{**self.head(), "message": message, "done": False}]

    def delta(self, text: str) -> list[dict[str, Any]]:
        return self._line(*self.pieces.split(self.output.feed(text)))

    def finish(self, final: Finished) -> list[dict[str, Any]]:
        lines = self._line(*self.pieces.split(self.output.finish()))
        if self.pieces.calls:
            message = {"role": "assistant", "content": "", "tool_calls": self.pieces.tool_calls()}
            lines.append({**self.head(), "message": message, "done": False})
        message = {"role": "assistant", "content": ""}
        return [*lines, {**self.head(), "message": message, **self.done(final)}]

    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]:
        pieces = [p for text in texts for p in self.output.feed(text)] + self.output.finish()
        content, thinking = self.pieces.split(pieces)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        if self.pieces.calls:
            message["tool_calls"] = self.pieces.tool_calls()
        return {**self.head(), "message": message, **self.done(final)}


class GenerateAnswer(Answer):
    """/api/generate: ``response`` text (and ``thinking`` when the prompt was templated)."""

    def __init__(
        self, model: str, started: float, load_seconds: float, plan: ChatPlan | None
    ) -> None:
        super().__init__(model, started, load_seconds)
        self.output = _output(plan) if plan is not None else None
        self.pieces = _Pieces()

    def _split(self, pieces: list[Piece]) -> tuple[str, str]:
        return self.pieces.split(pieces)

    def _line(self, text: str, thinking: str = "") -> list[dict[str, Any]]:
        if not text and not thinking:
            return []
        out = {**self.head(), "response": text, "done": False}
        return [{**out, "thinking": thinking} if thinking else out]

    def delta(self, text: str) -> list[dict[str, Any]]:
        if self.output is None:
            return self._line(text)
        return self._line(*self._split(self.output.feed(text)))

    def finish(self, final: Finished) -> list[dict[str, Any]]:
        lines = self._line(*self._split(self.output.finish())) if self.output else []
        return [*lines, {**self.head(), "response": "", **self.done(final)}]

    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]:
        if self.output is None:
            text, thinking = "".join(texts), ""
        else:
            pieces = [p for t in texts for p in self.output.feed(t)] + self.output.finish()
            text, thinking = self._split(pieces)
        out = {**self.head(), "response": text}
        if thinking:
            out["thinking"] = thinking
        return {**out, **self.done(final)}


# ---- sending an answer ----------------------------------------------------------------------


async def respond(
    request: Request,
    stream: JobStream,
    answer: Answer,
    note: LogNote,
    *,
    streaming: bool,
    after: After | None = None,
) -> Response:
    """Stream the job's answer as NDJSON, or send it whole; ``after`` runs once the job is
    over (keep_alive 0 unloads the model there)."""
    if streaming:
        try:
            early = await first_events(stream, request)
        except BaseException:
            if after is not None:
                await after()
            raise
        return NDJSONResponse(_lines(stream, early, answer, note, after), stream.cancel)
    try:
        texts, final = await collect(stream, request)
    finally:
        if after is not None:
            await after()
    _note_usage(note, final)
    return JSONResponse(answer.whole(texts, final))


async def _lines(
    stream: JobStream, early: list[Event], answer: Answer, note: LogNote, after: After | None
) -> AsyncIterator[bytes]:
    try:
        while (event := await next_event(stream, early)) is not None:
            if event is TICK:
                continue  # NDJSON has no comment to keep a silent stream open with
            if isinstance(event, Delta):
                for obj in answer.delta(event.text):
                    yield line(obj)
            elif isinstance(event, Finished):
                if event.reason == "cancelled":
                    yield _error_line(cancelled(), note)
                    break
                *lines, last = answer.finish(event)
                for obj in lines:
                    yield line(obj)
                _note_usage(note, event)
                if after is not None:  # unloaded before the client reads "done"
                    await after()
                    after = None
                yield line(last)
            elif isinstance(event, Failed):
                yield _error_line(from_engine_error(event.error), note)
    finally:
        stream.cancel()
        if after is not None:
            await after()


def _error_line(error: APIError, note: LogNote) -> bytes:
    note.error = error.message
    return line({"error": error.message})


def _note_usage(note: LogNote, final: Finished) -> None:
    note.prompt_tokens = final.usage.prompt_tokens
    note.completion_tokens = final.usage.completion_tokens
