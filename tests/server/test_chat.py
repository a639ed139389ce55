"""POST /v1/chat/completions through the real `openai` SDK, against the real model."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from app.engine.types import TokenizeRequest
from tests.helpers.served import MODEL_ID, WEATHER, Served

USER = [{"role": "user", "content": "Tell me a story about a fox."}]


def chat(client: openai.OpenAI, **kwargs: Any) -> Any:
    params: dict[str, Any] = {"model": MODEL_ID, "messages": USER, "temperature": 0, **kwargs}
    return client.chat.completions.create(**params)


def test_non_streaming_answer_has_openai_shape(client: openai.OpenAI) -> None:
    r = chat(client, max_tokens=6)
    assert r.id.startswith("chatcmpl-") and len(r.id) > 20
    assert r.object == "chat.completion"
    assert r.model == MODEL_ID
    assert r.system_fingerprint and r.system_fingerprint.startswith("fp_")
    assert r.created > 1_600_000_000
    (choice,) = r.choices
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content
    assert not choice.message.content[0].isspace()
    assert choice.finish_reason in ("stop", "length")
    assert r.usage is not None
    assert r.usage.completion_tokens <= 6
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_max_tokens_and_max_completion_tokens(client: openai.OpenAI) -> None:
    story = [{"role": "user", "content": "Count from one to fifty in words."}]
    a = chat(client, messages=story, max_tokens=5)
    b = chat(client, messages=story, max_completion_tokens=7)
    c = chat(client, messages=story, max_tokens=50, max_completion_tokens=3)
    assert (a.choices[0].finish_reason, a.usage.completion_tokens) == ("length", 5)
    assert (b.choices[0].finish_reason, b.usage.completion_tokens) == ("length", 7)
    assert c.usage.completion_tokens == 3  # max_completion_tokens wins, as in OpenAI


def test_stream_with_include_usage(client: openai.OpenAI) -> None:
    chunks = list(chat(client, max_tokens=6, stream=True, stream_options={"include_usage": True}))
    ids = {c.id for c in chunks}
    assert len(ids) == 1 and next(iter(ids)).startswith("chatcmpl-")
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert all(c.model == MODEL_ID and c.system_fingerprint for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    *with_choices, last = chunks
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == 6
    assert all(c.usage is None for c in with_choices)
    finals = [c for c in with_choices if c.choices[0].finish_reason is not None]
    assert len(finals) == 1 and finals[0] is with_choices[-1]
    assert finals[0].choices[0].finish_reason == "length"
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    plain = chat(client, max_tokens=6).choices[0].message.content
    assert text == plain


def test_stream_without_include_usage_has_no_usage_chunk(http: httpx.Client) -> None:
    body = {"model": MODEL_ID, "messages": USER, "max_tokens": 3, "stream": True}
    with http.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert all("usage" not in c and len(c["choices"]) == 1 for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert chunks[-1]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_stop_strings_end_the_answer_and_never_appear(client: openai.OpenAI) -> None:
    free = chat(client, max_tokens=12).choices[0].message.content
    words = free.split()
    assert len(words) >= 3
    stop_word = words[2]
    one = chat(client, max_tokens=12, stop=stop_word)
    assert one.choices[0].finish_reason == "stop"
    assert stop_word not in one.choices[0].message.content
    many = chat(client, max_tokens=12, stop=["zzzz", stop_word], stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in many if c.choices)
    assert stop_word not in streamed
    assert streamed == one.choices[0].message.content


def test_seed_and_temperature_zero_are_deterministic(client: openai.OpenAI) -> None:
    def from_same_state(**kwargs: Any) -> str:
        # the same KV-cache state each time: llama.cpp's numerics depend on prompt batching
        chat(client, messages=[{"role": "user", "content": "Unrelated."}], max_tokens=1)
        return str(chat(client, max_tokens=6, **kwargs).choices[0].message.content)

    assert from_same_state() == from_same_state()
    seeded = from_same_state(temperature=1.5, seed=42)
    assert seeded == from_same_state(temperature=1.5, seed=42)
    others = {from_same_state(temperature=1.5, seed=s) for s in (1, 2)}
    assert len(others | {seeded}) > 1


def test_penalties_logit_bias_and_llama_samplers(client: openai.OpenAI, served: Served) -> None:
    (banana,) = served.worker.run(TokenizeRequest(" banana", MODEL_ID, add_special=False))
    r = chat(
        client,
        max_tokens=3,
        temperature=0.7,
        top_p=0.9,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        logit_bias={str(banana): 100},
        seed=3,
        extra_body={"top_k": 20, "min_p": 0.1, "repeat_penalty": 1.1, "mirostat": 0},
    )
    assert r.choices[0].message.content == "banana banana banana"  # leading space trimmed
    m = chat(client, max_tokens=4, extra_body={"mirostat": 2, "mirostat_tau": 4.0})
    assert m.usage.completion_tokens <= 4


def test_json_object_response_format(client: openai.OpenAI) -> None:
    r = chat(
        client,
        messages=[{"role": "user", "content": "Describe a cat as JSON."}],
        response_format={"type": "json_object"},
        max_tokens=16,
    )
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:  # cut off by max_tokens: still a JSON object so far
        assert r.choices[0].message.content.lstrip().startswith("{")


def test_json_schema_response_format_validates(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {
            "age": {"type": "integer"},  # llama-cpp-python ignores minimum/maximum
            "pet": {"type": "string", "enum": ["cat", "dog", "fox"]},
        },
        "required": ["age", "pet"],
        "additionalProperties": False,
    }
    r = chat(
        client,
        messages=[{"role": "user", "content": "Make up a person."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": schema, "strict": True},
        },
        max_tokens=40,
    )
    assert r.choices[0].finish_reason == "stop"
    data = json.loads(r.choices[0].message.content)
    assert set(data) == {"age", "pet"}
    assert isinstance(data["age"], int)
    assert data["pet"] in ("cat", "dog", "fox")


TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time in a timezone",
        "parameters": {
            "type": "object",
            "properties": {"tz": {"type": "string", "enum": ["UTC", "CET"]}},
            "required": ["tz"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_weather_arguments(arguments: str) -> None:
    assert json.loads(arguments) in ({"city": "Paris"}, {"city": "Oslo"}, {"city": "Lima"})


def test_named_tool_choice_returns_a_valid_call(client: openai.OpenAI) -> None:
    r = chat(
        client,
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=60,
    )
    (choice,) = r.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    check_weather_arguments(call.function.arguments)


def test_required_tool_choice_streams_tool_call_deltas(client: openai.OpenAI) -> None:
    chunks = list(
        chat(
            client,
            messages=ASK,
            tools=[WEATHER, TIME],
            tool_choice="required",
            max_tokens=60,
            stream=True,
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [tc for d in deltas for tc in d.tool_calls or []]
    assert len(calls) >= 2
    first, *rest = calls
    assert first.index == 0
    assert first.id and first.id.startswith("call_")
    assert first.type == "function"
    assert first.function is not None and first.function.name in ("get_weather", "get_time")
    assert first.function.arguments == ""
    for later in rest:
        assert later.index == 0
        assert later.id is None and later.type is None
        assert later.function is not None and later.function.name is None
        assert later.function.arguments
    assert all(not d.content for d in deltas)
    arguments = "".join(c.function.arguments or "" for c in calls if c.function)
    args = json.loads(arguments)
    if first.function.name == "get_weather":
        check_weather_arguments(arguments)
    else:
        assert args["tz"] in ("UTC", "CET")
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tool_result_round_trip_and_tool_choice_none(client: openai.OpenAI) -> None:
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Paris"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees and sunny"},
    ]
    r = chat(client, messages=history, tools=[WEATHER], tool_choice="none", max_tokens=8)
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason in ("stop", "length")
    auto = chat(client, messages=history, tools=[WEATHER], max_tokens=8)
    assert auto.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_reasoning_content_is_split_from_the_answer(client: openai.OpenAI) -> None:
    # The test model does not think; a grammar makes it write think tags like a model that does.
    grammar = 'root ::= "<think>" "Hm." "</think>" "\\n" "Hi!"'
    r = chat(client, max_tokens=40, extra_body={"grammar": grammar})
    message = r.choices[0].message
    assert message.content == "Hi!"
    assert message.model_extra is not None
    assert message.model_extra["reasoning_content"] == "Hm."
    chunks = list(chat(client, max_tokens=40, stream=True, extra_body={"grammar": grammar}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    content = "".join(d.content or "" for d in deltas)
    assert (reasoning, content) == ("Hm.", "Hi!")


def test_n_greater_than_one_is_rejected(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, n=2, max_tokens=2)
    assert e.value.status_code == 400
    assert e.value.body["param"] == "n"  # type: ignore[index]


def test_a_prediction_speeds_the_answer_and_usage_says_how_much_of_it_was_taken(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    code = "\n".join(f"def area_{i}(w, h):\n    return w * h + {i}\n" for i in range(6))
    ask = [{"role": "user", "content": "Repeat this code exactly, with no comment:\n" + code}]
    plain = chat(client, messages=ask, max_tokens=48)
    expected = plain.choices[0].message.content
    r = chat(client, messages=ask, max_tokens=48,
             prediction={"type": "content", "content": expected})  # fmt: skip
    assert r.choices[0].message.content[:8] == expected[:8]
    details = r.usage.completion_tokens_details
    assert details.accepted_prediction_tokens > 0
    assert details.rejected_prediction_tokens >= 0
    assert details.accepted_prediction_tokens >= r.usage.completion_tokens // 2
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0
    parts = {"type": "content", "content": [{"type": "text", "text": expected}]}
    streamed = list(chat(client, messages=ask, max_tokens=48, prediction=parts, stream=True,
                         stream_options={"include_usage": True}))  # fmt: skip
    assert streamed[-1].usage.completion_tokens_details.accepted_prediction_tokens > 0
    bad = http.post("/v1/chat/completions", json={
        "model": MODEL_ID, "messages": ask, "prediction": {"type": "file", "content": "x"},
    })  # fmt: skip
    assert bad.status_code == 400 and "prediction" in bad.text
    too_long = {"type": "content", "content": "x" * 600_000}  # more than the context holds
    huge = http.post("/v1/chat/completions", json={
        "model": MODEL_ID, "messages": ask, "prediction": too_long,
    })  # fmt: skip
    assert huge.status_code == 400 and huge.json()["error"]["param"] == "prediction"
