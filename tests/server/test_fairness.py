"""One engine queue shared fairly: 503 when full, disconnects cancel at once, concurrent
clients all finish, and stopping the server never waits for an open stream."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.runner import ServerRunner
from tests.server.conftest import MODEL_ID, N_CTX, Served

LONG_PATH = "/v1/completions"
LONG = {
    "model": MODEL_ID,
    "prompt": "1, 2, 3, 4, 5,",
    "max_tokens": 2000,
    "temperature": 0,
    "logit_bias": {"1": -100, "106": -100},  # no end of text: it must be cancelled
    "stream": True,
}
SHORT = {
    "model": MODEL_ID,
    "messages": [{"role": "user", "content": "Hi"}],
    "max_tokens": 3,
    "temperature": 0,
    "logit_bias": {"1": -100, "106": -100},  # at least one token, every time
    "stream": True,
}


@pytest.fixture(scope="module")
def small_queue(gemma_path: Path) -> Iterator[Served]:
    """A server that lets one API request wait while another runs."""
    worker = EngineWorker()
    gateway = Gateway(
        worker,
        StaticCatalog([entry_for_file(gemma_path, MODEL_ID)]),
        LoadParams(n_ctx=N_CTX),
        max_waiting=1,
    )
    gateway.load(str(gemma_path), MODEL_ID).wait(120)
    runner = ServerRunner(gateway, ServerConfig(port=0))
    runner.start()
    try:
        yield Served(runner, gateway, worker, gemma_path.parent)
    finally:
        runner.stop()
        worker.shutdown()


def is_token(line: str) -> bool:
    if not line.startswith("data: {"):
        return False
    choices = json.loads(line.removeprefix("data: "))["choices"]
    return bool(choices and (choices[0].get("text") or choices[0].get("delta", {}).get("content")))


def first_token_seconds(http: httpx.Client, body: dict[str, object]) -> float:
    started = time.perf_counter()
    with http.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if is_token(line):
                return time.perf_counter() - started
    raise AssertionError("no token arrived")


def wait_until(condition: object, timeout: float) -> float:
    started = time.perf_counter()
    while not condition():  # type: ignore[operator]
        if time.perf_counter() - started > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.01)
    return time.perf_counter() - started


def test_client_disconnect_cancels_its_job_at_once(small_queue: Served) -> None:
    worker = small_queue.worker
    with httpx.Client(base_url=small_queue.root, timeout=60) as http:
        baseline = first_token_seconds(http, SHORT)
        with http.stream("POST", LONG_PATH, json=LONG) as r:
            tokens = 0
            for line in r.iter_lines():
                tokens += is_token(line)
                if tokens == 3:
                    break
            assert worker.busy
        # the response is closed: the job must stop within a token or two, not 2000 tokens later
        stopped_in = wait_until(lambda: not worker.busy, timeout=3.0)
        ttft = first_token_seconds(http, SHORT)
    assert stopped_in < 1.0
    assert ttft < max(1.5, baseline * 3), (ttft, baseline)


def test_full_queue_answers_503_with_retry_after(small_queue: Served) -> None:
    with httpx.Client(base_url=small_queue.root, timeout=60) as http:
        with http.stream("POST", LONG_PATH, json=LONG) as running:
            assert running.status_code == 200
            lines = running.iter_lines()  # keep it: a dropped iterator closes the connection
            next(lines)
            waiting_result: list[int] = []
            waiter = threading.Thread(
                target=lambda: waiting_result.append(
                    http.post("/v1/chat/completions", json={**SHORT, "stream": False}).status_code
                )
            )
            waiter.start()
            wait_until(lambda: small_queue.gateway.active_jobs == 2, timeout=5)
            full = http.post("/v1/chat/completions", json={**SHORT, "stream": False})
            assert full.status_code == 503
            assert int(full.headers["retry-after"]) >= 1
            error = full.json()["error"]
            assert error["code"] == "queue_full" and error["type"] == "server_error"
        waiter.join(60)
        assert waiting_result == [200]  # the waiting request was served after the stream ended
        ok = http.post("/v1/chat/completions", json={**SHORT, "stream": False})
        assert ok.status_code == 200


def test_stop_does_not_wait_for_open_streams(gemma_path: Path) -> None:
    worker = EngineWorker()
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, MODEL_ID)]))
    gateway.load(str(gemma_path), MODEL_ID, LoadParams(n_ctx=N_CTX)).wait(120)
    runner = ServerRunner(gateway, ServerConfig(port=0, graceful_timeout=2))
    runner.start()
    try:
        base_url = runner.status.base_url or ""
        with (
            httpx.Client(base_url=base_url, timeout=30) as http,
            http.stream("POST", "/completions", json=LONG) as r,
        ):
            lines = r.iter_lines()
            next(lines)
            started = time.perf_counter()
            runner.stop()
            elapsed = time.perf_counter() - started
            rest = list(lines)
        assert elapsed < 2.0
        assert runner.status.state == "stopped" and runner.port is None
        assert rest[-1] == "data: [DONE]" or not rest[-1]
        assert not worker.busy
        # and it starts again
        runner.start()
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
            assert http.get("/health").status_code == 200
    finally:
        runner.stop()
        worker.shutdown()


def test_four_concurrent_clients_all_complete(served: Served) -> None:
    results: dict[int, str] = {}

    def ask(i: int) -> None:
        with openai.OpenAI(base_url=served.base_url, api_key="x", max_retries=0) as c:
            r = c.chat.completions.create(
                model=MODEL_ID,
                messages=[{"role": "user", "content": f"Say the number {i}."}],
                max_tokens=4,
                temperature=0,
            )
            results[i] = r.choices[0].finish_reason or ""

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == [0, 1, 2, 3]
    assert set(results.values()) <= {"stop", "length"}


def test_a_queued_stream_gets_headers_and_keep_alives(
    small_queue: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.server.routes import openai as routes

    monkeypatch.setattr(routes, "QUEUE_DEADLINE", 0.3)
    monkeypatch.setattr(routes, "KEEPALIVE_AFTER", 0.3)
    with contextlib.ExitStack() as stack:
        http = stack.enter_context(httpx.Client(base_url=small_queue.root, timeout=60))
        other = stack.enter_context(httpx.Client(base_url=small_queue.root, timeout=60))
        running = stack.enter_context(http.stream("POST", LONG_PATH, json=LONG))
        long_lines = running.iter_lines()
        next(long_lines)
        started = time.perf_counter()
        with other.stream("POST", "/v1/chat/completions", json=SHORT) as queued:
            assert queued.status_code == 200  # headers while still queued
            assert time.perf_counter() - started < 5
            lines = queued.iter_lines()
            head = [next(lines) for _ in range(3)]  # the role chunk, a blank, a comment
            assert head[0].startswith("data: {") and '"role":"assistant"' in head[0]
            assert head[2] == ": waiting for the engine"
            running.close()  # the long job is cancelled; the queued one runs
            rest = [line for line in lines if line]
    assert rest[-1] == "data: [DONE]", rest
    assert any(is_token(line) for line in rest), rest
