"""Ember's API fronts a remote provider: requests naming ``provider::model`` are forwarded to a
real, independent OpenAI-compatible server (llama-cpp-python's own, on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from app.engine.providers import ProviderRegistry, make_provider
from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.forward import RemoteForwarder
from app.server.gateway import Gateway
from tests.helpers.llama_server import MODEL_ALIAS, LlamaServer, running_llama_server
from tests.helpers.net import LocalHttp, free_port
from tests.helpers.served import serving

KEY = "sk-upstream-secret"


@pytest.fixture(scope="module")
def upstream(gemma_path: Path) -> Iterator[LlamaServer]:
    with running_llama_server(gemma_path, api_key=KEY) as server:
        yield server


@pytest.fixture(scope="module")
def ember_url(upstream: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("forward")
    registry = ProviderRegistry(path=home / "providers.json")
    registry.add(make_provider("box", upstream.base_url), api_key=KEY)
    registry.add(make_provider("nokey", upstream.base_url))
    registry.add(make_provider("down", f"http://127.0.0.1:{free_port()}/v1"))
    worker = EngineWorker()  # no local model at all: everything here is remote
    with serving(
        Gateway(worker), ServerConfig(port=0), forwarder=RemoteForwarder(registry)
    ) as runner:
        assert runner.base_url is not None
        yield runner.base_url


@pytest.fixture
def client(ember_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=ember_url, api_key="unused", max_retries=0) as c:
        yield c


REMOTE = f"box::{MODEL_ALIAS}"
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello"}]


def test_models_list_includes_the_providers_models(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list().data]
    assert REMOTE in ids
    assert not any(i.startswith("down::") for i in ids)  # an unreachable provider is skipped
    assert client.models.retrieve(REMOTE).owned_by == "box"


def test_chat_is_forwarded(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=REMOTE, messages=HELLO, max_tokens=5)
    assert r.model == REMOTE
    assert r.choices[0].message.role == "assistant"
    assert r.usage is not None and r.usage.completion_tokens <= 5


def test_chat_stream_is_forwarded(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model=REMOTE,
            messages=HELLO,
            max_tokens=6,
            stream=True,
        )
    )
    assert chunks and all(c.model == REMOTE for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)


def test_completions_are_forwarded(client: openai.OpenAI) -> None:
    r = client.completions.create(model=REMOTE, prompt="The capital of France is", max_tokens=4)
    assert r.model == REMOTE and r.choices[0].text


def test_upstream_errors_keep_the_openai_shape(ember_url: str) -> None:
    with httpx.Client(timeout=60) as http:
        no_key = http.post(f"{ember_url}/chat/completions",
                           json={"model": f"nokey::{MODEL_ALIAS}", "messages": HELLO})  # fmt: skip
        assert no_key.status_code == 401
        assert set(no_key.json()["error"]) >= {"message", "type", "param", "code"}
        down = http.post(f"{ember_url}/chat/completions",
                         json={"model": "down::whatever", "messages": HELLO})  # fmt: skip
        assert down.status_code == 502
        assert down.json()["error"]["code"] == "provider_unreachable"
        assert "Is the server running?" in down.json()["error"]["message"]
        unknown = http.post(f"{ember_url}/chat/completions",
                            json={"model": "nobody::x", "messages": HELLO})  # fmt: skip
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "model_not_found"
        # and the server is still up
        assert http.get(ember_url.removesuffix("/v1") + "/health").status_code == 200


class _CountingUpstream:
    """A minimal OpenAI-shaped upstream that counts the TCP connections it accepts."""

    def __init__(self) -> None:
        import json
        from http.server import BaseHTTPRequestHandler

        counter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive

            def setup(self) -> None:
                super().setup()
                counter.connections += 1

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "hi"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.connections = 0
        self.http = LocalHttp(Handler)
        self.url = f"{self.http.url}/v1"

    def close(self) -> None:
        self.http.close()


def test_forwarded_requests_reuse_the_connection_to_the_provider(tmp_path: Path) -> None:
    upstream = _CountingUpstream()
    registry = ProviderRegistry(path=tmp_path / "providers.json")
    registry.add(make_provider("counted", upstream.url))
    worker = EngineWorker()
    try:
        with serving(
            Gateway(worker), ServerConfig(port=0), forwarder=RemoteForwarder(registry)
        ) as runner:
            assert runner.base_url is not None
            with openai.OpenAI(base_url=runner.base_url, api_key="unused", max_retries=0) as c:
                for _ in range(3):
                    r = c.chat.completions.create(model="counted::m", messages=HELLO)
                    assert r.model == "counted::m" and r.choices[0].message.content == "hi"
            assert upstream.connections == 1  # one kept-alive connection, not one per request
    finally:
        upstream.close()
