"""Every error is OpenAI-shaped with the right status, and the server keeps serving after it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.engine.types import LoadRequest
from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.scripted_model import ScriptedModel, scripted_factory
from tests.helpers.served import MODEL_ID, N_CTX, serving

CHAT = "/v1/chat/completions"
GOOD = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


def error_of(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in error["message"] and "/app/" not in error["message"]
    return error


def still_serving(http: httpx.Client) -> None:
    r = http.post(CHAT, json=GOOD)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["role"] == "assistant"


BAD_REQUESTS: list[tuple[str, Any, str | None, str | None]] = [
    # (name, body, expected param, expected code)
    ("malformed json", b'{"model": "gemma", "messages": [', None, None),
    ("not an object", b"[1, 2]", None, None),
    ("empty body", b"", None, None),
    ("missing messages", {"model": MODEL_ID}, "messages", "missing_required_parameter"),
    ("empty messages", {"model": MODEL_ID, "messages": []}, "messages", "empty_array"),
    (
        "bad role",
        {"model": MODEL_ID, "messages": [{"role": "robot", "content": "x"}]},
        "messages[0].role",
        "invalid_value",
    ),
    (
        "wrong type",
        {**GOOD, "temperature": "hot"},
        "temperature",
        "invalid_type",
    ),
    ("out of range", {**GOOD, "temperature": 3}, "temperature", "invalid_value"),
    ("max_tokens 0", {**GOOD, "max_tokens": 0}, "max_tokens", "invalid_value"),
    ("n=2", {**GOOD, "n": 2}, "n", None),
    (
        "stream_options without stream",
        {**GOOD, "stream_options": {"include_usage": True}},
        "stream_options",
        None,
    ),
    ("logit_bias key", {**GOOD, "logit_bias": {"abc": 1}}, "logit_bias", "invalid_value"),
    ("logit_bias value", {**GOOD, "logit_bias": {"5": 101}}, "logit_bias", "invalid_value"),
    ("logit_bias id", {**GOOD, "logit_bias": {"262144": 1}}, "logit_bias", "invalid_value"),
    (
        "image content",
        {
            **GOOD,
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}
            ],
        },
        "messages[0].content",
        None,
    ),
    ("tool_choice without tools", {**GOOD, "tool_choice": "required"}, "tool_choice", None),
    (
        "unknown named tool",
        {
            **GOOD,
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "tool_choice": {"type": "function", "function": {"name": "g"}},
        },
        "tool_choice",
        None,
    ),
    (
        "bad schema",
        {
            **GOOD,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "x",
                    "schema": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}},
                },
            },
        },
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [pytest.param(b, p, c, id=name) for name, b, p, c in BAD_REQUESTS],
)
def test_bad_chat_requests_are_400(
    http: httpx.Client, body: Any, param: str | None, code: str | None
) -> None:
    if isinstance(body, bytes):
        r = http.post(CHAT, content=body, headers={"content-type": "application/json"})
    else:
        r = http.post(CHAT, json=body)
    error = error_of(r, 400)
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    still_serving(http)


def test_json_without_content_type_is_accepted(http: httpx.Client) -> None:
    import json

    r = http.post(CHAT, content=json.dumps(GOOD), headers={"content-type": "text/plain"})
    assert r.status_code == 200


def test_unknown_model_is_404(http: httpx.Client) -> None:
    error = error_of(http.post(CHAT, json={**GOOD, "model": "gpt-4o"}), 404)
    assert error["code"] == "model_not_found" and "gpt-4o" in error["message"]
    still_serving(http)


def test_unknown_routes_and_methods(http: httpx.Client) -> None:
    assert error_of(http.get("/v1/chat/completion"), 404)["message"] == (
        "Invalid URL (GET /v1/chat/completion)"
    )
    error_of(http.get(CHAT), 405)
    error_of(http.put("/v1/models"), 405)
    still_serving(http)


def test_prompt_longer_than_the_context_is_400_with_both_numbers(http: httpx.Client) -> None:
    long = {**GOOD, "messages": [{"role": "user", "content": "word " * (N_CTX + 200)}]}
    error = error_of(http.post(CHAT, json=long), 400)
    assert error["code"] == "context_length_exceeded"
    assert str(N_CTX) in error["message"]
    assert any(str(n) in error["message"] for n in range(N_CTX + 100, N_CTX + 400))
    streaming = error_of(http.post(CHAT, json={**long, "stream": True}), 400)
    assert streaming["code"] == "context_length_exceeded"
    still_serving(http)


def test_no_model_loaded_and_none_named_says_what_to_do() -> None:
    worker = EngineWorker()
    with (
        serving(Gateway(worker), ServerConfig(port=0)) as runner,
        httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http,
    ):
        body = {"messages": [{"role": "user", "content": "Hi"}]}
        error = error_of(http.post(CHAT, json=body), 400)
        assert error["code"] == "model_not_loaded"
        assert "GET /v1/models" in error["message"]
        assert http.get("/v1/models").json() == {"object": "list", "data": []}


class _BrokenModel(ScriptedModel):
    """Loads fine, then fails inside generation the way a native error would: the only way to
    provoke an engine crash on purpose (the real model does not crash)."""

    def __init__(self, request: LoadRequest, _progress: object = None) -> None:
        super().__init__(request)

    def decode(self) -> int:
        raise RuntimeError("ggml_abort at /home/build/llama.cpp/ggml.c:1234")


def test_engine_failure_is_500_without_internals_and_the_server_survives() -> None:
    worker = EngineWorker(model_factory=_BrokenModel)
    gateway = Gateway(worker)
    gateway.load("broken.gguf", "broken").wait(10)
    with (
        serving(gateway, ServerConfig(port=0)) as runner,
        httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http,
    ):
        body = {"model": "broken", "messages": [{"role": "user", "content": "Hi"}]}
        for stream in (False, True):
            r = http.post(CHAT, json={**body, "stream": stream})
            error = error_of(r, 500)
            assert error["type"] == "server_error" and error["code"] == "engine_crashed"
            assert "Traceback" not in r.text and "ggml.c" not in r.text
        assert http.get("/health").status_code == 200


def test_json_nested_thousands_deep_naming_a_provider_is_a_400() -> None:
    """A body with ``provider::model`` is read to route it; nesting 1,500 deep used to raise
    RecursionError there and answer 500."""
    worker = EngineWorker(model_factory=scripted_factory())
    with (
        serving(Gateway(worker), ServerConfig(port=0)) as runner,
        httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http,
    ):
        body = '{"model": "p::m", "messages": ' + "[" * 1500 + "]" * 1500 + "}"
        r = http.post(CHAT, content=body, headers={"content-type": "application/json"})
        assert error_of(r, 400)["type"] == "invalid_request_error"
        assert http.get("/health").status_code == 200  # same connection, still served


def test_an_unexpected_500_closes_the_connection() -> None:
    """Starlette drops the connection after an unhandled error; the answer says so, so a
    keep-alive client opens a new one instead of failing with a reset."""
    import asyncio

    from app.server.errors import _on_unexpected

    response = asyncio.run(_on_unexpected(None, RuntimeError("boom")))  # type: ignore[arg-type]
    assert response.status_code == 500 and response.headers["connection"] == "close"
    assert b"boom" not in response.body
