"""Bind policy, Host check (DNS rebinding), API key, Origin/CORS and body size, on real
servers (no model needed: these answers come before any engine work)."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from dataclasses import asdict

import httpx
import pytest

from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.requestlog import RequestLog, RequestRecord
from app.server.runner import ServerRunner, bind_socket
from app.server.security import (
    MIN_NETWORK_KEY_CHARS,
    InsecureBindError,
    WeakApiKeyError,
    check_bind,
    host_name,
    is_loopback,
)
from app.server.status import PortInUseError

KEY = "sk-test-0123456789"
ORIGIN = "http://localhost:3000"


@pytest.fixture(scope="module")
def locked(worker: EngineWorker) -> Iterator[httpx.Client]:
    """A loopback server with an API key, one CORS origin and a 1 MB body limit."""
    config = ServerConfig(port=0, api_key=KEY, cors_origins=(ORIGIN,), max_body_bytes=1024 * 1024)
    runner = ServerRunner(Gateway(worker), config)
    runner.start()
    with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
        yield http
    runner.stop()


def auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def error_code(r: httpx.Response) -> str | None:
    code: str | None = r.json()["error"]["code"]
    return code


def test_foreign_host_header_is_refused(locked: httpx.Client) -> None:
    for host in ("evil.example", "evil.example:8434", "192.168.1.5", "127.0.0.1.evil.example"):
        r = locked.get("/v1/models", headers={**auth(), "Host": host})
        assert r.status_code == 403, host
        assert error_code(r) == "invalid_host"
    for host in ("localhost", "localhost:1234", "127.0.0.1:9", "[::1]:80", "LOCALHOST"):
        assert locked.get("/v1/models", headers={**auth(), "Host": host}).status_code == 200
    assert locked.get("/health").status_code == 200  # the server is still fine


def test_api_key_is_required_when_set(locked: httpx.Client) -> None:
    missing = locked.get("/v1/models")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert "API key" in missing.json()["error"]["message"]
    wrong = locked.get("/v1/models", headers=auth("sk-wrong"))
    assert wrong.status_code == 401 and error_code(wrong) == "invalid_api_key"
    basic = locked.get("/v1/models", headers={"Authorization": f"Basic {KEY}"})
    assert basic.status_code == 401
    assert locked.post("/v1/chat/completions", json={}).status_code == 401
    assert locked.get("/v1/models", headers=auth()).status_code == 200
    assert locked.get("/health").status_code == 200  # health needs no key


def test_cors_preflight_for_a_configured_origin(locked: httpx.Client) -> None:
    r = locked.options(
        "/v1/chat/completions",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
            "Access-Control-Request-Private-Network": "true",
        },
    )
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "authorization" in r.headers["access-control-allow-headers"].lower()
    assert r.headers["access-control-allow-private-network"] == "true"
    actual = locked.get("/v1/models", headers={**auth(), "Origin": ORIGIN})
    assert actual.status_code == 200
    assert actual.headers["access-control-allow-origin"] == ORIGIN
    # a rejected key still carries CORS headers, so the page can read why
    denied = locked.get("/v1/models", headers={"Origin": ORIGIN})
    assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == ORIGIN


def test_other_origins_are_refused(locked: httpx.Client) -> None:
    preflight = locked.options(
        "/v1/chat/completions",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    # a "simple" cross-site POST (no preflight) must not reach the engine either
    simple = locked.post(
        "/v1/chat/completions",
        content=b'{"messages": [{"role": "user", "content": "hi"}]}',
        headers={**auth(), "Origin": "https://evil.example", "Content-Type": "text/plain"},
    )
    assert simple.status_code == 403 and error_code(simple) == "origin_not_allowed"


def test_cors_is_off_unless_configured(worker: EngineWorker) -> None:
    runner = ServerRunner(Gateway(worker), ServerConfig(port=0))
    runner.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
            r = http.options(  # (pages on this computer are allowed: test_ollama_security)
                "/v1/models",
                headers={"Origin": "https://chat.example", "Access-Control-Request-Method": "GET"},
            )
            assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
            assert http.get("/v1/models").status_code == 200  # no key needed on loopback
    finally:
        runner.stop()


def test_body_over_the_limit_is_413(locked: httpx.Client) -> None:
    big = b'{"model": "x", "messages": [{"role": "user", "content": "' + b"a" * 2_000_000 + b'"}]}'
    r = locked.post("/v1/chat/completions", content=big, headers=auth())
    assert r.status_code == 413 and error_code(r) == "request_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(3):
            yield b"a" * 600_000

    streamed = locked.post("/v1/chat/completions", content=chunks(), headers=auth())
    assert streamed.status_code == 413
    assert locked.get("/health").status_code == 200


def test_network_bind_requires_an_api_key(worker: EngineWorker) -> None:
    with pytest.raises(InsecureBindError, match="API key"):
        check_bind(ServerConfig(host="0.0.0.0"))
    with pytest.raises(InsecureBindError):
        ServerRunner(Gateway(worker), ServerConfig(host="192.168.0.10", port=0)).start()
    check_bind(ServerConfig(host="0.0.0.0", api_key=KEY))
    check_bind(ServerConfig(host="localhost"))
    check_bind(ServerConfig(host="::1"))


def test_taken_port_is_one_clear_error(worker: EngineWorker) -> None:
    taken = bind_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        runner = ServerRunner(Gateway(worker), ServerConfig(port=port))
        with pytest.raises(PortInUseError, match=f"Port {port} .* already in use"):
            runner.start()
        assert runner.status.state == "failed"
        assert runner.status.error and "\n" not in runner.status.error
    finally:
        taken.close()


def test_host_helpers() -> None:
    assert host_name("[::1]:8434") == "::1"
    assert host_name("Localhost:80") == "localhost"
    assert host_name("example.com") == "example.com"
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("app.localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")


def test_network_bind_refuses_a_short_api_key() -> None:
    """`--api-key 1234` on 0.0.0.0 would be guessed; on loopback a short key is the user's call."""
    short = "a" * (MIN_NETWORK_KEY_CHARS - 1)
    with pytest.raises(WeakApiKeyError, match=f"{len(short)} characters .* at least 16") as info:
        check_bind(ServerConfig(host="0.0.0.0", api_key=short))
    assert "\n" not in str(info.value)
    with pytest.raises(WeakApiKeyError):  # spaces around a pasted key do not count
        check_bind(ServerConfig(host="0.0.0.0", api_key=f"  {short}  \n"))
    check_bind(ServerConfig(host="0.0.0.0", api_key="a" * MIN_NETWORK_KEY_CHARS))
    check_bind(ServerConfig(host="127.0.0.1", api_key="1234"))


def test_refused_requests_are_logged_without_their_bodies(worker: EngineWorker) -> None:
    """A stranger's refused request is in the log (it happened) but what it said is not."""
    records: queue.Queue[RequestRecord] = queue.Queue()
    request_log = RequestLog()
    request_log.subscribe(records.put)
    config = ServerConfig(port=0, api_key=KEY, max_body_bytes=64 * 1024)
    runner = ServerRunner(Gateway(worker), config, request_log=request_log)
    runner.start()
    secret = "my private prompt " * 10
    body = {"model": "x", "messages": [{"role": "user", "content": secret}]}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
            no_key = http.post("/v1/chat/completions", json=body)
            too_large = http.post(
                "/v1/chat/completions",
                json={**body, "padding": "x" * 100_000},
                headers={**auth(), "Content-Type": "application/json"},
            )
            streamed = http.post(  # no Content-Length: read until too large, then refused
                "/v1/chat/completions",
                content=iter([json.dumps(body).encode(), b" " * 100_000]),
                headers=auth(),
            )
            foreign = http.post("/v1/chat/completions", json=body, headers={"Host": "evil.example"})
    finally:
        runner.stop()
    assert [r.status_code for r in (no_key, too_large, streamed, foreign)] == [401, 413, 413, 403]
    logged = [records.get(timeout=30) for _ in range(4)]
    assert [r.status for r in logged] == [401, 413, 413, 403]
    for record in logged:
        assert record.request_body == ""
        assert secret.strip() not in json.dumps(asdict(record))
        assert record.error  # why it was refused is kept
