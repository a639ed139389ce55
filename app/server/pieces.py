"""The bits an answer is read into (content, reasoning, tool calls): what every protocol's
adapter turns into its own wire shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Piece:
    """A bit of answer. For ``tool``: the first piece of a call has ``id`` and ``name``, the
    next ones carry more of its ``text`` (the arguments' JSON)."""

    kind: Literal["content", "reasoning", "tool"]
    text: str = ""
    index: int = 0
    id: str | None = None
    name: str | None = None
