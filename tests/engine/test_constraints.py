"""Grammars and schemas are bounded before llama.cpp sees them: at each bound a constraint is
accepted and llama.cpp parses it (in a child process, so a crash cannot take the test run
down); past it, a BadRequestError says what is too large."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine import constraints
from app.engine.constraints import (
    MAX_ENUM,
    MAX_GRAMMAR_NESTING,
    MAX_REPEAT,
    MAX_SCHEMA_DEPTH,
    grammar_for,
)
from app.engine.types import BadRequestError, SamplingParams


def schema(s: object) -> SamplingParams:
    return SamplingParams(json_schema=s)  # type: ignore[arg-type]


def gbnf(text: str) -> SamplingParams:
    return SamplingParams(grammar=text)


def nested(depth: int) -> str:
    return "root ::= " + "(" * depth + '"x"' + ")" * depth


def deep_schema(depth: int) -> dict[str, object]:
    s: dict[str, object] = {"type": "string"}
    for _ in range(depth // 2):
        s = {"type": "object", "properties": {"a": s}}
    return s


def parses_in_llama_cpp(gemma_path: Path, grammar: str) -> bool:
    """Whether llama.cpp parses ``grammar`` against the real vocabulary, in a child process."""
    code = f"""
import sys, llama_cpp.llama_cpp as ll
ll.llama_backend_init()
p = ll.llama_model_default_params(); p.vocab_only = True
m = ll.llama_model_load_from_file({str(gemma_path)!r}.encode(), p)
g = ll.llama_sampler_init_grammar(ll.llama_model_get_vocab(m), sys.stdin.read().encode(), b"root")
print("parsed" if g else "refused")
"""
    r = subprocess.run(
        [sys.executable, "-c", code],
        input=grammar,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, f"llama.cpp crashed: {r.returncode} {r.stderr[-500:]}"
    return r.stdout.strip() == "parsed"


@pytest.mark.parametrize(
    ("sampling", "words"),
    [
        (schema({"type": "string", "maxLength": 20000}), "maxLength"),
        (schema({"type": "string", "minLength": 100_000_000}), "minLength"),
        (schema({"type": "array", "maxItems": MAX_REPEAT + 1}), "maxItems"),
        (schema({"enum": list(range(MAX_ENUM + 1))}), "enum"),
        (schema({"enum": ["x" * 1000] * 40}), "enum"),
        (schema(deep_schema(MAX_SCHEMA_DEPTH + 4)), "nested too deeply"),
        (schema({"type": "object", "properties": [1, 2]}), "properties"),
        (schema({"type": "object", "properties": {"a": {"$ref": "#/nope"}}}), "schema"),
        (schema({"a": "x" * 70_000}), "too large"),
        (schema([1, 2]), "object"),
        (gbnf(nested(50_000)), "nests groups"),
        (gbnf(nested(MAX_GRAMMAR_NESTING + 1)), "nests groups"),
        (gbnf('root ::= "a"{0,20000}'), "repeats"),
        (gbnf('root ::= "a"{' + str(MAX_REPEAT + 1) + "}"), "repeats"),
        (gbnf("root ::= " + " ".join(['"a"{0,900}'] * 30)), "repetitions in all"),
        (gbnf("root ::= " + '"a" ' * 70_000), "too large"),
        (gbnf("\n".join(f'r{i} ::= "a"' for i in range(2001)) + "\nroot ::= r0"), "rules"),
        (gbnf('root ::= "a"{x}'), "invalid repetition"),
    ],
)
def test_past_a_bound_the_constraint_is_refused_with_what_is_too_large(
    sampling: SamplingParams, words: str
) -> None:
    with pytest.raises(BadRequestError, match=words):
        grammar_for(sampling)


def test_brackets_inside_literals_and_classes_are_not_nesting() -> None:
    text = 'root ::= "((((" [(((] "\\"(" ' + "# ((((((\n" + 'x ::= "{0,99999}"'
    assert grammar_for(gbnf(nested(MAX_GRAMMAR_NESTING - 1))) is not None
    assert grammar_for(gbnf(text)) is not None


def test_at_the_bounds_llama_cpp_parses_the_grammar(gemma_path: Path) -> None:
    cases = [
        schema({"type": "string", "maxLength": MAX_REPEAT}),
        schema({"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 50}),
        schema({"enum": [f"v{i}" for i in range(MAX_ENUM)]}),
        schema(deep_schema(MAX_SCHEMA_DEPTH - 2)),
        gbnf(nested(MAX_GRAMMAR_NESTING)),
        gbnf('root ::= "a"{0,' + str(MAX_REPEAT) + "}"),
    ]
    for sampling in cases:
        grammar = grammar_for(sampling)
        assert grammar is not None
        assert parses_in_llama_cpp(gemma_path, grammar.text), grammar.text[:200]


def test_a_schema_is_converted_once_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = constraints._convert

    def counting(text: str) -> str:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(constraints, "_convert", counting)
    tool = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    first = grammar_for(schema({**tool, "title": "once"}))
    again = grammar_for(schema(json.loads(json.dumps({**tool, "title": "once"}))))
    assert first is again and len(calls) == 1


def test_the_schemas_property_order_is_the_outputs() -> None:
    """A tool call's grammar must write "name" before "arguments", as the schema lists them
    (the API's streaming parser reads the name first)."""
    grammar = grammar_for(
        schema({"type": "object", "properties": {"name": {"const": "f"}, "arguments": {}}})
    )
    assert grammar is not None
    root = next(line for line in grammar.text.splitlines() if line.startswith("root ::="))
    assert root.index("name") < root.index("arguments")
