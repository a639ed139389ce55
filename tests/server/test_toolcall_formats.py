"""Every model family's tool calls, on llama.cpp's real chat templates (read from the
llama-cpp-python sdist at test time, never copied here): the format is detected from the
template, an earlier call and its result render through the template in the family's own
shape, and answers written in that format are read the same way however they are split
(every character, every two-part cut, token-like pieces). Outputs follow llama.cpp's own
tests (tests/test-chat.cpp) and its server tests."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from app.engine.reasoning import prompt_opens_reasoning
from app.engine.templates import ChatTemplate
from app.server import convert, schemas
from app.server.output import ChatOutput
from app.server.pieces import Piece
from app.server.toolcalls import BY_NAME, detect
from tests.helpers.sdist_templates import template

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
TIME = {"type": "object", "properties": {"tz": {"type": "string"}}}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
FUNCTIONS: list[dict[str, Any]] = [
    {"name": n, "description": n, "parameters": p} for n, p in SCHEMAS.items()
]
TOOLS = [{"type": "function", "function": f} for f in FUNCTIONS]
BOTH = [("get_weather", {"city": "Paris", "days": 2}), ("get_time", {})]
ONE = [("get_weather", {"city": "Paris", "days": 2})]
DS = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"


@dataclass(frozen=True)
class Family:
    templates: tuple[str, ...]
    output: str  # an answer in the family's format (after the generation prompt)
    content: str
    calls: list[tuple[str, dict[str, Any]]]
    rendered: str  # how the earlier call looks in the rendered prompt
    reasoning: str = ""


FAMILIES: dict[str, Family] = {
    "hermes": Family(
        ("Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "Qwen-QwQ-32B", "ibm-granite-granite-4.0",
         "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
         "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"),
        '<think>\nThey want the weather.\n</think>\n\nLet me check.\n<tool_call>\n{"name": '
        '"get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n<tool_call>\n'
        '{"name": "get_time", "arguments": {}}\n</tool_call>',
        "Let me check.\n", BOTH, '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "They want the weather.\n",
    ),
    "qwen3_coder": Family(
        ("Qwen3-Coder", "Qwen3.5-4B", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
        "Let me call it.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        "Let me call it.\n", BOTH, "<function=get_weather>\n<parameter=city>\nParis\n</parameter>",
    ),
    "harmony": Family(
        ("openai-gpt-oss-120b",),
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", '
        '"days": 2}',
        "", ONE, 'to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}',
        "Need the weather.",
    ),
    "llama3": Family(
        ("meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
         "meta-llama-Llama-3.3-70B-Instruct"),
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris", "days": 2}}',
        "", ONE, '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    ),
    "mistral_nemo": Family(
        ("mistralai-Mistral-Nemo-Instruct-2407",),
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}, "id": '
        '"a1B2c3D4e"}, {"name": "get_time", "arguments": {}, "id": "f5G6h7J8k"}]',
        "", BOTH, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "',
    ),
    "mistral": Family(
        ("unsloth-mistral-Devstral-Small-2507", "Mistral-Small-3.2-24B-Instruct-2506",
         "mistralai-Ministral-3-14B-Reasoning-2512"),
        'Sure.[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris", "days": 2}'
        "[TOOL_CALLS]get_time[ARGS]{}",
        "Sure.", BOTH, "[TOOL_CALLS]get_weather[",
    ),
    "deepseek_v31": Family(
        ("deepseek-ai-DeepSeek-V3.1",),
        f'Checking.{DS}get_weather<｜tool▁sep｜>{{"city": "Paris", "days": 2}}<｜tool▁call▁end｜>'
        "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "Checking.", BOTH, '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}',
    ),
    "deepseek_r1": Family(
        ("llama-cpp-deepseek-r1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
         "deepseek-ai-DeepSeek-R1-Distill-Llama-8B"),
        f'<think>Need it.</think>\n\n{DS}function<｜tool▁sep｜>get_weather\n```json\n{{"city": '
        '"Paris", "days": 2}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>'
        "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "", BOTH, 'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}', "Need it.",
    ),
    "glm": Family(
        ("GLM-4.6",),
        "<think>Need it.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>"
        "Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>\n"
        "<tool_call>get_time\n</tool_call>",
        "", BOTH, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>",
        "Need it.",
    ),
    "kimi_k2": Family(
        ("moonshotai-Kimi-K2", "Kimi-K2-Instruct", "Kimi-K2-Thinking"),
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_"
        'argument_begin|>{"city": "Paris", "days": 2}<|tool_call_end|><|tool_call_begin|>'
        "functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_calls_section_end|>",
        "", BOTH, 'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}',
    ),
    "granite3": Family(
        ("ibm-granite-granite-3.3-2B-Instruct",),
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}, '
        '{"name": "get_time", "arguments": {}}]',
        "", BOTH, '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    ),
    "firefunction": Family(
        ("fireworks-ai-llama-3-firefunction-v2",),
        'Checking. functools[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}, '
        '{"name": "get_time", "arguments": {}}]',
        "Checking. ", BOTH, 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    ),
    "functionary_v31": Family(
        ("meetkai-functionary-medium-v3.1",),
        '<function=get_weather>{"city": "Paris", "days": 2}</function>\n'
        "<function=get_time>{}</function>",
        "", BOTH, '<function=get_weather>{"city": "Paris"}</function>',
    ),
    "functionary_v32": Family(
        ("meetkai-functionary-medium-v3.2",),
        'all\nLet me check.>>>get_weather\n{"city": "Paris", "days": 2}>>>get_time\n{}',
        "Let me check.", BOTH, '>>>get_weather\n{"city": "Paris"}',
    ),
    "command_r7b": Family(
        ("CohereForAI-c4ai-command-r7b-12-2024-tool_use",),
        "<|START_THINKING|>Need it.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": "
        '"0", "tool_name": "get_weather", "parameters": {"city": "Paris", "days": 2}},\n    '
        '{"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}\n]<|END_ACTION|>',
        "", BOTH, '"tool_name": "get_weather", "parameters": {"city": "Paris"}', "Need it.",
    ),
}  # fmt: skip

CASES = [(name, t) for name, family in FAMILIES.items() for t in family.templates]
# Templates Ember cannot render with tools: the sandbox refuses Kimi's list.append
# (templates may not mutate objects); FireFunction's reads a `functions` variable that
# llama.cpp passes and Ember does not.
NOT_RENDERED = {
    "fireworks-ai-llama-3-firefunction-v2": "the template reads `functions`",
}


def splits(text: str) -> list[list[str]]:
    """Whole, one character at a time, cut in two everywhere, and in token-like pieces."""
    out = [[text], list(text)]
    out += [[text[:i], text[i:]] for i in range(1, len(text))]
    out.append(re.findall(r"\w+|\s+|<[^<>]{0,12}>?|[^\w\s]", text))
    return out


def read(output: ChatOutput, parts: list[str]) -> list[tuple[str, int, str, str | None]]:
    """The pieces, runs of one kind (and call) joined, ids left out."""
    pieces: list[Piece] = []
    for part in parts:
        pieces += output.feed(part)
    pieces += output.finish()
    out: list[tuple[str, int, str, str | None]] = []
    for p in pieces:
        if p.kind == "tool" and p.name is not None:
            assert p.id, "the first piece of a call has its id"
            out.append(("tool", p.index, "", p.name))
        elif out and out[-1][0] == p.kind and (p.kind != "tool" or out[-1][1] == p.index):
            kind, index, text, name = out[-1]
            out[-1] = (kind, index, text + p.text, name)
        else:
            out.append((p.kind, p.index, p.text, None))
    return out


def reader_for(name: str, template_name: str) -> ChatOutput:
    source = template(template_name)
    return ChatOutput(
        tool_mode="auto",
        tool_names=frozenset(SCHEMAS),
        reasoning_open=prompt_opens_reasoning(source),
        tool_format=BY_NAME[name],
        tools=SCHEMAS,
    )


def answer_for(name: str, template_name: str) -> tuple[str, str]:
    """The family's answer and its reasoning; after a prompt that opens the thinking, the
    answer starts inside it."""
    family = FAMILIES[name]
    if not prompt_opens_reasoning(template(template_name)):
        return family.output, family.reasoning
    if family.output.startswith("<think>"):
        return family.output.removeprefix("<think>"), family.reasoning
    return "Thinking.</think>" + family.output, "Thinking."


@pytest.mark.parametrize(("name", "template_name"), CASES)
def test_the_format_is_detected_from_the_real_template(name: str, template_name: str) -> None:
    assert detect(template(template_name)).name == name
    assert convert.tool_format(template(template_name)).name == name


@pytest.mark.parametrize(("name", "template_name"), CASES)
def test_a_call_and_its_result_render_in_the_familys_shape(name: str, template_name: str) -> None:
    if template_name in NOT_RENDERED:
        pytest.skip(NOT_RENDERED[template_name])
    source = template(template_name)
    fmt = detect(source)
    arguments = json.dumps({"city": "Paris"})
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc123", "content": "Sunny, 21 C"},
    ]
    shaped = convert._chat_messages(
        [schemas.Message.model_validate(m) for m in messages], source, fmt
    )
    text = ChatTemplate(source, "<s>", "</s>").render(shaped, tools=TOOLS).text
    after = text[text.index("Weather in Paris?") :]
    assert FAMILIES[name].rendered in after
    assert "Sunny, 21 C" in after[after.index(FAMILIES[name].rendered) :]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_answers_read_alike_however_they_are_split(name: str) -> None:
    family = FAMILIES[name]
    for template_name in family.templates:
        text, thought = answer_for(name, template_name)
        expected = read(reader_for(name, template_name), [text])
        for parts in splits(text):
            assert read(reader_for(name, template_name), parts) == expected, parts
        content = "".join(t for k, _, t, _ in expected if k == "content")
        reasoning = "".join(t for k, _, t, _ in expected if k == "reasoning")
        calls = [(n, json.loads(t)) for k, _, t, n in expected if k == "tool"]
        assert (content, reasoning.strip()) == (family.content, thought.strip())
        assert calls == family.calls


@pytest.mark.parametrize("name", list(FAMILIES))
def test_an_unknown_tool_in_the_format_stays_content(name: str) -> None:
    family = FAMILIES[name]
    text = answer_for(name, family.templates[0])[0].replace("get_weather", "rm_rf_slash")
    pieces = read(reader_for(name, family.templates[0]), list(text))
    names = [n for k, _, _, n in pieces if k == "tool" and n is not None]
    assert "rm_rf_slash" not in names
    assert "rm_rf_slash" in "".join(t for k, _, t, _ in pieces if k == "content")


def test_gpt_oss_channels_are_read_without_tools_too() -> None:
    """Harmony carries reasoning in its channels whether or not tools are offered; a call
    without tools is text."""
    text = (
        "<|channel|>analysis<|message|>Easy one.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Paris is sunny."
    )
    for parts in ([text], list(text)):
        pieces = read(ChatOutput(tool_format=BY_NAME["harmony"]), parts)
        assert pieces == [
            ("reasoning", 0, "Easy one.", None),
            ("content", 0, "Paris is sunny.", None),
        ]
    call = FAMILIES["harmony"].output
    pieces = read(ChatOutput(tool_format=BY_NAME["harmony"]), [call])
    assert all(kind != "tool" for kind, *_ in pieces)
