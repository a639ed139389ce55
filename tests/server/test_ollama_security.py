"""Browser origins as Ollama allows them by default, for both APIs, on real servers (no model
needed): pages on this computer and app or editor webviews may call; other pages may not."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.runner import ServerRunner
from app.server.security import default_origin

KEY = "sk-test-0123456789"
ALLOWED = [
    "http://localhost:3000",
    "https://localhost",
    "http://127.0.0.1:8080",
    "http://[::1]:5173",
    "app://obsidian.md",
    "file://",
    "tauri://localhost",
    "vscode-webview://1a2b3c",
    "vscode-file://vscode-app",
]
REFUSED = [
    "https://evil.example",
    "http://localhost.evil.example",
    "http://127.0.0.1.evil.example:3000",
    "http://localhost:3000/path",
    "null",
    "http://192.168.1.10:3000",
    "chrome-extension://abcdef",
]


def serve(worker: EngineWorker, config: ServerConfig) -> Iterator[httpx.Client]:
    runner = ServerRunner(Gateway(worker), config)
    runner.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
            yield http
    finally:
        runner.stop()


@pytest.fixture(scope="module")
def http(worker: EngineWorker) -> Iterator[httpx.Client]:
    """A loopback server with its defaults: no key, no configured origin."""
    yield from serve(worker, ServerConfig(port=0))


@pytest.mark.parametrize("origin", ALLOWED)
def test_local_pages_and_webviews_may_call_both_apis(http: httpx.Client, origin: str) -> None:
    for path in ("/api/tags", "/v1/models"):
        r = http.get(path, headers={"Origin": origin})
        assert r.status_code == 200, (path, r.text)
        assert r.headers["access-control-allow-origin"] == origin
    preflight = http.options(
        "/api/delete",
        headers={"Origin": origin, "Access-Control-Request-Method": "DELETE"},
    )
    assert preflight.status_code == 204
    assert "DELETE" in preflight.headers["access-control-allow-methods"]


@pytest.mark.parametrize("origin", REFUSED)
def test_other_pages_are_refused_by_both_apis(http: httpx.Client, origin: str) -> None:
    ollama = http.post(
        "/api/chat",
        content=b'{"model": "x", "messages": []}',
        headers={"Origin": origin, "Content-Type": "text/plain"},
    )
    assert ollama.status_code == 403
    assert "not allowed" in ollama.json()["error"]  # Ollama's shape on Ollama's routes
    assert "access-control-allow-origin" not in ollama.headers
    openai = http.get("/v1/models", headers={"Origin": origin})
    assert openai.status_code == 403
    assert openai.json()["error"]["code"] == "origin_not_allowed"
    assert not default_origin(origin)


def test_a_listed_origin_is_allowed_and_keys_still_apply(worker: EngineWorker) -> None:
    config = ServerConfig(port=0, api_key=KEY, cors_origins=("https://chat.example",))
    for http in serve(worker, config):
        listed = http.get("/api/tags", headers={"Origin": "https://chat.example"})
        assert listed.status_code == 401  # an allowed page still needs the key
        assert listed.json() == {
            "error": "You didn't provide an API key. This server requires one, sent as "
            "`Authorization: Bearer <key>` (or `x-api-key: <key>`)."
        }
        assert listed.headers["access-control-allow-origin"] == "https://chat.example"
        keyed = {"Origin": "http://localhost:3000", "Authorization": f"Bearer {KEY}"}
        assert http.get("/api/tags", headers=keyed).status_code == 200
        # Ollama's clients check the server is there before they have a key
        assert http.get("/").text == "Ollama is running"
        assert http.get("/api/version").status_code == 200
