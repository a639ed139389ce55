"""Every model family's tool calls, on llama.cpp's real chat templates (read from the
llama-cpp-python sdist at test time, never copied here): the format is detected from the
template, an earlier call and its result render through the template in the family's own
shape, and answers written in that format are read the same way however they are split
(every character, every two-part cut, token-like pieces). Outputs follow llama.cpp's own
tests (tests/test-chat.cpp) and its server tests."""

from __future__ import annotations

import json
import re

import pytest

from app.engine.reasoning import prompt_opens_reasoning
from app.engine.templates import ChatTemplate
from app.server import convert, schemas
from app.server.output import ChatOutput
from app.server.toolcalls import BY_NAME, detect
from tests.helpers.sdist_templates import template
from tests.helpers.toolcall_families import (
    FAMILIES,
    SCHEMAS,
    TOOLS,
    read,
)

CASES = [(name, t) for name, family in FAMILIES.items() for t in family.templates]


def splits(text: str) -> list[list[str]]:
    """Whole, one character at a time, cut in two everywhere, and in token-like pieces."""
    out = [[text], list(text)]
    out += [[text[:i], text[i:]] for i in range(1, len(text))]
    out.append(re.findall(r"\w+|\s+|<[^<>]{0,12}>?|[^\w\s]", text))
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
