"""Turning a chat model's raw text stream into what the API returns: content, reasoning and
tool calls, the same way for streaming and non-streaming answers.

``ChatOutput.feed(text)`` takes generated text as it arrives and returns :class:`Piece` s;
``finish()`` flushes what was held back. Reasoning (``<think>…</think>``) is split off first,
then tool calls are found in what remains (see :mod:`app.server.tools`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.server.reasoning import ReasoningSplitter
from app.server.tools import AutoToolParser, ForcedCallParser, ToolMode


@dataclass(frozen=True, slots=True)
class Piece:
    """A bit of answer. For ``tool``: the first piece of a call has ``id`` and ``name``, the
    next ones carry more of its ``text`` (the arguments' JSON)."""

    kind: Literal["content", "reasoning", "tool"]
    text: str = ""
    index: int = 0
    id: str | None = None
    name: str | None = None


class ChatOutput:
    def __init__(
        self,
        *,
        tool_mode: ToolMode = "none",
        tool_names: frozenset[str] = frozenset(),
        reasoning: bool = True,
        reasoning_open: bool = False,
    ) -> None:
        forced = tool_mode in ("required", "named")
        self._reasoning = ReasoningSplitter(reasoning_open) if reasoning and not forced else None
        self._forced = ForcedCallParser() if forced else None
        self._auto = AutoToolParser(tool_names) if tool_mode == "auto" else None
        self.tool_calls = 0

    def feed(self, text: str) -> list[Piece]:
        if self._reasoning is None:
            return self._content(text)
        out: list[Piece] = []
        for kind, part in self._reasoning.feed(text):
            out += [Piece("reasoning", part)] if kind == "reasoning" else self._content(part)
        return out

    def finish(self) -> list[Piece]:
        out: list[Piece] = []
        if self._reasoning is not None:
            for kind, part in self._reasoning.finish():
                out += [Piece("reasoning", part)] if kind == "reasoning" else self._content(part)
        if self._forced is not None:
            out += self._calls(self._forced.finish())
        if self._auto is not None:
            out += self._auto_pieces(self._auto.finish())
        return out

    def _content(self, text: str) -> list[Piece]:
        if not text:
            return []
        if self._forced is not None:
            return self._calls(self._forced.feed(text))
        if self._auto is not None:
            return self._auto_pieces(self._auto.feed(text))
        return [Piece("content", text)]

    def _calls(self, calls: list[tuple[int, str | None, str | None, str]]) -> list[Piece]:
        out = []
        for index, call_id, name, args in calls:
            if call_id is not None:
                self.tool_calls = max(self.tool_calls, index + 1)
            out.append(Piece("tool", args, index, call_id, name))
        return out

    def _auto_pieces(
        self, items: list[str | tuple[int, str | None, str | None, str]]
    ) -> list[Piece]:
        out: list[Piece] = []
        for item in items:
            if isinstance(item, str):
                if item:
                    out.append(Piece("content", item))
            else:
                out += self._calls([item])
        return out


@dataclass(slots=True)
class Collected:
    """A whole answer, for non-streaming responses."""

    content: str = ""
    reasoning: str = ""
    calls: list[dict[str, str]] | None = None

    def add(self, pieces: list[Piece]) -> None:
        for p in pieces:
            if p.kind == "content":
                self.content += p.text
            elif p.kind == "reasoning":
                self.reasoning += p.text
            else:
                if self.calls is None:
                    self.calls = []
                while len(self.calls) <= p.index:
                    self.calls.append({"id": "", "name": "", "arguments": ""})
                call = self.calls[p.index]
                if p.id is not None:
                    call["id"] = p.id
                if p.name is not None:
                    call["name"] = p.name
                call["arguments"] += p.text
