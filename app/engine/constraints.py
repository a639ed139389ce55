"""Grammars and JSON schemas, checked and bounded before they reach llama.cpp.

llama.cpp's GBNF parser recurses once per nesting level and expands every ``{m,n}`` repetition
into rules: a grammar of 50,000 nested parentheses or a schema with ``"maxLength": 20000``
overflows the C stack and takes the whole process down (the API runs inside the desktop app).
And a 150-byte schema (``"minLength": 100000000``) makes the schema converter build gigabytes.
So every constraint goes through :func:`grammar_for` first, on the thread that submits the job:
the schema's size, depth, repetition counts, ``enum`` sizes and patterns are checked before it
is converted, and the GBNF (given or converted) is read the way llama.cpp reads it
(:mod:`app.engine.gbnf`) for its size, nesting, rules and start-up cost before llama.cpp parses
it. Anything past a bound is a :class:`BadRequestError` saying what is too large and the limit.
Results are cached, so a tool schema sent with every request of an agent is converted once.
Pure Python (llama-cpp-python's schema converter is imported when a schema is first
converted); thread-safe.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import types
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from app.engine import gbnf
from app.engine.triggers import check_triggers
from app.engine.types import BadRequestError, SamplingParams

__all__ = ["Grammar", "check_gbnf", "grammar_for", "schema_rules"]

MAX_SCHEMA_BYTES: Final = 64 * 1024  # the schema as JSON
MAX_SCHEMA_DEPTH: Final = 32  # nested objects/arrays in the schema document
# minLength/maxLength/minItems/maxItems/… and a pattern's {m,n}: half of what llama.cpp takes
# in GBNF, as an optional list or a group around a repetition adds to the rules it counts
MAX_REPEAT: Final = 1000
MAX_ENUM: Final = 1000  # values of one enum (OpenAI's structured outputs allow 1,000 too)
MAX_ENUM_BYTES: Final = 32 * 1024  # all values of one enum, as JSON
MAX_PROPERTIES: Final = 256  # properties of one object (the converter is quadratic in them)
MAX_PATTERN: Final = 1000  # characters of one pattern
MAX_GRAMMAR_BYTES: Final = 128 * 1024  # GBNF text, given or converted
_REPEAT_KEYWORDS: Final = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)
# a {m}, {m,} or {m,n} quantifier in a regular expression, outside a class, not escaped
_QUANTIFIER: Final = re.compile(r"\\.|\[(?:\\.|[^\]])*\]|\{([^}]*)\}")
_CACHE_SIZE: Final = 128


@dataclass(frozen=True, slots=True)
class Grammar:
    text: str  # GBNF, checked against every bound above
    root: str = "root"


_cache: OrderedDict[str, Grammar] = OrderedDict()
_cache_lock = threading.Lock()


def grammar_for(sampling: SamplingParams) -> Grammar | None:
    """The GBNF that constrains a generation (from ``sampling.json_schema``, else
    ``sampling.grammar``), checked and bounded; None when unconstrained. Raises
    BadRequestError saying what is too large or invalid (also for a bad grammar trigger,
    :func:`app.engine.triggers.check_triggers`)."""
    if sampling.grammar_triggers and (sampling.grammar or sampling.json_schema is not None):
        check_triggers(sampling.grammar_triggers)
    if sampling.json_schema is not None:
        key = "schema:" + _schema_text(sampling.json_schema)
    elif sampling.grammar:
        key = "gbnf:" + sampling.grammar
    else:
        return None
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
            return cached
    if sampling.json_schema is not None:
        check_schema(sampling.json_schema)
        grammar = Grammar(_convert(key[len("schema:") :]))
        what = "The grammar made from the JSON schema"
    else:
        grammar = Grammar(sampling.grammar or "")
        what = "The grammar"
    check_gbnf(grammar.text, what)
    with _cache_lock:
        _cache[key] = grammar
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return grammar


def _schema_text(schema: Any) -> str:
    try:
        text = json.dumps(schema, allow_nan=False)  # key order matters: it orders the output
    except (TypeError, ValueError, RecursionError) as e:
        raise BadRequestError(f"The JSON schema is not valid JSON data: {e}") from e
    if len(text.encode("utf-8")) > MAX_SCHEMA_BYTES:
        raise BadRequestError(
            f"The JSON schema is too large ({len(text):,} bytes); the limit is "
            f"{MAX_SCHEMA_BYTES:,}. Simplify it."
        )
    return text


def check_schema(schema: Any) -> None:
    """Refuse schema documents whose grammar would be too large for llama.cpp."""
    if not isinstance(schema, dict | bool):
        raise BadRequestError("The JSON schema must be an object.")
    stack: list[tuple[Any, int, str]] = [(schema, 0, "")]
    while stack:
        node, depth, path = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise BadRequestError(
                f"The JSON schema is nested too deeply (over {MAX_SCHEMA_DEPTH} levels at "
                f"{path or '/'}); flatten it."
            )
        if isinstance(node, dict):
            _check_keywords(node, path)
            for k, v in node.items():
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1, f"{path}/{k}"))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1, f"{path}/{i}"))


def _check_keywords(node: dict[str, Any], path: str) -> None:
    where = path or "/"
    for keyword in _REPEAT_KEYWORDS:
        value = node.get(keyword)
        if value is None or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or not value >= 0:  # NaN is not >= 0 either
            raise BadRequestError(f"'{keyword}' at {where} must be a non-negative integer.")
        if value > MAX_REPEAT:
            raise BadRequestError(
                f"'{keyword}': {value} at {where} is too large for a grammar; the limit "
                f"is {MAX_REPEAT:,}. Lower it or leave it out."
            )
        if value != int(value):
            raise BadRequestError(f"'{keyword}' at {where} must be a non-negative integer.")
    for low, high in (("minLength", "maxLength"), ("minItems", "maxItems")):
        numbers = isinstance(node.get(low), int | float) and isinstance(node.get(high), int | float)
        if numbers and node[low] > node[high]:
            raise BadRequestError(f"'{low}' is more than '{high}' at {where}: nothing can match.")
    for keyword in ("properties", "patternProperties", "$defs", "definitions"):
        if keyword in node and not isinstance(node[keyword], dict):
            raise BadRequestError(f"'{keyword}' at {where} must be an object.")
    for keyword in ("enum", "anyOf", "oneOf", "allOf", "required", "prefixItems"):
        if keyword in node and not isinstance(node[keyword], list):
            raise BadRequestError(f"'{keyword}' at {where} must be an array.")
    if len(node.get("properties") or ()) > MAX_PROPERTIES:
        raise BadRequestError(
            f"The object at {where} has {len(node['properties']):,} properties; the limit is "
            f"{MAX_PROPERTIES}. Split it into nested objects."
        )
    values = node.get("enum")
    if isinstance(values, list):
        if len(values) > MAX_ENUM:
            raise BadRequestError(
                f"'enum' at {where} has {len(values):,} values; the limit is {MAX_ENUM:,}."
            )
        if len(json.dumps(values)) > MAX_ENUM_BYTES:
            raise BadRequestError(
                f"'enum' at {where} is too large; its values may take "
                f"{MAX_ENUM_BYTES:,} bytes in all."
            )
    if "pattern" in node:
        _check_pattern(node["pattern"], where)


def _check_pattern(pattern: Any, where: str) -> None:
    """The converter writes each {m,n} of a pattern out (``a{100000000}`` is 100 MB)."""
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN:
        raise BadRequestError(
            f"'pattern' at {where} must be a string of {MAX_PATTERN:,} characters or fewer."
        )
    for m in _QUANTIFIER.finditer(pattern):
        counts = m.group(1)
        if counts is None:
            continue  # an escape or a class
        numbers = [c.strip() for c in counts.split(",")]
        if any(len(c) > 9 or not c.isdecimal() for c in numbers if c):
            raise BadRequestError(f"'pattern' at {where} has an invalid repetition {m[0]!r}.")
        if any(c and int(c) > MAX_REPEAT for c in numbers):
            raise BadRequestError(
                f"'pattern' at {where} repeats {m[0]}; the limit is {MAX_REPEAT:,}. Use * or + "
                "for an open-ended repetition."
            )


def schema_rules(named: list[tuple[str, Any]]) -> tuple[str, list[str]]:
    """GBNF rules for several JSON schemas at once (no ``root``): each schema is checked as
    :func:`grammar_for` checks one, and converted under its own rule name (a grammar that
    composes them, like a tool call's, names them). Returns the rules and each schema's rule
    name, in order. The caller checks the grammar it builds with :func:`check_gbnf`."""
    texts = [_schema_text(schema) for _, schema in named]
    total = sum(len(t) for t in texts)
    if total > MAX_SCHEMA_BYTES * 4:
        raise BadRequestError(
            f"The JSON schemas are too large together ({total:,} bytes); the limit is "
            f"{MAX_SCHEMA_BYTES * 4:,}. Send fewer or smaller tools."
        )
    for _, schema in named:
        check_schema(schema)
    converter = _converter_class()()
    names: list[str] = []
    try:
        for (name, _), text in zip(named, texts, strict=True):
            names.append(converter.visit(converter.resolve_refs(json.loads(text), "stdin"), name))
        return str(converter.format_grammar()), names
    except RecursionError as e:
        raise BadRequestError("The JSON schema refers to itself too deeply.") from e
    except Exception as e:  # as in _convert: the converter's complaints are the request's fault
        raise BadRequestError(f"The JSON schema cannot be turned into a grammar: {e!r}") from e


def _convert(schema_text: str) -> str:
    converter = _converter_class()()
    try:
        schema = converter.resolve_refs(json.loads(schema_text), "stdin")
        converter.visit(schema, "")
        return str(converter.format_grammar())
    # llama_cpp's converter reports problems (an unresolvable $ref, a keyword of the wrong
    # type) with assert, KeyError, TypeError, AttributeError…: all are the request's fault.
    except RecursionError as e:
        raise BadRequestError("The JSON schema refers to itself too deeply.") from e
    except KeyError as e:  # the converter meets a $ref while that same $ref is resolved
        ref = str(e.args[0]) if e.args else "?"
        raise BadRequestError(
            f"The JSON schema refers to itself ($ref {ref!r} inside its own definition): "
            "recursive schemas are not supported. Write the nesting out to a fixed depth, or "
            "send a GBNF grammar."
        ) from e
    except Exception as e:
        raise BadRequestError(f"The JSON schema cannot be turned into a grammar: {e!r}") from e


@functools.cache
def _converter_class() -> type:
    """llama-cpp-python's schema converter (its own code, not a copy), with two changes: a
    repetition is written as llama.cpp's ``{m,n}`` (what llama.cpp's own converter writes)
    instead of n-m groups nested in one another, which llama.cpp parses one C stack frame at
    a time; and a rule name is found in constant time, where its search is quadratic in names
    that escape alike (600 properties with CJK names took 15 s)."""
    import llama_cpp.llama_grammar as lg

    # The converter's methods look _build_repetition up in their module's globals: rebuilt
    # on a copy of those globals that has ours, they use it (and nothing else changes).
    env = {**vars(lg), "_build_repetition": _repetition}

    def rebound(f: Any) -> Any:
        return types.FunctionType(f.__code__, env, f.__name__, f.__defaults__, f.__closure__)

    visit = rebound(lg.SchemaConverter.visit)
    invalid_chars = lg.INVALID_RULE_CHARS_RE

    class Converter(lg.SchemaConverter):
        _visit_pattern = rebound(lg.SchemaConverter._visit_pattern)

        def __init__(self) -> None:
            super().__init__(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
            self._keys: dict[tuple[str, str], str] = {}
            self._next: dict[str, int] = {}

        def visit(self, schema: Any, name: str) -> Any:
            if len(name) > 64:  # names grow with the path; a pattern's rules repeat them
                name = name[:40] + "-" + hashlib.sha1(name.encode()).hexdigest()[:12]
            return visit(self, schema, name)

        def _add_rule(self, name: str, rule: str) -> str:
            # the same choice as the original: the escaped name if free or the same rule,
            # else the first free or same-rule name{i}
            esc = invalid_chars.sub("-", name)
            if self._rules.get(esc, rule) == rule:
                key = esc
            elif (esc, rule) in self._keys:
                key = self._keys[(esc, rule)]
            else:
                i = self._next.get(esc, 0)
                while f"{esc}{i}" in self._rules:
                    i += 1
                self._next[esc] = i + 1
                key = f"{esc}{i}"
            self._keys[(esc, rule)] = key
            self._rules[key] = rule
            return key

    return Converter


def _repetition(
    item: str,
    min_items: int,
    max_items: int | None,
    separator_rule: str | None = None,
    item_rule_is_literal: bool = False,
) -> str:
    """``item`` repeated as llama.cpp's json-schema-to-grammar writes it (``build_repetition``)."""
    low, high = int(min_items), None if max_items is None else int(max_items)
    if high == 0:
        return ""
    if low == 0 and high == 1:
        return f"{item}?"
    if not separator_rule:
        if low == 1 and high is None:
            return f"{item}+"
        if low == 0 and high is None:
            return f"{item}*"
        return f"{item}{{{low},{'' if high is None else high}}}"
    rest = _repetition(
        f"({separator_rule} {item})", max(low - 1, 0), None if high is None else high - 1
    )
    result = f"{item} {rest}"
    return f"({result})?" if low == 0 else result


def check_gbnf(text: str, what: str = "The grammar") -> None:
    """Refuse GBNF that is too large, or that llama.cpp would refuse or could not parse safely
    (see :mod:`app.engine.gbnf`), with a BadRequestError saying why."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_GRAMMAR_BYTES:
        raise BadRequestError(
            f"{what} is too large ({size:,} bytes); the limit is {MAX_GRAMMAR_BYTES:,}."
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadRequestError(f"{what} is not valid Unicode text: {e.reason}.") from e
    gbnf.check(text, "root", what)
