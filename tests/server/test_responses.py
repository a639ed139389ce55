"""POST /v1/responses (OpenAI's Responses API) through the real `openai` SDK's
``client.responses``, against the real model on real uvicorn: create, stream (the SDK's events
and the raw SSE), a forced call and its output, previous_response_id with the prefix cache,
get / delete / input_items, store=false, and a three-round tool loop ending in text."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

import httpx
import openai
import pytest

from app.config import ember_home
from tests.helpers.served import MODEL_ID, RESPONSES_WEATHER

FORCE_WEATHER = {"type": "function", "name": "get_weather"}


def create(client: openai.OpenAI, **kwargs: Any) -> Any:
    params: dict[str, Any] = {"model": MODEL_ID, "temperature": 0, "max_output_tokens": 8}
    return client.responses.create(**{**params, **kwargs})


def test_create_has_openai_shape(client: openai.OpenAI) -> None:
    r = create(client, input="Tell me a story about a fox.", instructions="Be brief.")
    assert r.id.startswith("resp_") and r.object == "response"
    assert r.model == MODEL_ID and r.instructions == "Be brief."
    assert r.status in ("completed", "incomplete")
    (message,) = r.output
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    (part,) = message.content
    assert part.type == "output_text" and part.text and part.text == r.output_text
    assert r.usage is not None
    assert 0 < r.usage.output_tokens <= 8
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.input_tokens_details.cached_tokens >= 0
    assert r.usage.output_tokens_details.reasoning_tokens == 0
    if r.status == "incomplete":
        assert r.incomplete_details is not None
        assert r.incomplete_details.reason == "max_output_tokens"
        assert message.status == "incomplete"


def test_stream_events_in_order(client: openai.OpenAI) -> None:
    events = list(create(client, input="Tell me a story about a fox.", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.incomplete",  # max_output_tokens cut it
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = events[-4]
    assert done.text == text and events[-3].part.text == text
    final = events[-1].response
    assert final.output_text == text and final.usage.output_tokens == 8
    ids = {getattr(e, "item_id", None) for e in events[3:-2]}
    assert ids == {final.output[0].id}


def test_stream_raw_sse_names_each_event(http: httpx.Client) -> None:
    body = {"model": MODEL_ID, "input": "Hi", "stream": True, "max_output_tokens": 3}
    with http.stream("POST", "/v1/responses", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    frames = [f for f in raw.split("\n\n") if f and not f.startswith(":")]
    sequence = []
    for frame in frames:
        event_line, data_line = frame.split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}"
        sequence.append(data["sequence_number"])
    assert sequence == list(range(len(frames)))
    assert "[DONE]" not in raw  # the Responses API ends with its last event


def test_forced_function_call_round_trip(client: openai.OpenAI) -> None:
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = create(
        client,
        input=ask,
        tools=[RESPONSES_WEATHER],
        tool_choice=FORCE_WEATHER,
        max_output_tokens=60,
    )
    assert r.status == "completed"
    (call,) = r.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.id.startswith("fc_") and call.call_id.startswith("call_")
    assert json.loads(call.arguments)["city"] in ("Paris", "Oslo", "Lima")
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "21 C, sunny"}
    # resent whole, as a stateless client does
    again = create(
        client, input=[*ask, call.model_dump(), result], tools=[RESPONSES_WEATHER], store=False
    )
    assert again.output[0].type == "message" and again.output_text
    # and continued from the stored response
    follow = create(client, previous_response_id=r.id, input=[result], tools=[RESPONSES_WEATHER])
    assert follow.output_text == again.output_text  # the same prompt, greedy
    assert follow.previous_response_id == r.id


def test_streamed_call_events(client: openai.OpenAI) -> None:
    events = list(
        create(
            client,
            input="Weather in Oslo?",
            tools=[RESPONSES_WEATHER],
            tool_choice="required",
            max_output_tokens=60,
            stream=True,
        )
    )
    kinds = [e.type for e in events]
    assert kinds[2] == "response.output_item.added" and events[2].item.type == "function_call"
    assert events[2].item.arguments == "" and events[2].item.name == "get_weather"
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    (done,) = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert "".join(deltas) == done.arguments and json.loads(done.arguments)["city"]
    assert kinds[-2:] == ["response.output_item.done", "response.completed"]
    assert events[-2].item.arguments == done.arguments
    assert "response.content_part.added" not in kinds


def test_previous_response_id_reuses_the_prefix_cache(client: openai.OpenAI) -> None:
    story = "Once upon a time a fox lived by a river. " * 8
    first = create(client, input=story + "What did the fox do?", instructions="Answer shortly.")
    resent = [
        {"role": "user", "content": story + "What did the fox do?"},
        *[item.model_dump() for item in first.output],
        {"role": "user", "content": "And then?"},
    ]
    second = create(
        client, previous_response_id=first.id, input="And then?", instructions="Answer shortly."
    )
    assert second.usage.input_tokens > first.usage.input_tokens
    assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 1
    by_hand = create(client, input=resent, instructions="Answer shortly.", store=False)
    assert by_hand.usage.input_tokens == second.usage.input_tokens  # the very same prompt
    assert by_hand.output_text == second.output_text


def test_get_delete_and_input_items(client: openai.OpenAI) -> None:
    r = create(
        client, input=[{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}]
    )
    got: Any = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.usage == r.usage
    items: Any = client.responses.input_items.list(r.id)
    assert [i.content[0].text for i in items.data] == ["Two", "One"]  # newest first by default
    assert all(i.id.startswith("msg_") for i in items.data)
    ascending: Any = client.responses.input_items.list(r.id, order="asc", limit=1)
    assert [i.content[0].text for i in ascending.data] == ["One"] and ascending.has_more
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.retrieve(r.id)
    assert e.value.code == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as gone:
        create(client, input="More", previous_response_id=r.id)
    assert gone.value.body["param"] == "previous_response_id"  # type: ignore[index]


def test_store_false_is_not_stored_and_the_file_is_private(client: openai.OpenAI) -> None:
    r = create(client, input="Hello", store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    kept = create(client, input="Hello")
    again: Any = client.responses.retrieve(kept.id)
    assert again.store is True
    path = ember_home() / "responses.db"
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0


def test_json_schema_format_constrains_the_output(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {
            "pet": {"type": "string", "enum": ["cat", "dog"]},
            "age": {"type": "integer"},
        },
        "required": ["pet", "age"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "name": "person", "schema": schema, "strict": True}
    r = create(client, input="Make up a pet.", text={"format": fmt}, max_output_tokens=40)
    assert r.status == "completed"
    data = json.loads(r.output_text)
    assert set(data) == {"pet", "age"} and data["pet"] in ("cat", "dog")
    assert r.text is not None and r.text.format.type == "json_schema"
    plain = create(
        client, input="Describe a cat as JSON.", text={"format": {"type": "json_object"}}
    )
    assert plain.output_text.lstrip().startswith("{")


def test_agent_loop_of_three_tool_rounds_ends_in_text(client: openai.OpenAI) -> None:
    """A scripted agent: three forced calls, each answered, then the model's own text; every
    round continues the stored conversation."""
    previous: str | None = None
    turn: list[dict[str, Any]] = [
        {"role": "user", "content": "Compare the weather in three cities."}
    ]
    for round_ in range(3):
        r = create(
            client,
            input=turn,
            previous_response_id=previous,
            tools=[RESPONSES_WEATHER],
            tool_choice=FORCE_WEATHER,
            max_output_tokens=60,
        )
        (call,) = r.output
        assert call.type == "function_call"
        city = json.loads(call.arguments)["city"]
        turn = [
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": f"{city}: {10 + round_} C",
            }
        ]
        previous = r.id
        if round_:
            assert r.usage.input_tokens_details.cached_tokens > 0
    final = create(
        client,
        input=turn,
        previous_response_id=previous,
        tools=[RESPONSES_WEATHER],
        tool_choice="none",
    )
    assert final.output[0].type == "message" and final.output_text
    conversation: Any = client.responses.input_items.list(final.id)
    assert [i.type for i in conversation.data] == ["function_call_output"]
