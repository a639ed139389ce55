"""Grammars and schemas are bounded before llama.cpp sees them: at each bound a constraint is
accepted and llama.cpp parses it (in a child process, so a crash cannot take the test run
down); past it, a BadRequestError says what is too large."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from app.engine import constraints
from app.engine.constraints import (
    MAX_ENUM,
    MAX_PROPERTIES,
    MAX_REPEAT,
    MAX_SCHEMA_DEPTH,
    grammar_for,
)
from app.engine.gbnf import MAX_NESTING as MAX_GRAMMAR_NESTING
from app.engine.gbnf import MAX_REPEAT as MAX_GRAMMAR_REPEAT
from app.engine.types import BadRequestError, SamplingParams
from tests.helpers.grammar_child import llama_cpp_parses
from tests.helpers.spying import spy


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
        (gbnf('root ::= "a"{' + str(MAX_GRAMMAR_REPEAT + 1) + "}"), "repeats"),
        (gbnf("root ::= " + " ".join(['"a"{0,1999}'] * 11)), "too many rules"),
        (gbnf("root ::= " + '"a" ' * 70_000), "too large"),
        (gbnf('root ::= "a"{x}'), "expecting an integer"),
        (gbnf('root ::= "a"{5,2}'), "fewer times than at least"),
        (gbnf("root ::= ( # comment\r" + "(" * 50_000 + '"a"' + ")" * 50_001), "nests groups"),
        (schema({"type": "string", "pattern": "^a{100000000}$"}), "pattern"),
        (schema({"type": "string", "pattern": "^(ab){0,1001}$"}), "pattern"),
        (schema({"type": "string", "pattern": "x" * 1001}), "pattern"),
        (schema({"type": "string", "minLength": 5, "maxLength": 2}), "nothing can match"),
        (schema({"type": "array", "minItems": 2.5}), "integer"),
        (schema({"type": "object", "properties": {f"p{i}": {} for i in range(257)}}), "257"),
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


CJK_NAMES = [chr(0x4E00 + i) for i in range(MAX_PROPERTIES)]
AT_THE_BOUNDS = [
    schema({"type": "string", "maxLength": MAX_REPEAT}),
    schema({"type": "string", "minLength": MAX_REPEAT, "maxLength": MAX_REPEAT}),
    schema({"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 50}),
    schema({"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": MAX_REPEAT}),
    schema({"enum": [f"v{i}" for i in range(MAX_ENUM)]}),
    schema(deep_schema(MAX_SCHEMA_DEPTH - 2)),
    schema({"type": "string", "pattern": f"^[a-z]{{1,{MAX_REPEAT}}}(-[0-9]{{{MAX_REPEAT}}})?$"}),
    schema({"type": "object", "properties": {n: {"type": "integer"} for n in CJK_NAMES}}),
    schema(
        {
            "type": "object",
            "properties": {"head": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        }
    ),
    gbnf(nested(MAX_GRAMMAR_NESTING)),
    gbnf('root ::= "a"{0,' + str(MAX_GRAMMAR_REPEAT) + "}"),
]


def test_at_the_bounds_llama_cpp_parses_the_grammar(gemma_path: Path) -> None:
    grammars = []
    for sampling in AT_THE_BOUNDS:
        grammar = grammar_for(sampling)
        assert grammar is not None
        grammars.append(grammar.text)
    assert all(llama_cpp_parses(gemma_path, grammars))


def test_repetitions_are_written_as_llama_cpp_writes_them() -> None:
    """{m,n}, as llama.cpp's own converter writes them (llama-cpp-python's nests n-m groups,
    one C stack frame each, so maxLength 20000 overflowed the stack)."""
    string = grammar_for(schema({"type": "string", "minLength": 2, "maxLength": 1000}))
    assert string is not None
    assert r'root ::= "\"" char{2,1000} "\"" space' in string.text.splitlines()
    items = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}
    array = grammar_for(schema(items))
    assert array is not None
    assert 'root ::= "[" space integer ("," space integer){1,3} "]" space' in array.text
    optional = grammar_for(schema({**items, "minItems": 0}))
    assert optional is not None
    assert 'root ::= "[" space (integer ("," space integer){0,3})? "]" space' in optional.text
    pattern = grammar_for(schema({"type": "string", "pattern": "^[0-9]{1,500}x{3}$"}))
    assert pattern is not None and "{1,500}" in pattern.text and "(" not in pattern.text


def test_names_that_escape_alike_are_told_apart_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Property names with no ASCII letters (CJK, say) all escape to '-' in rule names; the
    converter's search for a free name was quadratic in them (600 took 15 s)."""
    probes = 0
    converter: Any = constraints._converter_class()
    real_add = converter._add_rule

    class CountingRules(dict[str, str]):
        def __contains__(self, key: object) -> bool:
            nonlocal probes
            probes += 1
            return super().__contains__(key)

    def add_rule(self: Any, name: str, rule: str) -> str:
        if not isinstance(self._rules, CountingRules):
            self._rules = CountingRules(self._rules)
        return str(real_add(self, name, rule))

    monkeypatch.setattr(converter, "_add_rule", add_rule)
    names = CJK_NAMES
    grammar = grammar_for(schema({"type": "object", "properties": {n: {} for n in names}}))
    assert grammar is not None
    kv_rules = [line for line in grammar.text.splitlines() if "-kv" in line.split(" ::= ")[0]]
    assert len(kv_rules) == len(names)  # every property has its own rule
    assert probes < 10 * len(names)


@pytest.mark.parametrize(
    "bomb",
    [
        {"type": "string", "minLength": 100_000_000},
        {"type": "string", "pattern": "^a{1000000000}$"},
        {"enum": list(range(20_000))},
        {"type": "array", "items": {"type": "string", "maxLength": 100_000}, "maxItems": 100_000},
    ],
)
def test_a_schema_bomb_is_refused_in_bounded_memory(bomb: dict[str, object]) -> None:
    """Refused before anything is built from it (it took 4 GB and 37 s to convert)."""
    tracemalloc.start()
    try:
        with pytest.raises(BadRequestError):
            grammar_for(schema(bomb))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20


def test_a_schema_is_converted_once_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = spy(monkeypatch, constraints, "_convert")
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


def test_a_schema_that_refers_to_itself_is_refused_in_words() -> None:
    """llama-cpp-python's converter stops on a recursive $ref with a bare KeyError."""
    linked_list = {
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node",
    }
    with pytest.raises(BadRequestError) as e:
        grammar_for(SamplingParams(json_schema=linked_list))
    assert e.value.message == (
        "The JSON schema refers to itself ($ref '#/$defs/node' inside its own definition): "
        "recursive schemas are not supported. Write the nesting out to a fixed depth, or send "
        "a GBNF grammar."
    )
