"""Lazy grammars for tool calls in ``auto`` mode: from where a model opens a call in its own
format (a format's trigger patterns) the text must be one or more calls of the request's
tools in that format, with arguments that follow each tool's JSON schema.

The arguments' rules come from the same bounded JSON-schema converter as ``response_format``
(:func:`app.engine.constraints.schema_rules`); each format composes them into its call syntax
(``CallShape`` functions in ``formats.py``), and the whole grammar is checked like any other
(:func:`app.engine.constraints.check_gbnf`). Built grammars are cached: an agent sends the
same tools with every request.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.engine.constraints import check_gbnf, schema_rules

WS = "tc-ws"
COMMON_RULES = f"{WS} ::= [ \\t\\r\\n]{{0,16}}\n"
XML_TEXT = "tc-text"  # free text in an XML-style value (it may not close the value)


def lit(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f'"{escaped}"'


def json_lit(text: str) -> str:
    """``text`` as a JSON string, as a GBNF literal (``"\\"get_time\\""``)."""
    return lit(json.dumps(text, ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class Param:
    key: str
    rule: str  # its value as JSON
    text: bool  # a string: written as plain text in XML-style formats
    required: bool


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    args: str  # the rule of its arguments object
    params: tuple[Param, ...]  # for XML-style formats (empty otherwise)


# A format's grammar: the tools' rules and whether several calls may follow one another
# (``parallel_tool_calls``) in, the ``root`` rule's body (and any rules it adds) out.
CallShape = Callable[[list[Tool], bool], str]


def arguments_schema(parameters: dict[str, Any] | None) -> dict[str, Any]:
    schema = dict(parameters or {})
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
        # Without this a grammar lets a small model invent keys forever.
        schema.setdefault("additionalProperties", False)
    return schema


def _is_text(schema: Any) -> bool:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return kind == "string"


def _tools(functions: list[dict[str, Any]], params: bool) -> tuple[str, list[Tool]]:
    named: list[tuple[str, Any]] = []
    for i, f in enumerate(functions):
        named.append((f"tc{i}-args", arguments_schema(f.get("parameters"))))
        if params:
            schema = arguments_schema(f.get("parameters"))
            props = schema.get("properties") or {}
            named += [(f"tc{i}-p{j}", v) for j, v in enumerate(props.values())]
    rules, names = schema_rules(named)
    tools: list[Tool] = []
    at = 0
    for f in functions:
        args = names[at]
        at += 1
        found: list[Param] = []
        if params:
            schema = arguments_schema(f.get("parameters"))
            required = set(schema.get("required") or ())
            for key, value in (schema.get("properties") or {}).items():
                found.append(Param(key, names[at], _is_text(value), key in required))
                at += 1
        tools.append(Tool(f["name"], args, tuple(found)))
    return rules, tools


_cache: OrderedDict[str, str] = OrderedDict()
_lock = threading.Lock()
_CACHE_SIZE = 64


def build(
    shape: CallShape,
    functions: list[dict[str, Any]],
    *,
    params: bool,
    key: str,
    many: bool = True,
) -> str:
    """The GBNF of ``shape`` over ``functions`` (OpenAI function definitions): one call, or
    several in a row when ``many``; checked. BadRequestError if a schema or the grammar is
    past a bound. Converting takes milliseconds: call it off the event loop."""
    cache_key = f"{key}:{int(many)}:" + json.dumps(functions, sort_keys=True, default=str)
    with _lock:
        if cache_key in _cache:
            _cache.move_to_end(cache_key)
            return _cache[cache_key]
    rules, tools = _tools(functions, params)
    text = f"root ::= {shape(tools, many)}\n{COMMON_RULES}{rules}"
    check_gbnf(text, "The tool-call grammar made from the tools' schemas")
    with _lock:
        _cache[cache_key] = text
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return text


def alternatives(items: list[str]) -> str:
    return items[0] if len(items) == 1 else "( " + " | ".join(items) + " )"


def call_object(tool: Tool, args_key: str = "arguments", extra: str = "", first: str = "") -> str:
    """``{"name": "NAME", "arguments": ARGS}`` (``first`` and ``extra``: more members
    before and after)."""
    w = WS
    return (
        f'"{{" {w} {first} "\\"name\\"" {w} ":" {w} {json_lit(tool.name)} {w} "," {w} '
        f'{lit(json.dumps(args_key))} {w} ":" {w} {tool.args} {w} {extra} "}}"'
    )


def repeated(call: str, many: bool) -> str:
    """One call, or more when ``many``, whitespace between and after (``call`` becomes rule
    ``tc-call``)."""
    return f"tc-call {more('tc-call', many)} {WS}\ntc-call ::= {call}"


def more(item: str, many: bool, sep: str = WS) -> str:
    """What may follow the first of a list's items: more of them (``sep`` before each) when
    ``many``, else nothing (the empty sequence)."""
    return f"( {sep} {item} )*" if many else ""


def xml_params(tool: Tool, param: Callable[[Param], str]) -> str:
    """The tool's parameters in order: required ones, and optional ones maybe."""
    parts = [param(p) if p.required else f"( {param(p)} )?" for p in tool.params]
    return " ".join(parts) if parts else '""'


def xml_text_rule(closer_initial: str) -> str:
    """Text that cannot hold ``</`` + ``closer_initial`` (the start of its closing tag)."""
    return f'{XML_TEXT} ::= ( [^<] | "<" [^/] | "</" [^{closer_initial}] )*\n'
