"""A connection that never completes its request head is closed after the header deadline
(300 half-open connections used to stay open for good); complete requests are unaffected."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from app.engine.worker import EngineWorker
from app.server import header_timeout
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.runner import ServerRunner


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerRunner]:
    monkeypatch.setattr(header_timeout, "HEADER_TIMEOUT", 0.5)
    monkeypatch.setattr(header_timeout, "BODY_WINDOW", 0.5)
    worker = EngineWorker()
    r = ServerRunner(Gateway(worker), ServerConfig(port=0))
    r.start()
    yield r
    r.stop()
    worker.shutdown()


def closed_by_server(sock: socket.socket) -> bool:
    """Wait (up to a generous failsafe) for the server to close: recv then returns b""."""
    sock.settimeout(30)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False


@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"])
def test_a_request_head_that_never_completes_is_closed(runner: ServerRunner, sent: bytes) -> None:
    with socket.create_connection(("127.0.0.1", runner.port)) as sock:
        sock.sendall(sent)
        assert closed_by_server(sock)


def test_many_half_open_connections_are_all_closed_and_the_server_answers(
    runner: ServerRunner,
) -> None:
    socks = [socket.create_connection(("127.0.0.1", runner.port)) for _ in range(50)]
    try:
        for s in socks:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert all(closed_by_server(s) for s in socks)
    finally:
        for s in socks:
            s.close()
    assert httpx.get(f"http://127.0.0.1:{runner.port}/health").status_code == 200


def test_a_keep_alive_connection_serves_several_requests(runner: ServerRunner) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
        for _ in range(3):
            assert http.get("/health").status_code == 200


HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
)


@pytest.mark.parametrize("body", [b"", b'{"model": '])
def test_a_request_body_that_stops_coming_is_closed(runner: ServerRunner, body: bytes) -> None:
    """A body promised by Content-Length and never sent held its connection (and the server's
    shutdown) for good."""
    with socket.create_connection(("127.0.0.1", runner.port)) as sock:
        sock.sendall(HEAD + body)
        assert closed_by_server(sock)


def test_a_whole_body_is_read_and_answered(runner: ServerRunner) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
        r = http.post("/v1/embeddings", json={"input": "x" * 200_000})
        assert r.status_code == 400 and "No model is loaded" in r.json()["error"]["message"]
        assert http.get("/health").status_code == 200
