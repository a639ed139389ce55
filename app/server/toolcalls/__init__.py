"""Tool calls in each model family's own format.

- ``formats.py``: the table. Each :class:`ToolFormat` says how its family is recognised from
  the chat template's source (marker strings, as llama.cpp does), how answers are read, where
  a call opens (lazy-grammar trigger patterns), the grammar of its calls, and the message
  shape its template expects for earlier calls and results.
- ``syntaxes.py``: one small reader per family, built from ``reader.py``'s streaming
  primitives (linear, bounded: safe on the event loop).
- ``grammar.py``: the call grammars, over the tools' JSON schemas.
- ``render.py``: earlier calls and results shaped for the family's template.

A new family is a reader in ``syntaxes.py``, a grammar shape and a row in ``formats.py``,
and its real template in the tests (``tests/server/test_toolcall_formats.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.engine.triggers import check_triggers
from app.server.pieces import Piece
from app.server.toolcalls import grammar
from app.server.toolcalls.formats import BY_NAME, FORMATS, GENERIC, HERMES, ToolFormat, detect
from app.server.toolcalls.reader import Reader

__all__ = [
    "BY_NAME",
    "FORMATS",
    "GENERIC",
    "HERMES",
    "CallReader",
    "ToolFormat",
    "detect",
    "format_for",
    "lazy_grammar",
]


def format_for(template_source: str | None) -> ToolFormat:
    """The format a model with this chat template writes calls in: its family's, if the
    template renders tools (it mentions ``tools``) or the family has its own tool prompt;
    else the generic one (the tool prompt asks for ``<tool_call>``)."""
    fmt = detect(template_source)
    renders_tools = "tools" in (template_source or "")
    return fmt if renders_tools or fmt.tools_prompt is not None else GENERIC


class CallReader:
    """Reads an answer in ``fmt``: ``feed(text)`` / ``finish()`` return content, reasoning
    (formats that carry it) and the calls of ``tools`` (name -> parameters' JSON schema)."""

    def __init__(self, fmt: ToolFormat, tools: Mapping[str, Any]) -> None:
        self.format = fmt
        self._reader = Reader(fmt.syntax, tools)

    @property
    def work(self) -> int:
        """Characters examined so far (linear in the answer)."""
        return self._reader.work

    def feed(self, text: str) -> list[Piece]:
        return self._reader.feed(text)

    def finish(self) -> list[Piece]:
        return self._reader.finish()


def lazy_grammar(
    fmt: ToolFormat, functions: list[dict[str, Any]], many: bool = True
) -> tuple[str, tuple[str, ...]]:
    """The grammar of ``fmt``'s calls of ``functions`` (one, or several in a row when
    ``many``: ``parallel_tool_calls``) and the patterns that start it. BadRequestError if a
    schema, the grammar or a pattern (Functionary v3.2's list every tool's name) is past a
    bound; call it off the event loop."""
    triggers = fmt.triggers([f["name"] for f in functions])
    check_triggers(triggers)  # the engine's bounds, checked here so a refusal costs no grammar
    text = grammar.build(fmt.shape, functions, params=fmt.params, key=fmt.name, many=many)
    return text, triggers
