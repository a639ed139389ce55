"""Anthropic's Messages API through the official `anthropic` SDK against real uvicorn and the
real test model: create, stream (the SDK's event helpers, and the raw event order), a forced
tool_use -> tool_result round trip, count_tokens, and an agent loop of three tool rounds
ending in a text answer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from tests.helpers.served import MODEL_ID, Served

WEATHER: Any = {
    "name": "weather",
    "description": "The weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Oslo", "Paris", "Lima"]}},
        "required": ["city"],
    },
}
GREEDY = {"temperature": 0}
NONE: Any = {"type": "none"}
HELLO: Any = [{"role": "user", "content": "Write a short greeting."}]


@pytest.fixture
def claude(served: Served) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=served.root, api_key="unused", max_retries=0) as c:
        yield c


def test_create_answers_a_message(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(
        model=MODEL_ID,
        max_tokens=8,
        system=[{"type": "text", "text": "You are brief."}, {"type": "text", "text": "Be kind."}],
        messages=HELLO,
        stop_sequences=["\n\n\n"],
        metadata={"user_id": "someone"},
        extra_headers={"anthropic-beta": "token-efficient-tools-2025-02-19"},
        # older SDKs' (and clients') sampling fields
        extra_body={"temperature": 0, "top_p": 1, "top_k": 1},
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.model == MODEL_ID and message.id.startswith("msg_")
    assert message.stop_reason in ("end_turn", "max_tokens", "stop_sequence")
    assert [b.type for b in message.content] == ["text"]
    assert message.usage.input_tokens > 0 and 0 < message.usage.output_tokens <= 8
    same = claude.messages.create(model=MODEL_ID, max_tokens=8, messages=HELLO, extra_body=GREEDY)
    assert same.content == message.content or same.stop_reason == "max_tokens"


def test_stream_with_the_sdks_helpers(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(
        model=MODEL_ID, max_tokens=8, system="You are brief.", messages=HELLO, extra_body=GREEDY
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    whole = claude.messages.create(
        model=MODEL_ID, max_tokens=8, system="You are brief.", messages=HELLO, extra_body=GREEDY
    )
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "text" in kinds  # the helper's own event for each text delta
    # greedy: the same answer streamed or not
    assert [(b.type, getattr(b, "text", None)) for b in final.content] == [
        (b.type, getattr(b, "text", None)) for b in whole.content
    ]
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens


EVENT_ORDER = re.compile(
    r"message_start ping (content_block_start (content_block_delta |ping )+content_block_stop )*"
    r"message_delta message_stop"
)


def test_the_raw_stream_is_anthropics_event_order(served: Served) -> None:
    body = {"model": MODEL_ID, "max_tokens": 8, "messages": HELLO, "stream": True}
    names = []
    with (
        httpx.Client(base_url=served.root, timeout=120) as http,
        http.stream("POST", "/v1/messages", json=body) as r,
    ):
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("event: "):
                names.append(line.removeprefix("event: "))
    assert EVENT_ORDER.fullmatch(" ".join(names)), names


def use_of(message: Any) -> Any:
    (use,) = [b for b in message.content if b.type == "tool_use"]
    return use


def test_a_forced_tool_use_and_its_tool_result(claude: anthropic.Anthropic) -> None:
    ask: Any = [{"role": "user", "content": "What is the weather in Oslo?"}]
    called = claude.messages.create(
        model=MODEL_ID,
        max_tokens=40,
        messages=ask,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
    )
    assert called.stop_reason == "tool_use"
    use = use_of(called)
    assert use.name == "weather" and use.id.startswith("toolu_")
    assert use.input["city"] in ("Oslo", "Paris", "Lima")
    for is_error, result in ((False, "Sunny, 21 °C"), (True, "The weather service is down")):
        conversation: Any = [
            *ask,
            {"role": "assistant", "content": [b.model_dump() for b in called.content]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": [{"type": "text", "text": result}],
                        "is_error": is_error,
                    },
                    {"type": "text", "text": "Tell me in a sentence."},
                ],
            },
        ]
        answered = claude.messages.create(
            model=MODEL_ID,
            max_tokens=8,
            extra_body=GREEDY,
            messages=conversation,
            tools=[WEATHER],
            tool_choice=NONE,
        )
        assert answered.stop_reason in ("end_turn", "max_tokens")
        assert [b.type for b in answered.content] == ["text"]


def test_count_tokens(claude: anthropic.Anthropic) -> None:
    short = claude.messages.count_tokens(model=MODEL_ID, messages=HELLO)
    longer = claude.messages.count_tokens(
        model=MODEL_ID,
        messages=[{"role": "user", "content": "Write a short greeting. " * 20}],
    )
    with_tools = claude.messages.count_tokens(
        model=MODEL_ID, messages=HELLO, tools=[WEATHER], system="You are brief."
    )
    assert 0 < short.input_tokens < longer.input_tokens
    assert with_tools.input_tokens > short.input_tokens
    answered = claude.messages.create(model=MODEL_ID, max_tokens=1, messages=HELLO)
    assert answered.usage.input_tokens + (answered.usage.cache_read_input_tokens or 0) == (
        short.input_tokens
    )


TOOLS: Any = [
    {
        "name": "list_files",
        "description": "List the files of a folder",
        "input_schema": {
            "type": "object",
            "properties": {"folder": {"type": "string", "enum": ["src", "tests"]}},
            "required": ["folder"],
        },
    },
    {
        "name": "read_file",
        "description": "Read a file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "enum": ["src/main.py", "README.md"]}},
            "required": ["path"],
        },
    },
]
RESULTS = {"list_files": "main.py\nutil.py", "read_file": "print('hello')"}


def test_an_agent_loop_of_three_tool_rounds_ends_in_text(claude: anthropic.Anthropic) -> None:
    """What an agent does: call tools (forced with tool_choice: the base test model cannot
    decide alone), send each result back, and stop when the model answers in text. Each
    round is streamed, so the SDK's stream accumulation builds the tool_use blocks."""
    messages: list[Any] = [{"role": "user", "content": "Look at the project, then sum it up."}]
    for round_ in range(4):
        choice: Any = {"type": "any"} if round_ < 3 else {"type": "auto"}
        with claude.messages.stream(
            model=MODEL_ID,
            max_tokens=40 if round_ < 3 else 12,
            system="You are a coding agent.",
            messages=messages,
            tools=TOOLS,
            tool_choice=choice,
            extra_body=GREEDY,
        ) as stream:
            message = stream.get_final_message()
        messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
        uses = [b for b in message.content if b.type == "tool_use"]
        if message.stop_reason != "tool_use":
            break
        assert len(uses) == 1 and uses[0].name in RESULTS
        results = [
            {"type": "tool_result", "tool_use_id": u.id, "content": RESULTS[u.name]} for u in uses
        ]
        messages.append({"role": "user", "content": results})
    assert round_ == 3, "the three forced rounds each called a tool"
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert [b.type for b in message.content] == ["text"]
    assert json.dumps(messages)  # the whole conversation went back each round as plain JSON
