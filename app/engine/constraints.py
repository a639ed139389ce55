"""Grammars and JSON schemas, checked and bounded before they reach llama.cpp.

llama.cpp's GBNF parser recurses once per nesting level and expands every ``{m,n}`` repetition
into rules: a grammar of 50,000 nested parentheses or a schema with ``"maxLength": 20000``
overflows the C stack and takes the whole process down (the API runs inside the desktop app).
And a 150-byte schema (``"minLength": 100000000``) makes the schema converter build gigabytes.
So every constraint goes through :func:`grammar_for` first, on the thread that submits the job:
the schema's size, depth, repetition counts and ``enum`` sizes are checked before it is
converted, and the GBNF (given or converted) is scanned for its size, nesting and repetitions
before llama.cpp parses it. Anything past a bound is a :class:`BadRequestError` saying what is
too large and the limit. Results are cached, so a tool schema sent with every request of an
agent is converted once. Pure Python; thread-safe.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from app.engine.types import BadRequestError, SamplingParams

MAX_SCHEMA_BYTES: Final = 64 * 1024  # the schema as JSON
MAX_SCHEMA_DEPTH: Final = 32  # nested objects/arrays in the schema document
MAX_REPEAT: Final = 1000  # minLength/maxLength/minItems/maxItems/… and GBNF {m,n}
MAX_ENUM: Final = 1000  # values of one enum
MAX_ENUM_BYTES: Final = 32 * 1024  # all values of one enum, as JSON
MAX_GRAMMAR_BYTES: Final = 128 * 1024  # GBNF text, given or converted
MAX_GRAMMAR_NESTING: Final = 1200  # groups in groups (the schema converter nests one a repeat)
MAX_GRAMMAR_RULES: Final = 2000
MAX_REPEAT_TOTAL: Final = 20_000  # all {m,n} upper bounds of a grammar, added up
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
    BadRequestError saying what is too large or invalid."""
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
    for keyword in _REPEAT_KEYWORDS:
        value = node.get(keyword)
        if value is None or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or value < 0:
            raise BadRequestError(f"'{keyword}' at {path or '/'} must be a non-negative number.")
        if value > MAX_REPEAT:
            raise BadRequestError(
                f"'{keyword}': {value} at {path or '/'} is too large for a grammar; the limit "
                f"is {MAX_REPEAT:,}. Lower it or leave it out."
            )
    for keyword in ("properties", "patternProperties", "$defs", "definitions"):
        if keyword in node and not isinstance(node[keyword], dict):
            raise BadRequestError(f"'{keyword}' at {path or '/'} must be an object.")
    for keyword in ("enum", "anyOf", "oneOf", "allOf", "required", "prefixItems"):
        if keyword in node and not isinstance(node[keyword], list):
            raise BadRequestError(f"'{keyword}' at {path or '/'} must be an array.")
    values = node.get("enum")
    if isinstance(values, list):
        if len(values) > MAX_ENUM:
            raise BadRequestError(
                f"'enum' at {path or '/'} has {len(values):,} values; the limit is {MAX_ENUM:,}."
            )
        if len(json.dumps(values)) > MAX_ENUM_BYTES:
            raise BadRequestError(
                f"'enum' at {path or '/'} is too large; its values may take "
                f"{MAX_ENUM_BYTES:,} bytes in all."
            )
    pattern = node.get("pattern")
    if pattern is not None and (not isinstance(pattern, str) or len(pattern) > 1000):
        raise BadRequestError(f"'pattern' at {path or '/'} must be a string of 1,000 or fewer.")


def _convert(schema_text: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return str(json_schema_to_gbnf(schema_text))
    # llama_cpp's converter reports problems (an unresolvable $ref, a keyword of the wrong
    # type) with assert, KeyError, TypeError, AttributeError…: all are the request's fault.
    except RecursionError as e:
        raise BadRequestError("The JSON schema refers to itself too deeply.") from e
    except Exception as e:
        raise BadRequestError(f"The JSON schema cannot be turned into a grammar: {e!r}") from e


def check_gbnf(text: str, what: str = "The grammar") -> None:
    """Scan GBNF for what makes llama.cpp's parser recurse or expand too far: size, nesting of
    groups, number of rules and repetition counts. Syntax errors are left to llama.cpp, which
    reports them without crashing."""
    size = len(text.encode("utf-8"))
    if size > MAX_GRAMMAR_BYTES:
        raise BadRequestError(
            f"{what} is too large ({size:,} bytes); the limit is {MAX_GRAMMAR_BYTES:,}."
        )
    depth = rules = total = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":  # comment to the end of the line
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "\"'[":  # a literal or a character class: skip, honouring escapes
            close = "]" if c == "[" else c
            i += 1
            while i < n and text[i] != close:
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "(":
            depth += 1
            if depth > MAX_GRAMMAR_NESTING:
                raise BadRequestError(
                    f"{what} nests groups too deeply (over {MAX_GRAMMAR_NESTING} levels of "
                    "parentheses); use named rules instead."
                )
        elif c == ")":
            depth = max(0, depth - 1)
        elif c == ":" and text.startswith("::=", i):
            rules += 1
            if rules > MAX_GRAMMAR_RULES:
                raise BadRequestError(
                    f"{what} has too many rules (over {MAX_GRAMMAR_RULES:,}); simplify it."
                )
            depth = 0
            i += 3
            continue
        elif c == "{":
            end = text.find("}", i)
            if end < 0:
                raise BadRequestError(f"{what} has an unclosed '{{' repetition.")
            bounds = [b.strip() for b in text[i + 1 : end].split(",")]
            numbers = [int(b) for b in bounds if b.isdigit()]
            if not numbers or any(not b.isdigit() for b in bounds if b):
                raise BadRequestError(f"{what} has an invalid repetition {text[i : end + 1]}.")
            if max(numbers) > MAX_REPEAT:
                raise BadRequestError(
                    f"{what} repeats {max(numbers):,} times ({text[i : end + 1]}); the limit "
                    f"is {MAX_REPEAT:,}."
                )
            total += max(numbers)
            if total > MAX_REPEAT_TOTAL:
                raise BadRequestError(
                    f"{what} has too many repetitions in all (over {MAX_REPEAT_TOTAL:,}); "
                    "simplify it."
                )
            i = end + 1
            continue
        i += 1
