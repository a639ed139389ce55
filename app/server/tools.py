"""Tool calling: prompts, grammars and parsers.

- ``tool_choice`` ``required`` or a named function: the output is constrained by a JSON schema
  (turned into a grammar by the engine) to exactly ``{"name": ..., "arguments": {...}}``, so
  even a model never trained for tools produces a valid call. :class:`ForcedCallParser`
  streams it as a tool call: the name as soon as it is complete, then the arguments as they
  are written.
- ``auto``: the tools go to the model's chat template (``tools=...``). Models without a
  template, or whose template ignores tools, get :data:`TOOL_PROMPT` as a system message
  instead. :class:`AutoToolParser` finds calls in the answer: ``<tool_call>{...}</tool_call>``
  (Hermes, Qwen), ``[TOOL_CALLS][...]`` (Mistral), ``<|python_tag|>{...}`` or a bare JSON
  object/list with ``name`` and ``arguments``/``parameters`` (Llama 3.x). Text that is not a
  valid call of a listed tool stays content.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from typing import Any, Literal

ToolMode = Literal["none", "auto", "required", "named"]
CallPiece = tuple[int, str | None, str | None, str]  # index, id (first piece), name, arguments

TOOL_PROMPT = """You can call the following tools. Each is described as JSON:
{tools}

To call a tool, answer with only this, and nothing else:
<tool_call>{{"name": "<tool name>", "arguments": {{<the arguments as JSON>}}}}</tool_call>
To call several tools, write one <tool_call> block per call. If no tool is needed, answer \
normally."""

_ALPHABET = string.ascii_letters + string.digits


def new_call_id() -> str:
    return "call_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    described = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    return TOOL_PROMPT.format(tools=described)


def template_supports_tools(template_source: str | None) -> bool:
    return bool(template_source) and "tools" in (template_source or "")


def call_as_text(name: str, arguments: str) -> str:
    """An earlier call, written the way the tool prompt asks for calls (for templates that
    cannot render ``tool_calls`` themselves)."""
    try:
        args: Any = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        args = arguments
    call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>{call}</tool_call>"


# ---- forced calls ---------------------------------------------------------------------------


def _arguments_schema(parameters: dict[str, Any] | None) -> dict[str, Any]:
    schema = dict(parameters or {})
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
        # Without this a grammar lets a small model invent keys forever.
        schema.setdefault("additionalProperties", False)
    return schema


def call_schema(functions: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call of one of ``functions`` (OpenAI function definitions)."""
    options = [
        {
            "type": "object",
            "properties": {
                "name": {"const": f["name"]},
                "arguments": _arguments_schema(f.get("parameters")),
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


class ForcedCallParser:
    """Streams ``{"name": "f", "arguments": {...}}`` as one tool call."""

    def __init__(self) -> None:
        self._buf = ""
        self._end: _JsonEnd | None = None

    def feed(self, text: str) -> list[CallPiece]:
        out: list[CallPiece] = []
        if self._end is None:
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
        m = re.match(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"', self._buf)
        if m is None:
            return []
        return [(0, new_call_id(), json.loads(f'"{m.group(1)}"'), "")]


# ---- calls in free text ---------------------------------------------------------------------

_MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")
_FENCE = "```json"  # a call in a code block: only at the very start of an answer


def _partial_marker(text: str) -> int:
    best = 0
    for marker in _MARKERS:
        for n in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:n]):
                best = n
                break
    return best


class AutoToolParser:
    """Passes text through until it sees a tool call; then collects the rest and parses it
    at the end. ``feed`` and ``finish`` return text (content) and :data:`CallPiece` s."""

    def __init__(self, tool_names: frozenset[str]) -> None:
        self.tool_names = tool_names
        self._state: Literal["start", "text", "call"] = "start"
        self._buf = ""

    def feed(self, text: str) -> list[str | CallPiece]:
        self._buf += text
        if self._state == "start":
            head = self._buf.lstrip()
            if not head or any(m.startswith(head) for m in (*_MARKERS, _FENCE)):
                return []
            if head.startswith((*_MARKERS, _FENCE)) or head[0] in "{[":
                self._state = "call"
                return []
            self._state = "text"
        if self._state == "text":
            found = [(self._buf.find(m), m) for m in _MARKERS if m in self._buf]
            if found:
                at = min(found)[0]
                before, self._buf = self._buf[:at], self._buf[at:]
                self._state = "call"
                return [before]
            hold = _partial_marker(self._buf)
            emit, self._buf = self._buf[: len(self._buf) - hold], self._buf[len(self._buf) - hold :]
            return [emit]
        return []

    def finish(self) -> list[str | CallPiece]:
        rest, self._buf = self._buf, ""
        if self._state != "call":
            return [rest]
        calls = parse_calls(rest, self.tool_names)
        if calls is None:
            return [rest]
        out: list[str | CallPiece] = []
        for i, (name, args) in enumerate(calls):
            out += [(i, new_call_id(), name, ""), (i, None, None, args)]
        return out


def parse_calls(text: str, tool_names: frozenset[str]) -> list[tuple[str, str]] | None:
    """``[(name, arguments_json)]`` if ``text`` is nothing but calls of known tools."""
    t = text.strip()
    if "<tool_call>" in t:
        blocks = re.findall(r"<tool_call>(.*?)(?:</tool_call>|$)", t, re.S)
    else:
        for marker in _MARKERS[1:]:
            t = t.removeprefix(marker)
        blocks = [t]
    calls: list[tuple[str, str]] = []
    for block in blocks:
        values = _json_values(_unfence(block.strip()))
        if values is None:
            return None
        for value in values:
            for item in value if isinstance(value, list) else [value]:
                call = _as_call(item, tool_names)
                if call is None:
                    return None
                calls.append(call)
    return calls or None


def _unfence(text: str) -> str:
    m = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.S)
    return m.group(1) if m else text


def _json_values(text: str) -> list[Any] | None:
    """Every JSON value in ``text`` (separated by whitespace or ';'); None if anything else."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    i = 0
    while True:
        while i < len(text) and (text[i].isspace() or text[i] == ";"):
            i += 1
        if i >= len(text):
            return values or None
        try:
            value, i = decoder.raw_decode(text, i)
        except ValueError:
            return None
        values.append(value)


def _as_call(item: Any, tool_names: frozenset[str]) -> tuple[str, str] | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):  # {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or name not in tool_names:
        return None
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        return name, args
    return name, json.dumps(args, ensure_ascii=False)
