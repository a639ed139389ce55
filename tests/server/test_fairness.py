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

from app.engine.types import (
    CompletionRequest,
    Event,
    Failed,
    FinalEvent,
    Finished,
    LoadParams,
    Request,
)
from app.engine.worker import EngineWorker, Job, Sink
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.served import MODEL_ID, N_CTX, Served, serving
from tests.helpers.waiting import wait_until

LONG_PATH = "/v1/completions"
LONG_MAX_TOKENS = 2000
LONG = {
    "model": MODEL_ID,
    "prompt": "1, 2, 3, 4, 5,",
    "max_tokens": LONG_MAX_TOKENS,
    "temperature": 0,
    "logit_bias": {"1": -100, "106": -100},  # no end of text: it must be cancelled
    "stream": True,
}
WAIT = 60.0  # seconds: a failsafe for waits on events, never a timing target (see bench/)
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
    """A server that lets one API request wait while another runs (one answer at a time)."""
    worker = EngineWorker()
    gateway = Gateway(
        worker,
        StaticCatalog([entry_for_file(gemma_path, MODEL_ID)]),
        LoadParams(n_ctx=N_CTX, n_parallel=1),
        max_waiting=1,
    )
    gateway.load(str(gemma_path), MODEL_ID).wait(120)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield Served(runner, gateway, worker, gemma_path.parent)


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


class Finals:
    """The final event of every job the worker runs from now on, with its request."""

    def __init__(self, worker: EngineWorker, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[Request, FinalEvent]] = []
        self._cond = threading.Condition()
        submit = worker.submit

        def recording(request: Request, sink: Sink | None = None) -> Job:
            def tee(event: Event) -> None:
                if sink is not None:
                    sink(event)
                if isinstance(event, Finished | Failed):
                    with self._cond:
                        self.events.append((request, event))
                        self._cond.notify_all()

            return submit(request, tee)

        monkeypatch.setattr(worker, "submit", recording)

    def of(self, kind: type) -> list[FinalEvent]:
        with self._cond:
            return [final for request, final in self.events if isinstance(request, kind)]

    def wait(self, kind: type) -> FinalEvent:
        """The first final event of a ``kind`` request (CompletionRequest, ChatRequest)."""
        with self._cond:
            assert self._cond.wait_for(lambda: self.of(kind), WAIT), f"no {kind.__name__} ended"
            return self.of(kind)[0]


def assert_cut_short(final: FinalEvent) -> None:
    """Cancelled a few tokens in: LONG never ends by itself before its 2000 tokens."""
    assert isinstance(final, Finished) and final.reason == "cancelled", final
    assert final.usage.completion_tokens < LONG_MAX_TOKENS // 10, final.usage


def test_client_disconnect_cancels_its_job_at_once(
    small_queue: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = small_queue.worker
    finals = Finals(worker, monkeypatch)
    with httpx.Client(base_url=small_queue.root, timeout=60) as http:
        with http.stream("POST", LONG_PATH, json=LONG) as r:
            tokens = 0
            for line in r.iter_lines():
                tokens += is_token(line)
                if tokens == 3:
                    break
            assert worker.busy
        # the response is closed: the job stops a few tokens later, not 2000 tokens later
        assert_cut_short(finals.wait(CompletionRequest))
        first_token_seconds(http, SHORT)  # and the engine serves the next request


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
            wait_until(lambda: small_queue.gateway.active_jobs == 2, WAIT)
            full = http.post("/v1/chat/completions", json={**SHORT, "stream": False})
            assert full.status_code == 503
            assert int(full.headers["retry-after"]) >= 1
            error = full.json()["error"]
            assert error["code"] == "queue_full" and error["type"] == "server_error"
        waiter.join(60)
        assert waiting_result == [200]  # the waiting request was served after the stream ended
        ok = http.post("/v1/chat/completions", json={**SHORT, "stream": False})
        assert ok.status_code == 200


def test_stop_does_not_wait_for_open_streams(
    gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = EngineWorker()
    finals = Finals(worker, monkeypatch)
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, MODEL_ID)]))
    gateway.load(str(gemma_path), MODEL_ID, LoadParams(n_ctx=N_CTX)).wait(120)
    # A grace period longer than the stream: a stop that waited for open streams would let it
    # run to its end instead of cancelling it.
    with serving(gateway, ServerConfig(port=0, graceful_timeout=600)) as runner:
        base_url = runner.status.base_url or ""
        with (
            httpx.Client(base_url=base_url, timeout=30) as http,
            http.stream("POST", "/completions", json=LONG) as r,
        ):
            lines = r.iter_lines()
            next(lines)
            runner.stop()
            rest = list(lines)
        assert_cut_short(finals.wait(CompletionRequest))
        assert runner.status.state == "stopped" and runner.port is None
        assert rest[-1] == "data: [DONE]" or not rest[-1]
        assert not worker.busy
        # and it starts again
        runner.start()
        with httpx.Client(base_url=f"http://127.0.0.1:{runner.port}") as http:
            assert http.get("/health").status_code == 200


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
    from app.server import jobs as routes

    finals = Finals(small_queue.worker, monkeypatch)
    monkeypatch.setattr(routes, "QUEUE_DEADLINE", 0.3)
    monkeypatch.setattr(routes, "KEEPALIVE_AFTER", 0.3)
    with contextlib.ExitStack() as stack:
        http = stack.enter_context(httpx.Client(base_url=small_queue.root, timeout=60))
        other = stack.enter_context(httpx.Client(base_url=small_queue.root, timeout=60))
        running = stack.enter_context(http.stream("POST", LONG_PATH, json=LONG))
        long_lines = running.iter_lines()
        next(long_lines)
        with other.stream("POST", "/v1/chat/completions", json=SHORT) as queued:
            assert queued.status_code == 200
            assert not finals.of(CompletionRequest)  # headers came while the long job still ran
            lines = queued.iter_lines()
            head = [next(lines) for _ in range(3)]  # the role chunk, a blank, a comment
            assert head[0].startswith("data: {") and '"role":"assistant"' in head[0]
            assert head[2] == ": waiting for the engine"
            running.close()  # the long job is cancelled; the queued one runs
            rest = [line for line in lines if line]
    assert rest[-1] == "data: [DONE]", rest
    assert any(is_token(line) for line in rest), rest
