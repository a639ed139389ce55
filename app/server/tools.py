"""Tool calling: prompts, grammars and parsers.

- ``tool_choice`` ``required`` or a named function: the output is constrained by a JSON schema
  (turned into a grammar by the engine) to exactly ``{"name": ..., "arguments": {...}}``, so
  even a model never trained for tools produces a valid call. :class:`ForcedCallParser`
  streams it as a tool call: the name as soon as it is complete, then the arguments as they
  are written.
- ``auto``: the tools go to the model's chat template (``tools=...``). Models without a
  template, or whose template ignores tools, get :data:`TOOL_PROMPT` as a system message
  instead. Calls are found in the answer in the model family's own format, and constrained by
  a lazy grammar once one opens: :mod:`app.server.toolcalls`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from app.server.toolcalls.grammar import arguments_schema
from app.server.toolcalls.reader import new_call_id

ToolMode = Literal["none", "auto", "required", "named"]
CallPiece = tuple[int, str | None, str | None, str]  # index, id (first piece), name, arguments

TOOL_PROMPT = """You can call the following tools. Each is described as JSON:
{tools}

To call a tool, answer with only this, and nothing else:
<tool_call>{{"name": "<tool name>", "arguments": {{<the arguments as JSON>}}}}</tool_call>
To call several tools, write one <tool_call> block per call. If no tool is needed, answer \
normally."""

__all__ = [
    "TOOL_PROMPT",
    "ForcedCallParser",
    "ToolMode",
    "call_schema",
    "template_supports_tools",
    "tools_prompt",
]


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    described = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    return TOOL_PROMPT.format(tools=described)


def template_supports_tools(template_source: str | None) -> bool:
    return bool(template_source) and "tools" in (template_source or "")


# ---- forced calls ---------------------------------------------------------------------------


def call_schema(functions: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call of one of ``functions`` (OpenAI function definitions)."""
    options = [
        {
            "type": "object",
            "properties": {
                "name": {"const": f["name"]},
                "arguments": arguments_schema(f.get("parameters")),
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for f in functions
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*', re.S)


class _JsonEnd:
    """Finds where a JSON value ends in text that arrives in pieces."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self.started = False
        self.ended = False

    def scan(self, text: str) -> int:
        """How much of ``text`` belongs to the value (all of it unless it ends here)."""
        for i, ch in enumerate(text):
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string = False
                    if self.depth == 0:
                        self.ended = True
                        return i + 1
                continue
            if ch.isspace() and not self.started:
                continue
            self.started = True
            if ch == '"':
                self.in_string = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                self.depth -= 1
                if self.depth <= 0:
                    self.ended = True
                    return i + 1
            elif self.depth == 0 and ch in ",\n":
                self.ended = True
                return i
        return len(text)


# The head (``{"name": "...", "arguments": ``) is looked for in at most this much text: the
# grammar writes it in a few dozen characters, and matching a growing buffer again and again
# must stay bounded (issue 26).
FORCED_HEAD_CAP = 1024


class ForcedCallParser:
    """Streams ``{"name": "f", "arguments": {...}}`` as one tool call."""

    def __init__(self) -> None:
        self._buf = ""
        self._end: _JsonEnd | None = None

    def feed(self, text: str) -> list[CallPiece]:
        out: list[CallPiece] = []
        if self._end is None:
            if len(self._buf) > FORCED_HEAD_CAP:
                return out  # no call head where one must be: nothing more to find
            self._buf += text
            m = _HEAD.match(self._buf)
            if m is None:
                return out
            name = json.loads(f'"{m.group(1)}"')
            out.append((0, new_call_id(), name, ""))
            text, self._buf = self._buf[m.end() :], ""
            self._end = _JsonEnd()
        if not self._end.ended and text:
            n = self._end.scan(text)
            if text[:n]:
                out.append((0, None, None, text[:n]))
        return out

    def finish(self) -> list[CallPiece]:
        if self._end is not None or not self._buf.strip():
            return []
        # The head never completed (the answer was cut short): salvage a name if there is one.
        m = re.match(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"', self._buf[:FORCED_HEAD_CAP])
        if m is None:
            return []
        return [(0, new_call_id(), json.loads(f'"{m.group(1)}"'), "")]
