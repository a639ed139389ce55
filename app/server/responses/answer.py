"""How a response is written: the semantic stream events, or the whole response object.

The answer's pieces (:class:`app.server.output.Piece`: content, reasoning, a tool call's name
then its arguments) become output items in order. A stream says each item's life in
OpenAI's order, every event with the next ``sequence_number`` (from 0):

``response.created``, ``response.in_progress``, then per item ``response.output_item.added``;
for a message ``response.content_part.added``, ``response.output_text.delta`` …,
``response.output_text.done``, ``response.content_part.done``; for reasoning the same with
``response.reasoning_text.*``; for a call ``response.function_call_arguments.delta`` …,
``response.function_call_arguments.done``; then ``response.output_item.done``; at the end
``response.completed`` (``response.incomplete`` when ``max_output_tokens`` cut it). A failure
after the headers is an ``error`` event and ``response.failed``.

The finished response goes to ``save`` (the store) before its last event is made, so a client
that continues from it at once finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.engine.types import Finished
from app.server.answering import Answer
from app.server.errors import APIError
from app.server.output import ChatOutput
from app.server.pieces import Piece
from app.server.responses import shapes
from app.server.responses.shapes import ResponseMeta


@dataclass(slots=True)
class _Item:
    kind: str  # "message", "reasoning", "function_call"
    id: str
    index: int  # output_index
    call_id: str = ""
    name: str = ""
    call: int = -1  # the call's index among the answer's calls
    parts: list[str] = field(default_factory=list)  # the text, reasoning or arguments so far

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def dict(self, status: str) -> dict[str, Any]:
        done = status != "in_progress"
        if self.kind == "message":
            return shapes.message_item(self.id, status, self.text if done else None)
        if self.kind == "reasoning":
            return shapes.reasoning_item(self.id, status, self.text if done else None)
        arguments = self.text if done else ""
        return shapes.call_item(self.id, status, self.call_id, self.name, arguments)


class ResponsesAnswer(Answer):
    def __init__(
        self,
        meta: ResponseMeta,
        output: ChatOutput,
        save: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.meta = meta
        self.output = output
        self.save = save
        self.sequence = 0
        self.done: list[dict[str, Any]] = []  # the output items closed so far
        self.open: _Item | None = None
        self.reasoning_tokens = 0
        self.streaming = True
        self._final: dict[str, Any] = {}  # the finished response object

    # ---- Answer ---------------------------------------------------------------------------

    def opening(self) -> list[bytes]:
        started = self.meta.response("in_progress", [])
        return [
            self._event("response.created", response=started),
            self._event("response.in_progress", response=started),
        ]

    def delta(self, text: str) -> list[bytes]:
        pieces = self.output.feed(text)
        if any(p.kind == "reasoning" for p in pieces):
            self.reasoning_tokens += 1  # one Delta is one token (a few for split characters)
        return self._pieces(pieces)

    def finish(self, final: Finished) -> list[bytes]:
        frames = self._pieces(self.output.finish())
        cut = final.reason == "length"
        frames += self._close("incomplete" if cut else "completed")
        usage = shapes.usage_body(final.usage, self.reasoning_tokens)
        if cut:
            response = self.meta.response(
                "incomplete", self.done, usage, incomplete="max_output_tokens"
            )
        else:
            response = self.meta.response("completed", self.done, usage)
        if self.save is not None:
            self.save(response)
        kind = "response.incomplete" if cut else "response.completed"
        return [*frames, self._event(kind, response=response)]

    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]:
        self.streaming = False
        for text in texts:
            self.delta(text)
        self.finish(final)
        return self.final

    def error(self, error: APIError) -> bytes:
        failed = shapes.failure(error.code, error.message)
        response = self.meta.response("failed", self.done, error=failed)
        return self._event(
            "error", code=error.code, message=error.message, param=error.param
        ) + self._event("response.failed", response=response)

    # ---- items ----------------------------------------------------------------------------

    @property
    def final(self) -> dict[str, Any]:
        return self._final

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        if kind in ("response.completed", "response.incomplete"):
            self._final = data["response"]
        return shapes.event_frame(data) if self.streaming else b""

    def _pieces(self, pieces: list[Piece]) -> list[bytes]:
        frames: list[bytes] = []
        for piece in pieces:
            if piece.kind == "tool":
                frames += self._call(piece)
                continue
            kind = "message" if piece.kind == "content" else "reasoning"
            if self.open is None or self.open.kind != kind:
                frames += self._close("completed")
                frames += self._add(
                    _Item(
                        kind, shapes.new_id("msg_" if kind == "message" else "rs_"), len(self.done)
                    )
                )
            item = self.open
            assert item is not None
            item.parts.append(piece.text)
            delta = (
                "response.output_text.delta"
                if kind == "message"
                else "response.reasoning_text.delta"
            )
            extra: dict[str, Any] = {"logprobs": []} if kind == "message" else {}
            frames.append(
                self._event(delta, **self._where(item), content_index=0, delta=piece.text, **extra)
            )
        return frames

    def _call(self, piece: Piece) -> list[bytes]:
        frames: list[bytes] = []
        item = self.open
        if piece.id is not None or item is None or item.call != piece.index:
            frames += self._close("completed")
            item = _Item(
                "function_call",
                shapes.new_id("fc_"),
                len(self.done),
                call_id=piece.id or shapes.new_id("call_"),
                name=piece.name or "",
                call=piece.index,
            )
            frames += self._add(item)
        if piece.text:
            item.parts.append(piece.text)
            frames.append(
                self._event(
                    "response.function_call_arguments.delta", **self._where(item), delta=piece.text
                )
            )
        return frames

    def _add(self, item: _Item) -> list[bytes]:
        self.open = item
        frames = [
            self._event(
                "response.output_item.added", output_index=item.index, item=item.dict("in_progress")
            )
        ]
        if item.kind != "function_call":
            part = shapes.output_text("") if item.kind == "message" else shapes.reasoning_text("")
            frames.append(
                self._event(
                    "response.content_part.added", **self._where(item), content_index=0, part=part
                )
            )
        return frames

    def _close(self, status: str) -> list[bytes]:
        item, self.open = self.open, None
        if item is None:
            return []
        done = item.dict(status)
        frames: list[bytes] = []
        where = self._where(item)
        if item.kind == "function_call":
            frames.append(
                self._event(
                    "response.function_call_arguments.done",
                    **where,
                    name=item.name,
                    arguments=item.text,
                )
            )
        else:
            part = done["content"][0]
            kind = "output_text" if item.kind == "message" else "reasoning_text"
            extra: dict[str, Any] = {"logprobs": []} if item.kind == "message" else {}
            frames.append(
                self._event(
                    f"response.{kind}.done", **where, content_index=0, text=part["text"], **extra
                )
            )
            frames.append(
                self._event("response.content_part.done", **where, content_index=0, part=part)
            )
        frames.append(self._event("response.output_item.done", output_index=item.index, item=done))
        self.done.append(done)
        return frames

    @staticmethod
    def _where(item: _Item) -> dict[str, Any]:
        return {"item_id": item.id, "output_index": item.index}
