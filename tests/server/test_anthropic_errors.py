"""Anthropic's error shapes on /v1/messages, exact: 400 invalid_request_error, 401
authentication_error (the key as ``x-api-key`` or Bearer), 404 not_found_error for a Claude
model name (and an alias that maps one to a local model); hostile bodies get a 4xx, never a
500, and the server keeps serving. Real uvicorn, the scripted model, the `anthropic` SDK."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.scripted_server import ANTHROPIC_TOOLS, HI, serve

KEY = "sk-ember-test-key-0123456789"
ALIASES = (("claude-sonnet-4-5", "scripted"), ("claude-haiku-*", "scripted"))


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Gateway]]:
    config = ServerConfig(port=0, api_key=KEY, model_aliases=ALIASES)
    yield from serve(config=config, pieces=("fine ",), eog_after=3)


@pytest.fixture
def http(server: tuple[str, Gateway]) -> Iterator[httpx.Client]:
    root, _ = server
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=root, timeout=30, headers=headers) as c:
        yield c


def error_of(r: httpx.Response, status: int, kind: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == kind
    message: str = body["error"]["message"]
    return message


def ok(http: httpx.Client) -> None:
    r = http.post("/v1/messages", json={"model": "scripted", "max_tokens": 2, "messages": HI})
    assert r.status_code == 200 and r.json()["type"] == "message"


def test_the_key_is_taken_as_x_api_key_or_bearer(server: tuple[str, Gateway]) -> None:
    root, _ = server
    body: Any = {"model": "scripted", "max_tokens": 2, "messages": HI}
    with anthropic.Anthropic(base_url=root, api_key=KEY, max_retries=0) as client:  # x-api-key
        assert client.messages.create(**body).content
    with anthropic.Anthropic(base_url=root, auth_token=KEY, max_retries=0) as client:  # Bearer
        assert client.messages.create(**body).content
    with (
        anthropic.Anthropic(base_url=root, api_key="wrong", max_retries=0) as client,
        pytest.raises(anthropic.AuthenticationError) as raised,
    ):
        client.messages.create(**body)
    assert raised.value.status_code == 401
    with httpx.Client(base_url=root) as bare:
        missing = bare.post("/v1/messages", json=body)
        assert "x-api-key" in error_of(missing, 401, "authentication_error")
        beta = {"x-api-key": KEY, "anthropic-beta": "prompt-caching-2024-07-31,tools-2024-04-04"}
        assert bare.post("/v1/messages", json=body, headers=beta).status_code == 200


def test_a_claude_model_name_is_a_404_saying_how_to_set_the_model(http: httpx.Client) -> None:
    body = {"model": "claude-opus-4-1", "max_tokens": 2, "messages": HI}
    message = error_of(http.post("/v1/messages", json=body), 404, "not_found_error")
    assert "claude-opus-4-1" in message and "not Claude" in message
    assert "GET /v1/models" in message and "ANTHROPIC_MODEL" in message
    assert "--alias claude-opus-4-1=MODEL" in message
    counted = http.post("/v1/messages/count_tokens", json={**body, "max_tokens": None})
    error_of(counted, 404, "not_found_error")


def test_an_alias_names_a_local_model(http: httpx.Client) -> None:
    for name in ("claude-sonnet-4-5", "Claude-Haiku-4-5-20251001"):
        r = http.post("/v1/messages", json={"model": name, "max_tokens": 2, "messages": HI})
        assert r.status_code == 200, r.text
        assert r.json()["model"] == name  # the name the client sent, as Anthropic does
        counted = http.post("/v1/messages/count_tokens", json={"model": name, "messages": HI})
        assert counted.status_code == 200 and counted.json()["input_tokens"] > 0


def test_the_sdk_raises_its_own_errors(server: tuple[str, Gateway]) -> None:
    root, _ = server
    with anthropic.Anthropic(base_url=root, api_key=KEY, max_retries=0) as client:
        with pytest.raises(anthropic.NotFoundError) as missing:
            client.messages.create(model="claude-sonnet-4-6", max_tokens=2, messages=HI)
        with pytest.raises(anthropic.BadRequestError) as bad:
            client.messages.create(model="scripted", max_tokens=0, messages=HI)
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


INVALID: list[tuple[Any, str]] = [
    ({"model": "scripted", "messages": HI}, "max_tokens"),  # required, as Anthropic requires it
    ({"model": "scripted", "max_tokens": 5, "messages": []}, "messages"),
    ({"model": "scripted", "max_tokens": "many", "messages": HI}, "max_tokens"),
    ({"model": "scripted", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, ""),
    ({"model": "scripted", "max_tokens": 5, "messages": HI, "temperature": 1.5}, "temperature"),
    ({"model": "scripted", "max_tokens": 5, "messages": HI, "tool_choice": {"type": "any"}}, ""),
    ({"max_tokens": 5, "messages": HI}, "model"),
    (
        {"model": "scripted", "max_tokens": 5, "messages": [{"role": "user", "content": 5}]},
        "content",
    ),
    (
        {
            "model": "scripted",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}],
        },
        "document",
    ),
    (
        {
            "model": "scripted",
            "max_tokens": 5,
            "messages": HI,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        },
        "web_search_20250305",
    ),
    (
        {
            "model": "scripted",
            "max_tokens": 5,
            "messages": HI,
            "tools": ANTHROPIC_TOOLS,
            "tool_choice": {"type": "tool", "name": "nope"},
        },
        "nope",
    ),
    ({"model": "scripted", "max_tokens": 5, "messages": HI, "stop_sequences": ["x"] * 17}, "16"),
    ({"model": "scripted", "max_tokens": 5, "messages": HI, "thinking": {"type": "on"}}, ""),
    ([1, 2, 3], ""),
    ("not json", ""),
]


@pytest.mark.parametrize(("body", "named"), INVALID)
def test_invalid_bodies_are_invalid_request_errors(
    http: httpx.Client, body: Any, named: str
) -> None:
    kwargs: dict[str, Any] = {"content": body} if isinstance(body, str) else {"json": body}
    message = error_of(http.post("/v1/messages", **kwargs), 400, "invalid_request_error")
    assert named in message


def nested(depth: int) -> Any:
    value: Any = {"type": "string"}
    for _ in range(depth):
        value = {"type": "object", "properties": {"a": value}}
    return value


def hostile() -> list[Any]:
    data = base64.b64encode(b"x" * 99).decode()
    image = {"type": "base64", "media_type": "image/png", "data": data}
    url = {"type": "url", "url": "http://127.0.0.1:9/cat.png"}  # image URLs are off
    return [
        {"messages": [{"role": "user", "content": "x" * 2_000_000}]},  # past the context
        {"messages": [{"role": "user", "content": "hi"}] * 5000},
        {"messages": HI, "tools": [{**ANTHROPIC_TOOLS[0], "input_schema": nested(150)}]},
        {
            "messages": HI,
            "tools": [{**ANTHROPIC_TOOLS[0], "input_schema": nested(60)}],
            "tool_choice": {"type": "any"},
        },
        {"messages": HI, "system": [{"type": "text", "text": None}]},
        {"messages": HI, "system": {"type": "text"}},
        {"messages": [{"role": "user", "content": [{"type": "image", "source": image}]}]},
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "x"}}]}]},
        {"messages": [{"role": "user", "content": [{"type": "image", "source": url}]}]},
        {"messages": [{"role": "assistant", "content": [{"type": "tool_result"}]}]},
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}],
                }
            ]
        },
        {"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "1", "name": "n"}]}]},
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "1", "name": "n", "input": {}}],
                }
            ]
        },
        {"messages": HI, "thinking": {"type": "enabled", "budget_tokens": -5}},
    ]


# fields count_tokens does not take (it ignores them, as Anthropic's does)
GENERATING = [
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}] * 50_000}]},
    {"messages": HI, "stop_sequences": ["x" * 5000]},
    {"messages": HI, "top_k": -1},
    {"messages": HI, "max_tokens": 10**30},
    {"messages": HI, "metadata": {"user_id": {"a": 1}}},
]


@pytest.mark.parametrize("extra", hostile())
def test_hostile_bodies_are_4xx_never_500(http: httpx.Client, extra: dict[str, Any]) -> None:
    body = {"model": "scripted", "max_tokens": 5, **extra}
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        r = http.post(path, json=body)
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:300])
        assert r.json()["type"] == "error"
    ok(http)


@pytest.mark.parametrize("extra", GENERATING)
def test_hostile_generating_bodies_are_4xx(http: httpx.Client, extra: dict[str, Any]) -> None:
    r = http.post("/v1/messages", json={"model": "scripted", "max_tokens": 5, **extra})
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.json()["type"] == "error"
    ok(http)


def test_json_nested_thousands_deep_is_a_400(http: httpx.Client) -> None:
    deep = '{"model": "scripted", "max_tokens": 5, "messages": ' + "[" * 5000 + "]" * 5000 + "}"
    message = error_of(http.post("/v1/messages", content=deep), 400, "invalid_request_error")
    assert "nested too deeply" in message
    ok(http)


def test_a_remote_provider_model_is_refused_in_anthropics_shape(http: httpx.Client) -> None:
    body = {"model": "openrouter::some/model", "max_tokens": 5, "messages": HI}
    assert "chat/completions" in error_of(
        http.post("/v1/messages", json=body), 400, "invalid_request_error"
    )
