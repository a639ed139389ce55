"""The API takes on a bounded amount at once: requests in flight (slow uploads and streams
included), and request-body bytes held across all requests. Beyond either, a clear 503 with
Retry-After; the server stays up and serves normally once the load is gone.

Real uvicorn on 127.0.0.1, clients with slow generator bodies (httpx); every wait is on the
server's own counts (RequestLimits.changed), never on time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.limits import RequestLimits
from app.server.ollama.port import start_ollama_port
from app.server.runner import ServerRunner
from tests.helpers.net import free_port
from tests.helpers.served import serving

WAIT = 60.0  # a failsafe for waits on events, never a timing target
KB = 1024
CHAT = "/v1/chat/completions"
HEAD = b'{"model": "nothing-loaded", "pad": "'  # a slow body's first part, then its padding
SMALL = {"model": "nothing-loaded", "messages": [{"role": "user", "content": "hi"}]}


def serve(limits: RequestLimits) -> Iterator[tuple[str, RequestLimits]]:
    worker = EngineWorker()  # no model: requests end in a quick 404 once their body is in
    with serving(Gateway(worker), ServerConfig(port=0), limits=limits) as runner:
        assert runner.base_url is not None
        yield runner.base_url.removesuffix("/v1"), runner.limits


@pytest.fixture
def few_requests() -> Iterator[tuple[str, RequestLimits]]:
    yield from serve(RequestLimits(max_requests=4))


@pytest.fixture
def small_budget() -> Iterator[tuple[str, RequestLimits]]:
    yield from serve(RequestLimits(max_requests=64, max_body_bytes=1024 * KB))


def slow_body(release: asyncio.Event, first: bytes = b"") -> AsyncIterator[bytes]:
    """A chat request's JSON sent in two parts: ``first`` (padding) now, the rest on release."""

    async def body() -> AsyncIterator[bytes]:
        yield HEAD + first
        await release.wait()
        yield b'", "messages": [{"role": "user", "content": "hi"}]}'

    return body()


async def limits_reach(limits: RequestLimits, predicate: object) -> None:
    assert callable(predicate)
    assert await asyncio.to_thread(limits.wait_for, predicate, WAIT)


def assert_busy(r: httpx.Response) -> None:
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    error = r.json()["error"]
    assert error["code"] == "server_busy" and error["type"] == "server_error"
    assert error["message"].startswith("The server is busy")


def test_requests_beyond_the_cap_get_503_until_the_others_end(
    few_requests: tuple[str, RequestLimits],
) -> None:
    url, limits = few_requests

    async def main() -> None:
        held, extra = asyncio.Event(), asyncio.Event()
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
            holding = [
                asyncio.create_task(http.post(CHAT, content=slow_body(held))) for _ in range(4)
            ]
            await limits_reach(limits, lambda s: s.requests == 4)
            # more slow uploads: refused as soon as their heads arrive, bodies not kept
            beyond = [
                asyncio.create_task(http.post(CHAT, content=slow_body(extra))) for _ in range(6)
            ]
            await limits_reach(limits, lambda s: s.refused == 6)
            assert limits.requests == 4
            ollama = await http.post("/api/chat", json={"model": "x", "messages": []})
            assert ollama.status_code == 503 and ollama.json()["error"].startswith("The server")
            extra.set()
            for r in await asyncio.gather(*beyond):
                assert_busy(r)
            held.set()
            for r in await asyncio.gather(*holding):  # the held ones were served
                assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
            await limits_reach(limits, lambda s: s.requests == 0 and s.body_bytes == 0)
            ok = await http.post(CHAT, json=SMALL)
            assert ok.status_code == 404  # served again, not refused
            assert (await http.get("/health")).status_code == 200

    asyncio.run(main())


def test_a_long_stream_holds_one_place_only(few_requests: tuple[str, RequestLimits]) -> None:
    url, limits = few_requests

    async def main() -> None:
        release = asyncio.Event()
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
            three = [
                asyncio.create_task(http.post(CHAT, content=slow_body(release))) for _ in range(3)
            ]
            await limits_reach(limits, lambda s: s.requests == 3)
            # the last place is free: served; then freed again for the next
            for _ in range(3):
                r = await http.post(CHAT, json=SMALL)
                assert r.status_code == 404
            release.set()
            await asyncio.gather(*three)

    asyncio.run(main())


def test_bodies_beyond_the_budget_get_503(small_budget: tuple[str, RequestLimits]) -> None:
    url, limits = small_budget
    part = b"a" * (300 * KB)

    async def main() -> None:
        release = asyncio.Event()
        async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
            holding = [
                asyncio.create_task(http.post(CHAT, content=slow_body(release, part)))
                for _ in range(3)
            ]
            held = 3 * (len(HEAD) + len(part))
            await limits_reach(limits, lambda s: s.body_bytes == held)
            # a declared length beyond what is left: refused before any of it is read
            declared = await http.post(CHAT, content=part)
            assert_busy(declared)
            assert "1 MiB" in declared.json()["error"]["message"]
            # a chunked body: refused once it would go beyond
            now = asyncio.Event()
            now.set()
            chunked = await http.post(CHAT, content=slow_body(now, part))
            assert_busy(chunked)
            # the refused ones let go of what they had counted
            await limits_reach(limits, lambda s: s.requests == 3 and s.body_bytes == held)
            # a small body still fits
            small = await http.post(CHAT, json=SMALL)
            assert small.status_code == 404
            release.set()
            for r in await asyncio.gather(*holding):
                assert r.status_code == 404
            await limits_reach(limits, lambda s: s.body_bytes == 0 and s.requests == 0)
            again = await http.post(CHAT, content=b'{"model": "x", "pad": "' + part + b'"}')
            assert again.status_code != 503  # all the budget is free again

    asyncio.run(main())


def test_the_ollama_port_shares_the_bound() -> None:
    worker = EngineWorker()
    gateway = Gateway(worker)
    runner = ServerRunner(gateway, ServerConfig(port=0), limits=RequestLimits(max_requests=2))
    runner.start()
    extra = start_ollama_port(gateway, ServerConfig(port=0), free_port(), runner.request_log)
    try:
        assert extra.limits is runner.limits
        main_url = str(runner.base_url).removesuffix("/v1")
        ollama_url = str(extra.base_url).removesuffix("/v1")

        async def main() -> None:
            release = asyncio.Event()
            async with httpx.AsyncClient(timeout=WAIT) as http:
                two = [
                    asyncio.create_task(http.post(main_url + CHAT, content=slow_body(release)))
                    for _ in range(2)
                ]
                await limits_reach(runner.limits, lambda s: s.requests == 2)
                r = await http.post(ollama_url + "/api/chat", json={"model": "x", "messages": []})
                assert r.status_code == 503 and r.headers["retry-after"] == "1"
                release.set()
                await asyncio.gather(*two)
                await limits_reach(runner.limits, lambda s: s.requests == 0)
                r = await http.post(ollama_url + "/api/chat", json={"model": "x", "messages": []})
                assert r.status_code == 404

        asyncio.run(main())
    finally:
        extra.stop()
        runner.stop()
        worker.shutdown()
