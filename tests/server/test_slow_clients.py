"""Slow clients cannot lock the others out (issue 26), on real uvicorn with raw sockets.

- 130 connections trickling a chunked body (a byte every 5 s) held all 128 places for as long
  as they liked: a body must bring MIN_BODY_RATE bytes a second over each BODY_WINDOW (both
  made small here), else its connection is closed and its place freed.
- 8 connections that declared 32 MB bodies and sent a byte every 10 s held the 256 MB budget:
  only bytes that arrived are held now.
- Clients on the network may hold three quarters of the places and of the budget: the ones on
  this computer still get through. ``/health`` answers throughout.

Every wait is on the server's own counts (RequestLimits.changed) or on the server closing a
socket; the loops are bounded, and no time is measured.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import httpx
import pytest

from app.engine.worker import EngineWorker
from app.server import header_timeout
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.limits import RequestLimits
from app.server.runner import ServerRunner
from tests.helpers.served import serving

WAIT = 60.0  # a failsafe for waits on events, never a timing target
KEY = "sk-test-0123456789abcdef"
CHUNKED = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
    b"\r\nAuthorization: Bearer " + KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"1\r\n{\r\n"
)
SMALL = {"model": "nothing-loaded", "messages": [{"role": "user", "content": "hi"}]}


def declared(length: int) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        b"application/json\r\nAuthorization: Bearer "
        + KEY.encode()
        + b"\r\nContent-Length: "
        + str(length).encode()
        + b"\r\n\r\n{"
    )


def serve(limits: RequestLimits, host: str = "127.0.0.1") -> Iterator[ServerRunner]:
    worker = EngineWorker()  # no model: a whole request ends in a quick 404
    with serving(
        Gateway(worker), ServerConfig(host=host, port=0, api_key=KEY), limits=limits
    ) as runner:
        yield runner


def client(port: int | None, host: str = "127.0.0.1") -> httpx.Client:
    assert port is not None
    headers = {"Authorization": f"Bearer {KEY}"}
    return httpx.Client(base_url=f"http://{host}:{port}", headers=headers, timeout=WAIT)


def connect(port: int | None, head: bytes, host: str = "127.0.0.1") -> socket.socket:
    assert port is not None
    sock = socket.create_connection((host, port))
    sock.sendall(head)
    return sock


def trickle_until_closed(
    socks: list[socket.socket], rounds: int = 5000, chunk: bytes = b" "
) -> int:
    """Send each socket one more ``chunk`` of its chunked body per round (a round lasts until
    a socket is readable, or 20 ms) until the server has closed them all; the rounds it took."""
    open_ = list(socks)
    piece = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    for done in range(rounds):
        for sock in list(open_):
            try:
                sock.sendall(piece)
            except OSError:  # reset: closed
                open_.remove(sock)
        readable, _, _ = select.select(open_, [], [], 0.02)
        for sock in readable:
            try:
                closed = sock.recv(4096) == b""
            except OSError:
                closed = True
            if closed:
                open_.remove(sock)
        if not open_:
            return done
    raise AssertionError(f"{len(open_)} trickling connections were never closed")


@pytest.fixture
def short_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(header_timeout, "BODY_WINDOW", 0.3)
    monkeypatch.setattr(header_timeout, "MIN_BODY_RATE", 1000)
    monkeypatch.setattr(header_timeout, "BODY_WINDOWS", 30)


def test_trickling_bodies_are_closed_and_free_their_places(short_windows: None) -> None:
    for runner in serve(RequestLimits(max_requests=8)):
        limits = runner.limits
        socks = [connect(runner.port, CHUNKED) for _ in range(8)]
        try:
            assert limits.wait_for(lambda s: s.requests == 8, WAIT)
            with client(runner.port) as http:
                assert http.get("/health").status_code == 200  # a probe is never refused
                assert http.post("/v1/chat/completions", json=SMALL).status_code == 503
                trickle_until_closed(socks)
                assert limits.wait_for(lambda s: s.requests == 0 and s.body_bytes == 0, WAIT)
                assert http.post("/v1/chat/completions", json=SMALL).status_code == 404
        finally:
            for sock in socks:
                sock.close()


def test_a_body_that_keeps_coming_is_read_whole(short_windows: None) -> None:
    """A slow client above the minimum rate is not cut off: a body over several windows."""
    for runner in serve(RequestLimits(max_requests=8)):
        with client(runner.port) as http:

            def body() -> Iterator[bytes]:
                yield b'{"model": "nothing-loaded", "pad": "'
                for _ in range(45):  # a part per 20 ms: ~0.9 s, 50 KB/s (50 x the minimum)
                    select.select([], [], [], 0.02)
                    yield b"x" * 1000
                yield b'", "messages": [{"role": "user", "content": "hi"}]}'

            r = http.post("/v1/chat/completions", content=body())
            assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_a_body_that_never_ends_is_closed_after_its_windows(
    short_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fast enough for every window, but never done: a body sent at the minimum rate would
    hold its bytes of the budget for hours. After BODY_WINDOWS windows it is closed."""
    monkeypatch.setattr(header_timeout, "BODY_WINDOWS", 3)
    for runner in serve(RequestLimits(max_requests=8)):
        socks = [connect(runner.port, CHUNKED) for _ in range(2)]
        try:
            assert runner.limits.wait_for(lambda s: s.requests == 2, WAIT)
            trickle_until_closed(socks, chunk=b" " * 1000)  # up to 50 KB/s: enough, but endless
            assert runner.limits.wait_for(lambda s: s.requests == 0 and s.body_bytes == 0, WAIT)
        finally:
            for sock in socks:
                sock.close()


def test_declared_bodies_that_never_come_hold_no_budget() -> None:
    for runner in serve(RequestLimits(max_requests=64, max_body_bytes=1024 * 1024)):
        limits = runner.limits
        socks = [connect(runner.port, declared(512 * 1024)) for _ in range(8)]
        try:
            assert limits.wait_for(lambda s: s.requests == 8, WAIT)
            assert limits.body_bytes <= 8  # one byte each arrived; 4 MB were declared
            with client(runner.port) as http:
                pad = "x" * (600 * 1024)
                r = http.post("/v1/chat/completions", json={**SMALL, "pad": pad})
                assert r.status_code == 404, r.text  # served while they wait
                too_much = http.post("/v1/chat/completions", json={**SMALL, "pad": pad * 2})
                assert too_much.status_code == 503  # the budget is still a bound
                assert http.get("/health").status_code == 200
        finally:
            for sock in socks:
                sock.close()
        assert limits.wait_for(lambda s: s.requests == 0 and s.body_bytes == 0, WAIT)


def _network_address() -> str | None:
    """An address of this computer that is not loopback (none on some test machines)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))  # no packet is sent: only a route is chosen
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_clients_on_this_computer_get_through_while_network_clients_hold_theirs() -> None:
    address = _network_address()
    if address is None:
        pytest.skip("this machine has no network address")
    for runner in serve(RequestLimits(max_requests=8, max_body_bytes=1024 * 1024), "0.0.0.0"):
        limits = runner.limits
        assert limits.max_remote_requests == 6
        socks = [connect(runner.port, CHUNKED, address) for _ in range(6)]
        try:
            assert limits.wait_for(lambda s: s.remote_requests == 6, WAIT)
            with client(runner.port, address) as remote:
                r = remote.post("/v1/chat/completions", json=SMALL)
                assert r.status_code == 503  # the network's share is taken
                pad = "x" * (800 * 1024)  # past the network's 768 KB of the budget
                assert remote.post("/v1/embeddings", json={"input": pad}).status_code == 503
            with client(runner.port) as local:
                assert local.post("/v1/chat/completions", json=SMALL).status_code == 404
                assert local.post("/v1/embeddings", json={"input": pad}).status_code == 400
                assert local.get("/health").status_code == 200
        finally:
            for sock in socks:
                sock.close()
        assert limits.wait_for(lambda s: s.requests == 0 and s.remote_body_bytes == 0, WAIT)
