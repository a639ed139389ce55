"""Ollama's NDJSON streams on real uvicorn, driven by the scripted model (test_fuzz.py's): a
client that goes away cancels its job, a job cancelled mid-answer ends with an ``{"error"}``
line, and a call the model writes reaches the `ollama` client with its arguments as an
object, streamed or not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import ollama
import pytest

from app.engine.types import LoadParams
from app.server.gateway import Gateway
from tests.helpers.scripted_server import serve
from tests.helpers.waiting import wait_until

CALL = '<tool_call>{"name": "weather", "arguments": {"city": "Oslo", "days": 2}}</tool_call>'
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


@pytest.fixture(scope="module")
def slow() -> Iterator[tuple[str, Gateway]]:
    yield from serve(params=LoadParams(n_ctx=4096), tokens_per_second=20)


@pytest.fixture(scope="module")
def caller() -> Iterator[tuple[str, Gateway]]:
    yield from serve(params=LoadParams(n_ctx=4096), pieces=(CALL,), eog_after=1)


LONG = {"model": "scripted", "prompt": "go", "raw": True, "options": {"num_predict": 5000}}


def test_a_client_that_goes_away_cancels_its_job(slow: tuple[str, Gateway]) -> None:
    root, gateway = slow
    with httpx.Client(base_url=root, timeout=30) as http:
        with http.stream("POST", "/api/generate", json=LONG) as answer:
            lines = answer.iter_lines()
            assert json.loads(next(lines))["response"] == "word "
            assert gateway.active_jobs == 1
        wait_until(lambda: gateway.active_jobs == 0)


def test_a_job_cancelled_mid_answer_ends_with_an_error_line(slow: tuple[str, Gateway]) -> None:
    root, gateway = slow
    with (
        httpx.Client(base_url=root, timeout=30) as http,
        http.stream("POST", "/api/generate", json=LONG) as answer,
    ):
        lines = answer.iter_lines()
        assert json.loads(next(lines))["done"] is False
        gateway.cancel_all()  # what stopping the server does
        rest = [json.loads(line) for line in lines if line]
    assert "done_reason" not in rest[-1]
    assert set(rest[-1]) == {"error"} and "cancelled" in rest[-1]["error"]


def test_tool_calls_reach_the_client_with_object_arguments(
    caller: tuple[str, Gateway],
) -> None:
    root, _gateway = caller
    messages = [{"role": "user", "content": "Weather in Oslo?"}]
    with ollama.Client(host=root) as client:
        whole = client.chat(model="scripted", messages=messages, tools=TOOLS)
        parts = list(client.chat(model="scripted", messages=messages, tools=TOOLS, stream=True))
    for message in [whole.message, *(p.message for p in parts if p.message.tool_calls)]:
        (call,) = message.tool_calls or []
        assert call.function.name == "weather"
        assert call.function.arguments == {"city": "Oslo", "days": 2}
        assert not message.content  # the call is not also text
    assert whole.done_reason == "stop" and parts[-1].done


def test_null_fields_are_read_as_ollama_reads_them(slow: tuple[str, Gateway]) -> None:
    """Ollama (Go) reads a null string as empty, and a seed as any int64: clients that send
    those are answered."""
    root, _gateway = slow
    body = {
        "model": "scripted",
        "messages": [{"role": "system", "content": None}, {"role": "user", "content": "Hi"}],
        "options": {"num_predict": 2, "stop": None, "temperature": None, "seed": 2**40},
        "format": None,
        "keep_alive": None,
        "stream": False,
    }
    answer = httpx.post(f"{root}/api/chat", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"]["content"] == "word word "
