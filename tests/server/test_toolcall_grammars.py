"""Each family's lazy grammar and reader, bounded: the grammar passes the checks every
constraint passes before llama.cpp, llama.cpp's own grammar sampler (on the test model's
vocabulary) accepts a well-formed call from where the family's trigger matches and refuses a
call of another tool or with arguments off its schema; and reading any answer costs work
linear in its length, however it is split (issue 26: ``<tool_call>`` + a code fence + 4,000
spaces held the event loop 30-40 s)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.constraints import grammar_for
from app.engine.types import BadRequestError, SamplingParams
from app.server.output import ChatOutput
from app.server.toolcalls import BY_NAME, FORMATS, GENERIC, CallReader, lazy_grammar
from tests.helpers.gbnf_match import GrammarMatcher
from tests.helpers.toolcall_families import FAMILIES, FUNCTIONS, SCHEMAS, read

# Work per character of answer: each is looked at a bounded number of times.
LINEAR = 40


@pytest.fixture(scope="module")
def matcher(gemma_path: Path) -> Iterator[GrammarMatcher]:
    m = GrammarMatcher(gemma_path)
    yield m
    m.close()


def grammar_start(text: str, triggers: tuple[str, ...]) -> int:
    """Where a lazy grammar starts in ``text`` (as app.engine.triggers finds it: the earliest
    match, its first group if it has one)."""
    starts = []
    for pattern in triggers:
        m = re.compile(pattern.encode()).search(text.encode())
        if m is not None:
            group = next((i for i in range(1, m.re.groups + 1) if m.start(i) >= 0), 0)
            starts.append(len(text.encode()[: m.start(group)].decode()))
    assert starts, f"no trigger of {triggers} matches {text!r}"
    return min(starts)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_grammar_passes_the_constraint_checks(name: str) -> None:
    text, triggers = lazy_grammar(BY_NAME[name], FUNCTIONS)
    assert grammar_for(SamplingParams(grammar=text, grammar_triggers=triggers)) is not None
    for pattern in triggers:
        assert re.compile(pattern.encode()).pattern  # Python patterns, as the engine's


@pytest.mark.parametrize("name", list(FAMILIES))
def test_llama_cpp_accepts_the_familys_calls_and_refuses_others(
    name: str, matcher: GrammarMatcher
) -> None:
    grammar, triggers = lazy_grammar(BY_NAME[name], FUNCTIONS)
    assert matcher.parses(grammar)
    output = FAMILIES[name].output
    call = output[grammar_start(output, triggers) :]
    assert matcher.matches(grammar, call), call
    assert not matcher.matches(grammar, call.replace("get_weather", "rm_rf_slash"))
    off_schema = call.replace('"days": 2', '"days": "two"').replace("\n2\n", "\ntwo\n")
    off_schema = off_schema.replace(">2<", ">two<")
    assert off_schema != call
    assert not matcher.matches(grammar, off_schema)


# The first of each two-call answer in FAMILIES, alone (from where its grammar starts)
FIRST_CALL = {
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
    "</tool_call>",
    "qwen3_coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
    "mistral_nemo": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", '
    '"days": 2}, "id": "a1B2c3D4e"}]',
    "mistral": '[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris", "days": 2}',
    "deepseek_v31": '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": '
    '"Paris", "days": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "deepseek_r1": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris", "days": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "glm": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Paris", "days": 2}<|tool_call_end|>'
    "<|tool_calls_section_end|>",
    "granite3": '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]',
    "firefunction": 'functools[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]',
    "functionary_v31": '<function=get_weather>{"city": "Paris", "days": 2}</function>',
    "functionary_v32": '>>>get_weather\n{"city": "Paris", "days": 2}',
    "command_r7b": '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
    '"parameters": {"city": "Paris", "days": 2}}\n]<|END_ACTION|>',
}


def test_every_two_call_family_has_its_first_call_alone() -> None:
    assert set(FIRST_CALL) == {n for n, f in FAMILIES.items() if len(f.calls) == 2}


@pytest.mark.parametrize("name", list(FIRST_CALL))
def test_without_parallel_calls_the_grammar_takes_one_call_only(
    name: str, matcher: GrammarMatcher
) -> None:
    """``parallel_tool_calls: false``: one call (of any tool) and the answer must end."""
    one, triggers = lazy_grammar(BY_NAME[name], FUNCTIONS, many=False)
    several, _ = lazy_grammar(BY_NAME[name], FUNCTIONS)
    output = FAMILIES[name].output
    both = output[grammar_start(output, triggers) :]
    first = FIRST_CALL[name]
    assert matcher.matches(several, both) and matcher.matches(several, first)
    assert matcher.matches(one, first)
    assert not matcher.matches(one, both)


@pytest.mark.parametrize("name", list(FIRST_CALL))
def test_without_parallel_calls_only_the_first_call_is_read(name: str) -> None:
    """Where no grammar held the model to one call, the answer's first call is returned."""
    output = FAMILIES[name].output
    out = ChatOutput(
        tool_mode="auto", tool_format=BY_NAME[name], tools=SCHEMAS, parallel_calls=False
    )
    calls = [p.name for p in out.feed(output) + out.finish() if p.kind == "tool" and p.name]
    assert calls == ["get_weather"]
    assert out.tool_calls == 1


def test_an_oversized_schema_leaves_auto_calls_without_a_grammar() -> None:
    huge = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 5000}}}
    with pytest.raises(BadRequestError):
        lazy_grammar(BY_NAME["hermes"], [{"name": "f", "parameters": huge}])


def test_trigger_patterns_past_the_engine_s_bound_leave_calls_without_a_grammar() -> None:
    many = [{"name": f"tool_number_{i}", "parameters": {}} for i in range(40)]
    with pytest.raises(BadRequestError):
        lazy_grammar(BY_NAME["functionary_v32"], many)
    assert lazy_grammar(BY_NAME["hermes"], many)[1] == ("<tool_call>",)


ATTACKS = {
    "spaces after a fence": "```" + " " * 4000,
    "spaces": " " * 4000,
    "an open string": '{"name": "' + "a" * 4000,
    "open objects": '{"name": "get_weather", "arguments": ' + "{" * 4000,
    "arguments before a name": '{"arguments": {"x": "' + "b" * 20000,
    "a parameter that never ends": "<function=get_weather>\n<parameter=city>\n" + "c" * 4000,
}


def openers(name: str) -> list[str]:
    fmt = BY_NAME[name]
    found = [t.replace("\\", "") for t in fmt.triggers(list(SCHEMAS)) if "(" not in t]
    return found or ["get_weather\n"]


@pytest.mark.parametrize("name", [*FAMILIES, GENERIC.name])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_reading_an_attack_is_linear_and_keeps_every_character(name: str, attack: str) -> None:
    for opener in openers(name):
        text = (opener + ATTACKS[attack]) * 2
        for step in (1, 7):
            reader = CallReader(BY_NAME[name], SCHEMAS)
            pieces = []
            for i in range(0, len(text), step):
                pieces += reader.feed(text[i : i + step])
            pieces += reader.finish()
            assert reader.work <= LINEAR * len(text), (opener, reader.work)
            if not any(p.kind == "tool" for p in pieces):
                assert "".join(p.text for p in pieces) == text


@pytest.mark.parametrize("name", [f.name for f in (*FORMATS, GENERIC)])
def test_many_openers_in_a_row_cost_linear_work(name: str) -> None:
    for opener in openers(name):
        text = opener * 3000
        reader = CallReader(BY_NAME[name], SCHEMAS)
        for ch in text:
            reader.feed(ch)
        reader.finish()
        assert reader.work <= LINEAR * len(text), opener


@pytest.mark.parametrize("name", list(FAMILIES))
def test_reading_a_long_answer_is_linear_and_split_alike(name: str) -> None:
    """Fifty answers in a row (past the point where the reader drops what it has read):
    character by character as whole, in linear work."""
    text = FAMILIES[name].output * 50

    def output() -> ChatOutput:
        return ChatOutput(tool_mode="auto", tool_format=BY_NAME[name], tools=SCHEMAS)

    slow = output()
    assert read(slow, list(text)) == read(output(), [text])
    assert slow.work <= LINEAR * len(text)


EDIT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "edits": {"type": "array"},
        "n": {"type": "integer"},
    },
}
XML_CALLS = {
    "qwen3_coder": "<tool_call>\n<function=edit>\n<parameter=path>\n{path}\n</parameter>\n"
    "<parameter=edits>\n{edits}\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n"
    "</tool_call>",
    "glm": "<tool_call>edit\n<arg_key>path</arg_key>\n<arg_value>{path}</arg_value>\n"
    "<arg_key>edits</arg_key>\n<arg_value>{edits}</arg_value>\n<arg_key>n</arg_key>\n"
    "<arg_value>3</arg_value>\n</tool_call>",
}


@pytest.mark.parametrize("name", list(XML_CALLS))
def test_xml_style_parameters_of_any_size_stream_as_json(name: str) -> None:
    """Text parameters stream as JSON strings, objects and lists as written, however long
    (a file's contents); numbers are read whole."""
    path = 'src/"quoted"\\dir\n' + "x" * 100_000 + "</div>"
    edits = json.dumps([{"old": "a" * 50_000, "new": "b"}])
    text = XML_CALLS[name].replace("{path}", path).replace("{edits}", edits)
    reader = CallReader(BY_NAME[name], {"edit": EDIT})
    pieces = []
    for i in range(0, len(text), 3):
        pieces += reader.feed(text[i : i + 3])
    pieces += reader.finish()
    assert reader.work <= LINEAR * len(text)
    assert [p.name for p in pieces if p.name] == ["edit"]
    arguments = json.loads("".join(p.text for p in pieces if p.kind == "tool"))
    assert arguments == {"path": path, "edits": json.loads(edits), "n": 3}
