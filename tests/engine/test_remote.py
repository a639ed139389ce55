"""RemoteEngine against a real, independent OpenAI-compatible server (llama-cpp-python's own,
as a subprocess on 127.0.0.1 with the test model), plus a tiny stdlib stub server for the
error cases a healthy server cannot produce on demand (429, 5xx, stalls)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.engine.remote import RemoteEngine
from app.engine.remote_errors import (
    RemoteAuthError,
    RemoteBadRequestError,
    RemoteConnectionLostError,
    RemoteModelNotFoundError,
    RemoteRateLimitError,
    RemoteServerError,
    RemoteTimeoutError,
    RemoteUnreachableError,
)
from app.engine.remote_wire import (
    error_message,
    iter_sse_data,
    normalize_base_url,
    request_body,
    retry_after_seconds,
)
from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    Delta,
    Event,
    Failed,
    Finished,
    LoadParams,
    SamplingParams,
    Started,
    ToolCallDelta,
)
from app.engine.worker import EngineWorker, Job
from tests.helpers.http_stub import (
    Stub,
    chunk,
    send_event,
    send_json,
    sse_answer,
    start_sse,
)
from tests.helpers.llama_server import MODEL_ALIAS, LlamaServer, running_llama_server
from tests.helpers.net import free_port

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)
LONG = SamplingParams(temperature=0.0, max_tokens=600)
KEY = "sk-test-secret"
WAIT = 60.0  # seconds: a failsafe for waits on events, never a timing target (see bench/)
DISCONNECTED = "Disconnected from client"  # what llama_cpp.server logs when a client hangs up


def hello(sampling: SamplingParams = GREEDY, model: str | None = None) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": "Say hello."}], sampling, model=model)


def drain(job: Job, timeout: float = 60) -> list[Event]:
    return list(job.events(timeout=timeout))


def streaming(engine: RemoteEngine) -> Job:
    """A long story asked of ``engine``, once its first text has come."""
    first = threading.Event()
    job = engine.submit(
        CompletionRequest("Once upon a time", LONG),
        lambda e: first.set() if isinstance(e, Delta) else None,
    )
    assert first.wait(30)
    return job


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, Delta))


@pytest.fixture(scope="module")
def server(gemma_path: Path) -> Iterator[LlamaServer]:
    with running_llama_server(gemma_path) as s:
        yield s


@pytest.fixture(scope="module")
def keyed_server(gemma_path: Path) -> Iterator[LlamaServer]:
    with running_llama_server(gemma_path, api_key=KEY) as s:
        yield s


@pytest.fixture
def engines() -> Iterator[Callable[..., RemoteEngine]]:
    made: list[RemoteEngine] = []

    def make(*args: Any, **kwargs: Any) -> RemoteEngine:
        kwargs.setdefault("name", "test-server")
        engine = RemoteEngine(*args, **kwargs)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.shutdown()


# ---- the real server ------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_lists_models_with_any_base_url_form(
    server: LlamaServer, engines: Callable[..., RemoteEngine], suffix: str
) -> None:
    engine = engines(server.root_url + suffix)
    assert engine.base_url == server.base_url
    assert engine.list_models() == [MODEL_ALIAS]
    before = time.perf_counter()
    probe = engine.probe()
    took = time.perf_counter() - before
    assert probe.models == [MODEL_ALIAS]
    assert 0 < probe.seconds <= took  # the listing's own time, measured inside the call


def test_chat_streams_deltas_then_one_final(
    server: LlamaServer, engines: Callable[..., RemoteEngine]
) -> None:
    engine = engines(server.base_url)
    events = drain(engine.submit(hello()))  # no model: the server's first one
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Finished)
    assert not any(isinstance(e, Finished | Failed) for e in events[:-1])
    deltas = [e for e in events if isinstance(e, Delta)]
    final = events[-1]
    assert 1 <= len(deltas) <= 8
    assert final.reason in ("length", "stop")
    assert final.result == text_of(events) != ""
    assert final.usage.completion_tokens == len(deltas)
    assert final.timings.time_to_first_token > 0
    assert final.timings.generation_tokens_per_second > 0


def test_chat_without_streaming_matches_the_stream(
    server: LlamaServer, engines: Callable[..., RemoteEngine]
) -> None:
    engine = engines(server.base_url)
    streamed = engine.run(hello(model=MODEL_ALIAS), 60)
    job = engine.submit(hello(model=MODEL_ALIAS), stream=False)
    events = drain(job)
    assert [type(e) for e in events] == [Started, Delta, Finished]
    final = events[-1]
    assert isinstance(final, Finished)
    assert final.result == streamed
    assert final.usage.prompt_tokens > 0  # a complete answer carries the server's usage
    assert final.usage.completion_tokens <= 8


def test_completion_streams(server: LlamaServer, engines: Callable[..., RemoteEngine]) -> None:
    engine = engines(server.base_url)
    job = engine.submit(CompletionRequest("The capital of France is", GREEDY, model=MODEL_ALIAS))
    events = drain(job)
    final = events[-1]
    assert isinstance(final, Finished)
    assert final.reason == "length"
    assert final.result == text_of(events)
    assert len(final.result.strip()) > 0


def test_sink_gets_every_event_and_exactly_one_final(
    server: LlamaServer, engines: Callable[..., RemoteEngine]
) -> None:
    engine = engines(server.base_url)
    got: list[Event] = []
    job = engine.submit(hello(), got.append)
    final = job.wait(60)
    assert got[0] == Started(job.id)
    assert got[-1] is final
    assert sum(isinstance(e, Finished | Failed) for e in got) == 1


def test_cancel_closes_the_stream_fast(
    server: LlamaServer, engines: Callable[..., RemoteEngine]
) -> None:
    engine = engines(server.base_url)
    disconnects = server.log_count(DISCONNECTED)
    job = engine.submit(CompletionRequest("Once upon a time", LONG))
    seen: list[str] = []
    for event in job.events(timeout=WAIT):
        if isinstance(event, Delta):
            seen.append(event.text)
            if len(seen) == 3:
                job.cancel()
    final = job.wait(WAIT)
    assert isinstance(final, Finished)
    assert final.reason == "cancelled"
    # The text so far comes with the final event only from the job's own thread: it saw the
    # stream close instead of the grace timer finishing the job for it.
    assert final.result == "".join(seen)
    assert len(seen) < 100
    # The server noticed the disconnect and stopped generating (its own log says so), and
    # answers the next request.
    assert server.wait_for_log(DISCONNECTED, disconnects + 1)
    assert engine.run(hello(), 60)
    assert engine.active_jobs == 0


def test_remote_generation_does_not_block_local_jobs(
    server: LlamaServer, engines: Callable[..., RemoteEngine], gemma_path: Path
) -> None:
    remote = streaming(engines(server.base_url))
    worker = EngineWorker()
    try:
        worker.load(str(gemma_path), LoadParams(n_ctx=512)).result(60)
        local = worker.run(CompletionRequest("Hello", SamplingParams(max_tokens=4)), 60)
        assert isinstance(local, str)
        assert not remote.done  # both ran side by side
    finally:
        worker.shutdown()
        remote.cancel()
    assert remote.wait(WAIT).reason == "cancelled"


def test_shutdown_cancels_running_jobs(server: LlamaServer) -> None:
    engine = RemoteEngine(server.base_url)
    job = streaming(engine)
    engine.shutdown()
    assert job.wait(WAIT).reason == "cancelled"


def test_wrong_or_missing_key_is_a_clear_401(
    keyed_server: LlamaServer, engines: Callable[..., RemoteEngine]
) -> None:
    wrong = engines(keyed_server.base_url, api_key="sk-wrong")
    with pytest.raises(RemoteAuthError, match=r"rejected the API key \(HTTP 401"):
        wrong.list_models()
    final = wrong.submit(hello()).wait(30)
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteAuthError)
    assert final.error.message.startswith("The server rejected the API key")
    assert final.error.upstream_status == 401

    missing = engines(keyed_server.base_url)
    with pytest.raises(RemoteAuthError, match="requires an API key"):
        missing.list_models()

    right = engines(keyed_server.base_url, api_key=KEY)
    assert right.list_models() == [MODEL_ALIAS]
    assert right.run(hello(model=MODEL_ALIAS), 60)


def test_server_dying_mid_answer_keeps_the_text_so_far(
    gemma_path: Path, engines: Callable[..., RemoteEngine]
) -> None:
    with running_llama_server(gemma_path) as doomed:
        engine = engines(doomed.base_url)
        got: list[Event] = []
        three = threading.Event()

        def sink(event: Event) -> None:
            got.append(event)
            if sum(isinstance(e, Delta) for e in got) == 3:
                three.set()

        job = engine.submit(CompletionRequest("Once upon a time", LONG), sink)
        assert three.wait(30)
        doomed.kill()
        final = job.wait(WAIT)
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteConnectionLostError)
    assert "was lost mid-answer; the text so far is kept" in final.error.message
    assert doomed.base_url in final.error.message
    deltas = [e for e in got if isinstance(e, Delta)]
    assert len(deltas) >= 3  # what arrived stands
    assert final.usage.completion_tokens == len(deltas)
    assert got[-1] is final


def test_connection_refused(engines: Callable[..., RemoteEngine]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    engine = engines(url)
    with pytest.raises(RemoteUnreachableError) as e:
        engine.list_models()
    assert str(e.value) == f"Can't reach test-server at {url} — is the server running?"
    final = engine.submit(hello(model="m")).wait(WAIT)
    assert isinstance(final, Failed)
    assert final.error.message == str(e.value)


# ---- a stub server for the errors a healthy server does not make ------------------------------


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.close()


def test_stub_answer_with_usage(stub: Stub, engines: Callable[..., RemoteEngine]) -> None:
    stub.routes[("POST", "/v1/chat/completions")] = sse_answer
    final = engines(stub.url).submit(hello(model="alpha")).wait(WAIT)
    assert isinstance(final, Finished)
    assert final.result == "Hello"
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (5, 2)
    body = stub.hits[-1][2]
    assert body["model"] == "alpha"
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 8


def test_429_honours_retry_after(stub: Stub, engines: Callable[..., RemoteEngine]) -> None:
    calls = []

    def limited_once(h: BaseHTTPRequestHandler) -> None:
        calls.append(time.perf_counter())
        if len(calls) == 1:
            send_json(h, 429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
        else:
            sse_answer(h)

    stub.routes[("POST", "/v1/chat/completions")] = limited_once
    final = engines(stub.url).submit(hello(model="alpha")).wait(WAIT)
    assert isinstance(final, Finished)
    assert final.result == "Hello"
    assert len(calls) == 2
    assert calls[1] - calls[0] >= 0.9


def test_429_asking_too_long_fails_at_once(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    stub.routes[("POST", "/v1/chat/completions")] = lambda h: send_json(
        h, 429, {"error": {"message": "quota exceeded"}}, {"Retry-After": "3600"}
    )
    final = engines(stub.url).submit(hello(model="alpha")).wait(WAIT)
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteRateLimitError)
    assert "quota exceeded" in final.error.message
    assert "wait 3600 s" in final.error.message
    assert len(stub.hits) == 1


def test_5xx_message_comes_from_the_body(stub: Stub, engines: Callable[..., RemoteEngine]) -> None:
    stub.routes[("POST", "/v1/completions")] = lambda h: send_json(
        h, 500, {"error": {"message": "CUDA out of memory", "type": "server_error"}}
    )
    final = engines(stub.url).submit(CompletionRequest("x", GREEDY, model="alpha")).wait(WAIT)
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteServerError)
    assert final.error.message == "test-server failed (HTTP 500): CUDA out of memory"


def test_unknown_model_lists_what_is_served(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    stub.routes[("POST", "/v1/chat/completions")] = lambda h: send_json(
        h, 404, {"error": {"message": "The model `gamma` does not exist."}}
    )
    final = engines(stub.url).submit(hello(model="gamma")).wait(WAIT)
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteModelNotFoundError)
    assert final.error.message == "gamma is not served by test-server; it serves: alpha, beta."


def test_wrong_base_url_says_so(stub: Stub, engines: Callable[..., RemoteEngine]) -> None:
    engine = engines(stub.url + "/api")  # becomes /api/v1: nothing there
    with pytest.raises(RemoteServerError, match="has no OpenAI-compatible API"):
        engine.list_models()


def test_silence_before_the_answer_times_out(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    stub.routes[("POST", "/v1/chat/completions")] = lambda h: time.sleep(1.5)
    engine = engines(stub.url, timeout=httpx.Timeout(5.0, read=0.3))
    final = engine.submit(hello(model="alpha")).wait(WAIT)
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteTimeoutError)
    assert "did not answer within 0.3 s" in final.error.message


def test_silence_mid_answer_times_out_and_keeps_the_text(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    def stall(h: BaseHTTPRequestHandler) -> None:
        start_sse(h)
        send_event(h, chunk("Hel"))
        time.sleep(1.5)

    stub.routes[("POST", "/v1/chat/completions")] = stall
    engine = engines(stub.url, timeout=httpx.Timeout(5.0, read=0.3))
    job = engine.submit(hello(model="alpha"))
    events = drain(job, WAIT)
    final = events[-1]
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteTimeoutError)
    assert "mid-answer; the text so far is kept" in final.error.message
    assert text_of(events) == "Hel"


def test_cancel_wakes_a_thread_blocked_on_a_silent_server(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    hung_up = threading.Event()

    def stall(h: BaseHTTPRequestHandler) -> None:
        start_sse(h)
        send_event(h, chunk("Hel"))
        # Silent (no data), until the client closes its end: a read then sees EOF.
        h.connection.settimeout(WAIT)
        with contextlib.suppress(OSError):
            if h.connection.recv(1) == b"":
                hung_up.set()

    stub.routes[("POST", "/v1/chat/completions")] = stall
    got: list[Event] = []
    first = threading.Event()

    def sink(event: Event) -> None:
        got.append(event)
        if isinstance(event, Delta):
            first.set()

    job = engines(stub.url).submit(hello(model="alpha"), sink)
    assert first.wait(WAIT)
    job.cancel()
    final = job.wait(WAIT)
    assert hung_up.wait(WAIT)  # the socket was shut down while the server said nothing
    assert isinstance(final, Finished)
    assert final.reason == "cancelled"
    assert final.result == "Hel"  # from the job's own thread, with the text so far


def test_error_event_mid_stream_fails_the_job(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    def broken(h: BaseHTTPRequestHandler) -> None:
        start_sse(h)
        send_event(h, chunk("Hel"))
        send_event(h, {"error": {"message": "KV cache exhausted"}})

    stub.routes[("POST", "/v1/chat/completions")] = broken
    final = engines(stub.url).submit(hello(model="alpha")).wait(WAIT)
    assert isinstance(final, Failed)
    assert final.error.message == "test-server failed mid-answer: KV cache exhausted"


def test_a_server_refusing_stream_options_is_asked_again_without(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    def picky(h: BaseHTTPRequestHandler) -> None:
        if "stream_options" in stub.hits[-1][2]:
            send_json(h, 422, {"detail": [{"msg": "extra field stream_options not permitted"}]})
        else:
            sse_answer(h)

    stub.routes[("POST", "/v1/chat/completions")] = picky
    engine = engines(stub.url)
    assert engine.run(hello(model="alpha"), 5) == "Hello"
    assert engine.run(hello(model="alpha"), 5) == "Hello"
    assert len(stub.hits) == 3  # asked once with, then never again


def test_tool_calls_stream_as_tool_call_deltas(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    def tool_call(h: BaseHTTPRequestHandler) -> None:
        start_sse(h)
        call = {"index": 0, "id": "call_1", "function": {"name": "weather", "arguments": ""}}
        args = {"index": 0, "function": {"arguments": '{"city": "Paris"}'}}
        for tc in (call, args):
            send_event(h, {"choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]})
        send_event(h, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        send_event(h, "[DONE]")

    stub.routes[("POST", "/v1/chat/completions")] = tool_call
    events = drain(engines(stub.url).submit(hello(model="alpha")), WAIT)
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "weather", ""),
        (None, None, '{"city": "Paris"}'),
    ]
    final = events[-1]
    assert isinstance(final, Finished)
    assert final.reason == "tool_calls"


def test_bad_request_keeps_the_servers_words(
    stub: Stub, engines: Callable[..., RemoteEngine]
) -> None:
    stub.routes[("POST", "/v1/chat/completions")] = lambda h: send_json(
        h, 400, {"error": "temperature must be at most 2"}
    )
    final = engines(stub.url).submit(hello(model="alpha")).wait(WAIT)
    assert isinstance(final, Failed)
    assert isinstance(final.error, RemoteBadRequestError)
    assert "temperature must be at most 2" in final.error.message


# ---- pure helpers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://host:8000", "http://host:8000/v1"),
        ("http://host:8000/", "http://host:8000/v1"),
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("http://host:11434/v1/", "http://host:11434/v1"),
        ("host:1234", "http://host:1234/v1"),
        ("https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1"),
        ("https://example.com/openai/v1beta", "https://example.com/openai/v1beta"),
        ("https://example.com/proxy", "https://example.com/proxy/v1"),
    ],
)
def test_normalize_base_url(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected


def test_normalize_base_url_rejects_nonsense() -> None:
    for bad in ("", "ftp://host/v1", "http://"):
        with pytest.raises(ValueError):
            normalize_base_url(bad)


def test_sse_parsing() -> None:
    lines = [": ping", "event: message", "data: a", "data: b", "", "", "data:[DONE]"]
    assert list(iter_sse_data(lines)) == ["a\nb", "[DONE]"]


def test_retry_after_forms() -> None:
    def response(headers: dict[str, str]) -> httpx.Response:
        return httpx.Response(429, headers=headers)

    now = datetime(2025, 1, 1, tzinfo=UTC)
    assert retry_after_seconds(response({"Retry-After": "7"})) == 7
    assert retry_after_seconds(response({"retry-after-ms": "250"})) == 0.25
    date = {"Retry-After": "Wed, 01 Jan 2025 00:00:30 GMT"}
    assert retry_after_seconds(response(date), now) == 30
    assert retry_after_seconds(response({})) is None


def test_error_message_shapes() -> None:
    def msg(status: int, content: bytes) -> str:
        return error_message(httpx.Response(status, content=content))

    assert msg(500, b'{"error": {"message": "boom"}}') == "boom"
    assert msg(404, b'{"error": "model not found"}') == "model not found"
    assert msg(401, b'{"detail": "Invalid API key"}') == "Invalid API key"
    assert msg(502, b"<html>Bad gateway</html>") == "<html>Bad gateway</html>"


def test_sampling_maps_to_openai_fields_and_llama_extras() -> None:
    sampling = SamplingParams(
        temperature=0.2,
        top_k=20,
        repeat_penalty=1.1,
        seed=3,
        stop=("\n",),
        max_tokens=9,
        json_schema={"type": "object"},
    )
    request = ChatRequest([{"role": "user", "content": "x"}], sampling)
    plain = request_body(request, "gpt", stream=True, llama_extras=False)
    assert plain["temperature"] == 0.2
    assert plain["seed"] == 3
    assert plain["stop"] == ["\n"]
    assert plain["max_tokens"] == 9
    assert plain["response_format"]["type"] == "json_schema"
    assert "top_k" not in plain and "repeat_penalty" not in plain
    extra = request_body(request, "m", stream=False, llama_extras=True)
    assert extra["top_k"] == 20
    assert extra["repeat_penalty"] == extra["repetition_penalty"] == 1.1
    assert "stream_options" not in extra
    completion = CompletionRequest("x", SamplingParams())
    assert request_body(completion, "m", stream=True, llama_extras=True)["max_tokens"] is None
    assert "max_tokens" not in request_body(completion, "m", stream=True, llama_extras=False)
