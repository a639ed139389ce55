"""Anthropic's Messages API on real uvicorn, driven by the scripted model (deterministic
output): the exact event sequence with thinking, text and tool_use blocks, each stop_reason,
pings while a stream waits in the queue, overloaded_error with a full queue, and an error event
when a stream is cut off. Through the `anthropic` SDK and raw SSE."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from app.server import jobs
from app.server.gateway import Gateway
from tests.helpers.scripted_server import ANTHROPIC_TOOLS, HI, serve
from tests.helpers.waiting import wait_until

CALL = '<tool_call>{"name": "weather", "arguments": {"city": "Oslo", "days": 2}}</tool_call>'


@pytest.fixture(scope="module")
def thinker() -> Iterator[tuple[str, Gateway]]:
    yield from serve(pieces=("<think>", "Let me see.", "</think>", "Hello", " there"), eog_after=5)


@pytest.fixture(scope="module")
def caller() -> Iterator[tuple[str, Gateway]]:
    yield from serve(pieces=("Checking. ", CALL), eog_after=2)


@pytest.fixture(scope="module")
def counter() -> Iterator[tuple[str, Gateway]]:
    yield from serve(pieces=("one ", "two ", "END", "three"), eog_after=4)


@pytest.fixture(scope="module")
def slow() -> Iterator[tuple[str, Gateway]]:
    yield from serve(max_waiting=1, tokens_per_second=20)


def sdk(root: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=root, api_key="unused", max_retries=0)


def events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) of each SSE event, checking that the two agree."""
    name = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = json.loads(line.removeprefix("data: "))
            assert data["type"] == name
            yield name, data


def raw_stream(root: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    with (
        httpx.Client(base_url=root, timeout=30) as http,
        http.stream("POST", "/v1/messages", json={**body, "stream": True}) as r,
    ):
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return list(events(r))


def test_a_stream_is_anthropics_exact_event_sequence(thinker: tuple[str, Gateway]) -> None:
    root, _ = thinker
    got = raw_stream(root, {"model": "scripted", "max_tokens": 50, "messages": HI})
    names = [name for name, _ in got]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = got[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["model"] == "scripted"
    assert start["id"].startswith("msg_") and start["stop_reason"] is None
    assert got[2][1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    }
    assert got[3][1]["delta"] == {"type": "thinking_delta", "thinking": "Let me see."}
    assert got[4][1] == {"type": "content_block_stop", "index": 0}
    assert got[5][1]["content_block"] == {"type": "text", "text": ""}
    assert [d["delta"]["text"] for _, d in got[6:8]] == ["Hello", " there"]
    assert all(d["index"] == 1 for _, d in got[5:9])
    final = got[9][1]
    assert final["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert final["usage"]["output_tokens"] == 5 and final["usage"]["input_tokens"] > 0


def test_the_sdk_reads_thinking_and_text_streamed_or_whole(thinker: tuple[str, Gateway]) -> None:
    root, _ = thinker
    kwargs: Any = {"model": "scripted", "max_tokens": 50, "messages": HI}
    thinking: Any = {"type": "enabled", "budget_tokens": 2048}
    with sdk(root) as client:
        with client.messages.stream(**kwargs, thinking=thinking) as stream:
            text = "".join(stream.text_stream)
            streamed = stream.get_final_message()
        whole = client.messages.create(**kwargs)
    assert text == "Hello there"
    message: Any
    for message in (streamed, whole):
        assert [b.type for b in message.content] == ["thinking", "text"]
        thought, answer = message.content
        assert thought.type == "thinking" and thought.thinking == "Let me see."
        assert answer.type == "text" and answer.text == "Hello there"
        assert message.stop_reason == "end_turn" and message.usage.output_tokens == 5


def test_a_call_is_a_tool_use_block_streamed_as_input_json(caller: tuple[str, Gateway]) -> None:
    root, _ = caller
    body: Any = {"model": "scripted", "max_tokens": 50, "messages": HI, "tools": ANTHROPIC_TOOLS}
    got = raw_stream(root, body)
    starts = [d["content_block"] for n, d in got if n == "content_block_start"]
    assert starts[0] == {"type": "text", "text": ""}
    call = starts[1]
    assert call["type"] == "tool_use" and call["name"] == "weather" and call["input"] == {}
    assert call["id"].startswith("toolu_")
    partial = "".join(
        d["delta"]["partial_json"]
        for n, d in got
        if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == {"city": "Oslo", "days": 2}
    assert got[-2][1]["delta"]["stop_reason"] == "tool_use"
    with sdk(root) as client:
        with client.messages.stream(**body) as stream:
            streamed = stream.get_final_message()
        whole = client.messages.create(**body)
    message: Any
    for message in (streamed, whole):
        text, use = message.content
        assert text.type == "text" and text.text.strip() == "Checking."
        assert use.type == "tool_use" and use.name == "weather"
        assert use.input == {"city": "Oslo", "days": 2}
        assert message.stop_reason == "tool_use"


def test_stop_sequence_and_max_tokens_are_the_stop_reasons(counter: tuple[str, Gateway]) -> None:
    root, _ = counter
    with sdk(root) as client:
        stopped = client.messages.create(
            model="scripted", max_tokens=50, messages=HI, stop_sequences=["END"]
        )
        cut = client.messages.create(model="scripted", max_tokens=1, messages=HI)
        ended = client.messages.create(model="scripted", max_tokens=50, messages=HI)
        with client.messages.stream(
            model="scripted", max_tokens=50, messages=HI, stop_sequences=["END"]
        ) as stream:
            streamed = stream.get_final_message()
    message: Any
    for message in (stopped, streamed):
        assert message.stop_reason == "stop_sequence" and message.stop_sequence == "END"
        assert message.content[0].type == "text" and message.content[0].text == "one two "
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 1
    assert ended.stop_reason == "end_turn" and ended.stop_sequence is None


LONG = {"model": "scripted", "max_tokens": 5000, "messages": HI, "stream": True}


def test_a_queued_stream_gets_pings_and_a_full_queue_is_overloaded(
    slow: tuple[str, Gateway], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, gateway = slow
    monkeypatch.setattr(jobs, "QUEUE_DEADLINE", 0.2)  # headers go out while it waits
    monkeypatch.setattr(jobs, "KEEPALIVE_AFTER", 0.2)
    with (
        httpx.Client(base_url=root, timeout=30) as http,
        http.stream("POST", "/v1/messages", json=LONG) as running,
    ):
        assert running.status_code == 200
        first = events(running)
        assert next(name for name, _ in first if name == "content_block_delta")
        with http.stream("POST", "/v1/messages", json=LONG) as queued:
            assert queued.status_code == 200
            waiting = events(queued)
            seen = [next(waiting)[0] for _ in range(4)]
            assert seen == ["message_start", "ping", "ping", "ping"]  # no block while queued
            assert gateway.active_jobs == 2
            full = http.post("/v1/messages", json={**LONG, "stream": False})
            assert full.status_code == 529
            assert int(full.headers["retry-after"]) >= 1
            error = full.json()
            assert error["type"] == "error" and error["error"]["type"] == "overloaded_error"
            assert "waiting" in error["error"]["message"]
            with pytest.raises(anthropic.InternalServerError) as raised:
                sdk(root).messages.create(model="scripted", max_tokens=5, messages=HI)
            assert raised.value.status_code == 529
    wait_until(lambda: gateway.active_jobs == 0)  # closed streams cancel their jobs


def test_a_stream_cut_off_ends_with_an_error_event(slow: tuple[str, Gateway]) -> None:
    root, gateway = slow
    with (
        httpx.Client(base_url=root, timeout=30) as http,
        http.stream("POST", "/v1/messages", json=LONG) as r,
    ):
        got = events(r)
        assert next(name for name, _ in got if name == "content_block_delta")
        threading.Thread(target=gateway.cancel_all).start()  # what stopping the server does
        rest = list(got)
    name, data = rest[-1]
    assert name == "error" and data["error"]["type"] in ("overloaded_error", "api_error")
    assert "cancelled" in data["error"]["message"]
    assert "message_stop" not in [n for n, _ in rest]
