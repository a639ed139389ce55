"""A provider that answers without end cannot fill Ember's memory: the forwarder reads at most
``MAX_ANSWER_BYTES`` of an answer, ``MAX_ERROR_BYTES`` of an error and ``MAX_SSE_LINE_BYTES``
of one stream line, then hangs up and answers the client with a clear 502 naming the provider.
Real uvicorn, the real openai SDK, a real (fake) provider on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.engine import remote_limits
from app.engine.providers import ProviderRegistry, make_provider
from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.forward import RemoteForwarder
from app.server.gateway import Gateway
from tests.helpers.endless_upstream import EndlessUpstream
from tests.helpers.served import serving

MB = 1024 * 1024
HELLO = [{"role": "user", "content": "Say hello"}]


@pytest.fixture
def endless() -> Iterator[EndlessUpstream]:
    upstream = EndlessUpstream()
    yield upstream
    upstream.close()


@pytest.fixture
def ember(
    endless: EndlessUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    monkeypatch.setattr(remote_limits, "MAX_ANSWER_BYTES", 2 * MB)
    monkeypatch.setattr(remote_limits, "MAX_ERROR_BYTES", MB // 4)
    monkeypatch.setattr(remote_limits, "MAX_SSE_LINE_BYTES", MB // 2)
    registry = ProviderRegistry(path=tmp_path / "providers.json")
    registry.add(make_provider("endless", endless.url))
    worker = EngineWorker()
    with serving(
        Gateway(worker), ServerConfig(port=0), forwarder=RemoteForwarder(registry)
    ) as runner:
        assert runner.base_url is not None
        yield runner.base_url


# what the kernel may hold in socket buffers between the provider and Ember on loopback: the
# provider's count includes it, Ember never read it
SOCKET_SLACK = 40 * MB


def test_an_endless_answer_is_a_502_naming_the_provider(
    endless: EndlessUpstream, ember: str
) -> None:
    client = openai.OpenAI(base_url=ember, api_key="unused", max_retries=0)
    with client, pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="endless::m", messages=HELLO)  # type: ignore[arg-type]
    error = raised.value
    assert error.status_code == 502
    assert error.code == "upstream_too_large" and error.type == "server_error"
    assert "- endless answered more than 2 MiB; Ember reads at most 2 MiB" in error.message
    endless.hung_up.wait()  # Ember stopped reading and closed the connection
    assert endless.written < 2 * MB + SOCKET_SLACK
    # the server is still up, and forwards a normal answer
    endless.mode = "ok"
    with openai.OpenAI(base_url=ember, api_key="unused", max_retries=0) as client:
        r = client.chat.completions.create(model="endless::m", messages=HELLO)  # type: ignore[arg-type]
    assert r.choices[0].message.content == "hi" and r.model == "endless::m"


def test_an_endless_error_body_keeps_its_first_part(endless: EndlessUpstream, ember: str) -> None:
    endless.mode = "error"
    with httpx.Client(timeout=60) as http:
        r = http.post(f"{ember}/chat/completions", json={"model": "endless::m", "messages": HELLO})
    assert r.status_code == 500
    assert r.json()["error"]["message"].startswith("endless answered 500: ")
    endless.hung_up.wait()
    assert endless.written < MB // 4 + SOCKET_SLACK


def test_an_endless_stream_line_ends_the_stream_with_an_error_event(
    endless: EndlessUpstream, ember: str
) -> None:
    endless.mode = "sse"
    with openai.OpenAI(base_url=ember, api_key="unused", max_retries=0) as client:
        stream = client.chat.completions.create(
            model="endless::m",
            messages=HELLO,  # type: ignore[arg-type]
            stream=True,
        )
        with pytest.raises(openai.APIError) as raised:
            list(stream)
    assert "endless answered more than 0.5 MiB in one line of its stream" in raised.value.message
    endless.hung_up.wait()
    assert endless.written < MB // 2 + SOCKET_SLACK


# ---- bytes read, counted where they are read ------------------------------------------------


def counting_response(status: int = 200) -> tuple[httpx.Response, list[int]]:
    """A response whose body is endless; ``read[0]`` counts the bytes taken from it."""
    read = [0]

    async def body() -> AsyncIterator[bytes]:
        while True:
            read[0] += 65536
            yield b"x" * 65536

    return httpx.Response(status, content=body()), read


def test_reading_stops_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_limits, "MAX_ANSWER_BYTES", 3 * MB)
    monkeypatch.setattr(remote_limits, "MAX_ERROR_BYTES", MB)
    monkeypatch.setattr(remote_limits, "MAX_SSE_LINE_BYTES", MB)

    async def lines(response: httpx.Response) -> None:
        async for _ in remote_limits.aiter_lines_capped(response, "p"):
            pass

    response, read = counting_response()
    with pytest.raises(remote_limits.AnswerTooLargeError):
        asyncio.run(remote_limits.aread_capped(response, "p"))
    assert 3 * MB < read[0] <= 3 * MB + 65536

    response, read = counting_response(500)
    assert len(asyncio.run(remote_limits.aread_capped(response, "p"))) == MB
    assert read[0] <= MB + 65536

    response, read = counting_response()
    with pytest.raises(remote_limits.AnswerTooLargeError):
        asyncio.run(lines(response))
    assert read[0] <= MB + 65536


def test_an_answer_cut_short_is_a_502(endless: EndlessUpstream, ember: str) -> None:
    endless.mode = "cut"
    with httpx.Client(timeout=60) as http:
        r = http.post(f"{ember}/chat/completions", json={"model": "endless::m", "messages": HELLO})
        assert r.status_code == 502
        error = r.json()["error"]
        assert error["code"] == "provider_unreachable"
        assert error["message"].startswith("endless stopped answering mid-answer")
        assert http.get(ember.removesuffix("/v1") + "/health").status_code == 200
