"""Separating a model's thinking (``<think>…</think>``) from its answer, as it streams.

Reasoning models either write ``<think>`` themselves, or their chat template ends the prompt
with it (DeepSeek-R1, QwQ, Qwen3): then the output starts inside the thinking and only
``</think>`` appears. :func:`prompt_opens_reasoning` (the engine's, in
:mod:`app.engine.reasoning`) tells the two apart by rendering the template;
:class:`ReasoningSplitter` never lets part of a tag reach either stream.
"""

from __future__ import annotations

from typing import Literal

from app.engine.reasoning import THINK, prompt_opens_reasoning, reasoning_format

__all__ = ["CLOSE", "OPEN", "ReasoningSplitter", "opens_think"]

OPEN = THINK.open
CLOSE = THINK.close
Kind = Literal["reasoning", "content"]


def opens_think(template_source: str | None, effort: str | None = None) -> bool:
    """Whether an answer starts inside ``<think>`` (the format :class:`ReasoningSplitter`
    reads) for this template and reasoning effort."""
    fmt = reasoning_format(template_source)
    return fmt is THINK and prompt_opens_reasoning(template_source, effort)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that begins ``tag`` (but is not all of it)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class ReasoningSplitter:
    """``feed(text)`` returns ``(kind, text)`` pairs; ``finish()`` flushes the rest."""

    def __init__(self, starts_in_reasoning: bool = False) -> None:
        self._state: Literal["start", "reasoning", "content"] = (
            "reasoning" if starts_in_reasoning else "start"
        )
        self._buf = ""
        # Whitespace at the start of the answer and right after a tag is dropped (a fallback
        # transcript ends in "Assistant:", so the first token usually begins with a space).
        self._strip_leading = True

    def feed(self, text: str) -> list[tuple[Kind, str]]:
        self._buf += text
        out: list[tuple[Kind, str]] = []
        if self._state == "start":
            head = self._buf.lstrip()
            if head.startswith(OPEN):
                self._state, self._buf = "reasoning", head[len(OPEN) :]
                self._strip_leading = True
            elif OPEN.startswith(head):
                return out  # maybe the beginning of <think>: wait
            else:
                self._state = "content"
        if self._state == "reasoning":
            at = self._buf.find(CLOSE)
            if at == -1:
                hold = _partial_suffix(self._buf, CLOSE)
                cut = len(self._buf) - hold
                emit, self._buf = self._buf[:cut], self._buf[cut:]
                self._add(out, "reasoning", emit)
                return out
            self._add(out, "reasoning", self._buf[:at])
            self._state, self._buf = "content", self._buf[at + len(CLOSE) :]
            self._strip_leading = True
        emit, self._buf = self._buf, ""
        self._add(out, "content", emit)
        return out

    def finish(self) -> list[tuple[Kind, str]]:
        out: list[tuple[Kind, str]] = []
        rest, self._buf = self._buf, ""
        self._add(out, "reasoning" if self._state == "reasoning" else "content", rest)
        return out

    def _add(self, out: list[tuple[Kind, str]], kind: Kind, text: str) -> None:
        if self._strip_leading:
            text = text.lstrip()
            if not text:
                return
            self._strip_leading = False
        if text:
            out.append((kind, text))
