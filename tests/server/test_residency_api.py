"""What is loaded and until when, through real uvicorn and the real test model: Ollama's
``/api/ps`` in its exact shape (read by the official ``ollama`` client too), ``keep_alive``
setting the time-to-live (0 unloads after the answer, -1 keeps the model), the ``ttl`` field
of the OpenAI-style routes and ``/v1/models``' extra fields; and hostile ``ttl`` /
``keep_alive`` values answered with a 400 in each protocol's shape while ``/health`` answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from app.engine.residency import Residency
from app.engine.types import LoadParams, UnloadRequest
from app.engine.worker import EngineWorker
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.ollama.shapes import LOADED_FOR_GOOD
from app.server.runner import ServerRunner
from tests.helpers.model_copies import model_copies

IDS = ("gemma-a", "gemma-b")
PS_KEYS = {
    "name",
    "model",
    "size",
    "size_vram",
    "digest",
    "details",
    "expires_at",
    "context_length",
}


@pytest.fixture(scope="module")
def stack(
    gemma_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, EngineWorker]]:
    files = model_copies(gemma_path, tmp_path_factory.mktemp("ps"), IDS)
    worker = EngineWorker()
    catalog = StaticCatalog([entry_for_file(f, i) for f, i in zip(files, IDS, strict=True)])
    residency = Residency(worker, timer=False)
    gateway = Gateway(worker, catalog, LoadParams(n_ctx=512, n_parallel=1), residency=residency)
    runner = ServerRunner(gateway, ServerConfig(port=0))
    runner.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}", timeout=600) as http:
            yield http, worker
    finally:
        runner.stop()
        worker.shutdown()


@pytest.fixture
def http(stack: tuple[httpx.Client, EngineWorker]) -> Iterator[httpx.Client]:
    client, worker = stack
    yield client
    worker.run(UnloadRequest(None), 300)


def _generate(http: httpx.Client, model: str, keep_alive: Any) -> None:
    body = {"model": model, "prompt": "Hi", "stream": False, "keep_alive": keep_alive}
    r = http.post("/api/generate", json={**body, "options": {"num_predict": 2}})
    assert r.status_code == 200, r.text


def test_api_ps_says_what_is_loaded_its_memory_and_until_when(http: httpx.Client) -> None:
    before = time.time()
    _generate(http, "gemma-a", "5m")
    _generate(http, "gemma-b", -1)
    models = {m["name"].removesuffix(":latest"): m for m in http.get("/api/ps").json()["models"]}
    assert set(models) == {"gemma-a", "gemma-b"}
    a = models["gemma-a"]
    assert set(a) == PS_KEYS
    assert a["context_length"] == 512 and a["size"] > 100_000_000 and a["size_vram"] == 0
    assert len(a["digest"]) == 64 and a["details"]["family"] == "gemma3"
    expires = time.mktime(time.strptime(a["expires_at"][:19], "%Y-%m-%dT%H:%M:%S"))
    expires -= time.timezone if time.daylight == 0 else time.altzone
    assert before + 290 <= expires <= time.time() + 310
    assert models["gemma-b"]["expires_at"] == LOADED_FOR_GOOD
    # the official client reads it
    with ollama.Client(host=str(http.base_url)) as client:
        listed = client.ps().models
    assert {m.model for m in listed} == {"gemma-a:latest", "gemma-b:latest"}
    assert all(m.expires_at is not None and (m.size or 0) > 0 for m in listed)


def test_keep_alive_zero_unloads_after_the_answer(http: httpx.Client) -> None:
    _generate(http, "gemma-a", 0)
    assert http.get("/api/ps").json()["models"] == []


def test_a_ttl_on_an_openai_request_shows_in_v1_models(http: httpx.Client) -> None:
    before = time.time()
    body = {"model": "gemma-a", "messages": [{"role": "user", "content": "Hi"}], "ttl": 120}
    r = http.post("/v1/chat/completions", json={**body, "max_tokens": 2})
    assert r.status_code == 200, r.text
    r = http.post("/v1/embeddings", json={"model": "gemma-b", "input": "Hi", "ttl": "2m"})
    assert r.status_code == 200, r.text
    models = {m["id"]: m for m in http.get("/v1/models").json()["data"]}
    a = models["gemma-a"]
    assert a["state"] == "loaded" and a["ttl"] == 120 and a["memory_bytes"] > 100_000_000
    assert before + 119 <= a["expires_at"] <= time.time() + 121
    assert models["gemma-b"]["ttl"] == 120


def test_a_model_loaded_for_a_request_keeps_the_default_ttl(http: httpx.Client) -> None:
    body = {"model": "gemma-a", "prompt": "Hi", "max_tokens": 2}
    assert http.post("/v1/completions", json=body).status_code == 200
    (a,) = [m for m in http.get("/v1/models").json()["data"] if m["state"] == "loaded"]
    assert a["ttl"] == 3600  # LM Studio's 60 minutes for a model loaded just in time


# ---- hostile values -------------------------------------------------------------------------

HUGE_DIGITS = "1" * 30_000
BAD_VALUES = [
    '"five minutes"',
    f'"{HUGE_DIGITS}"',
    HUGE_DIGITS,  # a JSON number of 30,000 digits
    "1e400",
    "-1e300",
    "1e12",
    "true",
    "[1]",
    '{"s": 1}',
    "NaN",
    '"1h\\u0000"',
]
ROUTES: list[tuple[str, str, str]] = [
    ("/v1/chat/completions", '"messages": [{"role": "user", "content": "Hi"}]', "ttl"),
    ("/v1/completions", '"prompt": "Hi"', "ttl"),
    ("/v1/embeddings", '"input": "Hi"', "ttl"),
    ("/v1/responses", '"input": "Hi"', "ttl"),
    ("/v1/messages", '"max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]', "ttl"),
    ("/api/generate", '"prompt": "Hi"', "keep_alive"),
    ("/api/chat", '"messages": [{"role": "user", "content": "Hi"}]', "keep_alive"),
    ("/api/embed", '"input": "Hi"', "keep_alive"),
]


def _error_text(route: str, body: dict[str, Any]) -> str:
    if route == "/v1/messages":  # Anthropic's shape
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        return str(body["error"]["message"])
    if route.startswith("/api/"):  # Ollama's
        assert isinstance(body["error"], str)
        return str(body["error"])
    error = body["error"]  # OpenAI's
    assert error["type"] == "invalid_request_error", error
    return str(error["message"])


@pytest.mark.parametrize(("route", "fields", "name"), ROUTES, ids=[r[0] for r in ROUTES])
def test_a_hostile_ttl_is_a_400_in_the_protocols_shape(
    stack: tuple[httpx.Client, EngineWorker], route: str, fields: str, name: str
) -> None:
    http, _worker = stack
    answers: list[tuple[str, httpx.Response]] = []

    def attack() -> None:
        for value in BAD_VALUES:
            raw = f'{{"model": "gemma-a", {fields}, "{name}": {value}}}'
            headers = {"content-type": "application/json"}
            answers.append((value, http.post(route, content=raw, headers=headers)))

    attacker = threading.Thread(target=attack)
    attacker.start()
    while attacker.is_alive():  # the event loop answers meanwhile
        assert http.get("/health").status_code == 200
    attacker.join()
    for value, r in answers:
        assert r.status_code == 400, (value[:40], r.text[:300])
        text = _error_text(route, r.json())
        # 30,000 digits are more than the JSON parser reads a number of: the body is refused
        assert (name if value != HUGE_DIGITS else "JSON") in text, text
        assert len(text) < 1000  # the 30,000 digits are not echoed back
    assert http.get("/api/ps").json()["models"] == []  # nothing was loaded
