"""Turning a chat model's raw text stream into what the API returns: content, reasoning and
tool calls, the same way for streaming and non-streaming answers.

``ChatOutput.feed(text)`` takes generated text as it arrives and returns :class:`Piece` s;
``finish()`` flushes what was held back. Reasoning (``<think>…</think>``) is split off first,
then tool calls are found in what remains, in the model family's own format
(:mod:`app.server.toolcalls`; a forced call: :mod:`app.server.tools`). Formats that carry
reasoning themselves (GPT-OSS's channels) are read by their own reader instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.server.pieces import Piece
from app.server.reasoning import ReasoningSplitter
from app.server.toolcalls import GENERIC, CallReader, ToolFormat
from app.server.tools import ForcedCallParser, ToolMode

__all__ = ["ChatOutput", "Collected"]


class ChatOutput:
    """Reads one answer. ``tool_format`` is the model family's (``app.server.toolcalls``;
    default: the common shapes) and ``tools`` maps each tool's name to its parameters'
    JSON schema (default: ``tool_names``, untyped). Without ``parallel_calls`` only the
    first call is kept (the grammar allows one; this holds where no grammar applied)."""

    def __init__(
        self,
        *,
        tool_mode: ToolMode = "none",
        tool_names: frozenset[str] = frozenset(),
        reasoning: bool = True,
        reasoning_open: bool = False,
        tool_format: ToolFormat = GENERIC,
        tools: Mapping[str, Any] | None = None,
        parallel_calls: bool = True,
    ) -> None:
        forced = tool_mode in ("required", "named")
        schemas = tools if tools is not None else dict.fromkeys(tool_names)
        own = tool_format.own_reasoning and reasoning and not forced
        self._reasoning = (
            ReasoningSplitter(reasoning_open) if reasoning and not forced and not own else None
        )
        self._forced = ForcedCallParser() if forced else None
        # A format that carries reasoning itself (GPT-OSS's channels) is read without tools too.
        reads = tool_mode == "auto" or own
        self._reader = (
            CallReader(tool_format, schemas if tool_mode == "auto" else {}) if reads else None
        )
        self.tool_calls = 0
        self._max_calls = None if parallel_calls else 1

    @property
    def work(self) -> int:
        """Characters the call reader examined (linear in the answer)."""
        return self._reader.work if self._reader is not None else 0

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
        if self._reader is not None:
            out += self._counted(self._reader.finish())
        return out

    def _content(self, text: str) -> list[Piece]:
        if not text:
            return []
        if self._forced is not None:
            return self._calls(self._forced.feed(text))
        if self._reader is not None:
            return self._counted(self._reader.feed(text))
        return [Piece("content", text)]

    def _counted(self, pieces: list[Piece]) -> list[Piece]:
        if self._max_calls is not None:
            pieces = [p for p in pieces if p.kind != "tool" or p.index < self._max_calls]
        for p in pieces:
            if p.kind == "tool" and p.id is not None:
                self.tool_calls = max(self.tool_calls, p.index + 1)
        return pieces

    def _calls(self, calls: list[tuple[int, str | None, str | None, str]]) -> list[Piece]:
        return self._counted([Piece("tool", a, i, call_id, name) for i, call_id, name, a in calls])


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
