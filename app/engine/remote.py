"""RemoteEngine: chat and completions through any OpenAI-compatible server (httpx).

vLLM, SGLang, TGI, Ollama, LM Studio, llama.cpp's llama-server and OpenAI itself all speak
``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions`` with SSE streaming. This engine
gives them the same job semantics as the local :class:`~app.engine.worker.EngineWorker`:
``submit(request, sink) -> Job``, events ``Started``, ``Delta``/``ToolCallDelta`` and exactly one
final ``Finished`` (reason stop, length, tool_calls or cancelled) or ``Failed``.

Threads: every job runs on its own daemon thread (``ember-remote-<job id>``), so a slow remote
generation never blocks local jobs or other remote ones. Sinks are called on that thread (or,
for a cancel that the thread does not confirm within ``CANCEL_GRACE`` seconds, on a timer
thread); like the worker's, they must be quick and thread-safe.

Cancel closes the stream: each job opens its own connection and keeps a duplicate of its
socket's descriptor, so ``job.cancel()`` shuts the socket down even while the thread is blocked
reading; the server sees the disconnect and stops generating.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from app import __version__
from app.engine.types import (
    BadRequestError,
    ChatRequest,
    CompletionRequest,
    ContextOverflowError,
    Delta,
    EngineCrashedError,
    EngineError,
    Failed,
    FinalEvent,
    Finished,
    FinishReason,
    ModelNotFoundError,
    Request,
    SamplingParams,
    Started,
    Timings,
    ToolCallDelta,
    Usage,
)
from app.engine.worker import Job, Sink

if TYPE_CHECKING:  # httpx is imported where a request is made: the app starts faster
    import httpx

log = logging.getLogger(__name__)

# httpx.Timeout arguments (seconds)
DEFAULT_TIMEOUT = {"connect": 5.0, "read": 120.0, "write": 30.0, "pool": 5.0}
LIST_TIMEOUT = {"connect": 5.0, "read": 15.0, "write": 15.0, "pool": 5.0}
NON_STREAM_READ_TIMEOUT = 600.0  # a whole answer, not the gap between two chunks
CANCEL_GRACE = 0.3  # seconds a cancelled job's thread gets to deliver its own final event

_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")


# ---- errors ----------------------------------------------------------------------------------


class RemoteError(EngineError):
    """A remote server failed a request. ``status`` is the HTTP status Ember's own API should
    answer with when it forwards the request; ``upstream_status`` is what the server said."""

    code = "remote_error"
    status = 502

    def __init__(self, message: str, upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.upstream_status = upstream_status


class RemoteUnreachableError(RemoteError):
    code = "remote_unreachable"


class RemoteTimeoutError(RemoteError):
    code = "remote_timeout"
    status = 504


class RemoteAuthError(RemoteError):
    code = "remote_auth"


class RemoteModelNotFoundError(RemoteError, ModelNotFoundError):  # APIs answer it with 404
    code = "remote_model_not_found"
    status = 404


class RemoteBadRequestError(RemoteError, BadRequestError):
    code = "remote_bad_request"
    status = 400


class RemoteContextOverflowError(RemoteError, ContextOverflowError):
    code = "remote_context_overflow"
    status = 400


class RemoteRateLimitError(RemoteError):
    code = "remote_rate_limited"
    status = 429


class RemoteServerError(RemoteError):
    code = "remote_server_error"


class RemoteConnectionLostError(RemoteError):
    code = "remote_connection_lost"


# ---- base URLs -------------------------------------------------------------------------------


def normalize_base_url(url: str) -> str:
    """The API root, ending in its version segment: ``http://host:8000`` and
    ``http://host:8000/v1/`` both become ``http://host:8000/v1``.

    A path that already has a version segment (``/v1``, ``/v1beta/openai``) is kept; a pasted
    endpoint (``…/v1/chat/completions``) is cut back to its root; no scheme means ``http``.
    """
    text = url.strip()
    if not text:
        raise ValueError("The base URL is empty.")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL.")
    path = parts.path.rstrip("/")
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    if not any(_is_version(seg) for seg in path.split("/")):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _is_version(segment: str) -> bool:
    return len(segment) >= 2 and segment[0] == "v" and segment[1].isdigit()


# ---- request bodies --------------------------------------------------------------------------


def sampling_fields(sampling: SamplingParams, *, chat: bool, llama_extras: bool) -> dict[str, Any]:
    """Our sampling parameters as OpenAI request fields.

    ``llama_extras`` adds the fields llama.cpp, vLLM, SGLang, LM Studio and Ollama understand
    (top_k, min_p, repeat penalty, mirostat, grammar); OpenAI itself rejects unknown fields.
    """
    s = sampling
    body: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p}
    if s.max_tokens is not None:
        body["max_tokens"] = s.max_tokens
    elif not chat and llama_extras:
        body["max_tokens"] = None  # vLLM, llama.cpp: until the context is full (not 16)
    if s.stop:
        body["stop"] = list(s.stop)
    if s.seed is not None:
        body["seed"] = s.seed
    if s.presence_penalty:
        body["presence_penalty"] = s.presence_penalty
    if s.frequency_penalty:
        body["frequency_penalty"] = s.frequency_penalty
    if s.logit_bias:
        body["logit_bias"] = {str(k): v for k, v in s.logit_bias.items()}
    if s.json_schema is not None and chat:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": s.json_schema},
        }
    if not llama_extras:
        return body
    body["top_k"] = s.top_k
    body["min_p"] = s.min_p
    if s.typical_p != 1.0:
        body["typical_p"] = s.typical_p
    if s.repeat_penalty != 1.0:
        body["repeat_penalty"] = s.repeat_penalty  # llama.cpp's name
        body["repetition_penalty"] = s.repeat_penalty  # vLLM's and SGLang's
        body["repeat_last_n"] = s.repeat_last_n
    if s.mirostat_mode:
        body["mirostat"] = body["mirostat_mode"] = s.mirostat_mode
        body["mirostat_tau"] = s.mirostat_tau
        body["mirostat_eta"] = s.mirostat_eta
    if s.grammar:
        body["grammar"] = s.grammar
    if s.json_schema is not None and not chat:
        body["json_schema"] = s.json_schema  # llama-server's field for completions
    return body


def request_body(
    request: ChatRequest | CompletionRequest, model: str, *, stream: bool, llama_extras: bool
) -> dict[str, Any]:
    """The JSON body for ``/chat/completions`` or ``/completions``."""
    chat = isinstance(request, ChatRequest)
    body: dict[str, Any] = {"model": model, "stream": stream}
    if isinstance(request, ChatRequest):
        body["messages"] = [dict(m) for m in request.messages]
        if request.tools:
            body["tools"] = request.tools
    else:
        body["prompt"] = request.prompt
        if request.suffix is not None:
            body["suffix"] = request.suffix
        if request.echo:
            body["echo"] = True
    body.update(sampling_fields(request.sampling, chat=chat, llama_extras=llama_extras))
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


# ---- server-sent events ----------------------------------------------------------------------


def iter_sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The ``data`` of each server-sent event (multi-line data joined by newlines); comments,
    ``event:``/``id:`` fields and keep-alive pings are skipped."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value.removeprefix(" "))
    if data:  # a last event without its blank line: lenient, like browsers are not
        yield "\n".join(data)


def error_message(response: httpx.Response) -> str:
    """The human part of an error body: OpenAI's ``{"error": {"message"}}``, FastAPI's
    ``{"detail"}``, Ollama's and TGI's ``{"error": "…"}``, or the text itself."""
    try:
        data = response.json()
    except ValueError:
        return _clip(response.text.strip()) or response.reason_phrase
    return _message_of(data) or _clip(response.text.strip()) or response.reason_phrase


def _message_of(data: Any) -> str:
    if isinstance(data, str):
        return _clip(data)
    if not isinstance(data, dict):
        return ""
    for key in ("error", "detail", "message"):
        value = data.get(key)
        if isinstance(value, dict):
            return _message_of(value)
        if isinstance(value, str) and value:
            return _clip(value)
        if isinstance(value, list) and value:
            return _clip(
                "; ".join(str(v.get("msg", v)) if isinstance(v, dict) else str(v) for v in value)
            )
    return ""


def _clip(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_after_seconds(response: httpx.Response, now: datetime | None = None) -> float | None:
    """``Retry-After`` (seconds or an HTTP date) or OpenAI's ``retry-after-ms``, if any."""
    ms = response.headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


# ---- per-job state ---------------------------------------------------------------------------


class _CancelledError(Exception):
    """Raised inside a job's thread once it notices its job was cancelled."""


@dataclass(slots=True)
class _Progress:
    """What a job has received so far; the source of its final event's usage and timings."""

    started: float
    parts: list[str] = field(default_factory=list)
    chunks: int = 0
    first_at: float | None = None
    last_at: float | None = None
    finish_reason: str | None = None
    server_usage: Usage | None = None
    responded: bool = False  # the server answered with a status line
    done: bool = False  # [DONE] or a complete non-streamed body arrived

    def output(self, text: str, chunks: int = 1) -> None:
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        self.chunks += chunks
        if text:
            self.parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def usage(self) -> Usage:
        if self.server_usage is not None:
            return self.server_usage
        return Usage(completion_tokens=self.chunks)  # servers stream about one token a chunk

    def timings(self) -> Timings:
        end = time.perf_counter()
        if self.first_at is None:
            return Timings(prompt_seconds=end - self.started)
        usage = self.usage()
        prompt_s = self.first_at - self.started
        gen_s = (self.last_at or end) - self.first_at
        n_out = usage.completion_tokens
        if gen_s > 0 and n_out > 1:
            gen_tps = (n_out - 1) / gen_s
        elif n_out and prompt_s > 0 and self.chunks <= 1:  # one body: the overall rate
            gen_tps = n_out / prompt_s
        else:
            gen_tps = 0.0
        return Timings(
            time_to_first_token=prompt_s,
            prompt_seconds=prompt_s,
            generation_seconds=gen_s,
            prompt_tokens_per_second=usage.prompt_tokens / prompt_s if prompt_s > 0 else 0.0,
            generation_tokens_per_second=gen_tps,
        )

    def reason(self) -> FinishReason:
        if self.finish_reason == "length":
            return "length"
        if self.finish_reason in ("tool_calls", "function_call"):
            return "tool_calls"
        return "stop"


class _Call:
    """One running job and the sockets its thread reads from.

    The job's thread emits and finishes while a cancel timer may finish it too: ``Job`` itself
    keeps that ordered (one final event, nothing after it), so no lock is needed here."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._sockets: list[socket.socket] = []
        self._sock_lock = threading.Lock()
        self._aborted = False

    def trace(self, name: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: keep a duplicate of each new connection's socket, so that
        ``abort`` can shut it down from another thread (and after TLS wraps the original)."""
        if name != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        if sock is None:
            return
        dup = sock.dup()
        with self._sock_lock:
            self._sockets.append(dup)
            aborted = self._aborted
        if aborted:
            _shutdown(dup)

    def abort(self) -> None:
        with self._sock_lock:
            self._aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)

    def release(self) -> None:
        with self._sock_lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other side
        sock.shutdown(socket.SHUT_RDWR)


# ---- the engine ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What "Test connection" shows: the served models and how long listing them took."""

    models: list[str]
    seconds: float


class RemoteEngine:
    """Chat and completion jobs on an OpenAI-compatible server.

    ``name`` labels the server in messages (a provider's name); ``llama_extras`` sends sampling
    fields beyond OpenAI's (off for OpenAI itself). ``max_retries`` bounds retries after 429
    (and 503 with ``Retry-After``); a server asking for more than ``max_retry_wait`` seconds
    fails at once. Thread-safe; ``shutdown`` cancels every job and is idempotent.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        *,
        name: str | None = None,
        llama_extras: bool = True,
        default_model: str | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 20.0,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        self.name = name
        self.llama_extras = llama_extras
        self.default_model = default_model
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        import httpx

        if timeout is None:
            self._timeout = httpx.Timeout(**DEFAULT_TIMEOUT)
        elif isinstance(timeout, httpx.Timeout):
            self._timeout = timeout
        else:
            self._timeout = httpx.Timeout(timeout)
        self._headers = {"User-Agent": f"Ember/{__version__}"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(headers or {})
        self._has_key = bool(api_key) or "authorization" in {h.lower() for h in self._headers}
        self._ssl = ssl.create_default_context()
        self._client = httpx.Client(headers=self._headers, verify=self._ssl)
        self._lock = threading.Lock()
        self._calls: dict[str, _Call] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._stream_options = True  # dropped if the server refuses them
        self._stopping = False

    @property
    def label(self) -> str:
        return self.name or "the server"

    # -- models ----------------------------------------------------------------------------------

    def list_models(self) -> list[str]:
        """Ids of the models the server serves, in its order."""
        import httpx

        url = f"{self.base_url}/models"
        timeout = _shorter(self._timeout, httpx.Timeout(**LIST_TIMEOUT))
        try:
            response = self._client.get(url, timeout=timeout)
        except httpx.HTTPError as e:
            raise self._transport_error(e, None) from e
        if response.status_code == 404:
            raise RemoteServerError(
                f"{self.base_url} has no OpenAI-compatible API ({url} answered 404); "
                "check the base URL.",
                404,
            )
        if response.status_code >= 400:
            raise self._status_error(response, None)
        try:
            data = response.json()
        except ValueError as e:
            raise RemoteServerError(f"{url} did not answer with JSON; check the base URL.") from e
        return _model_ids(data)

    def probe(self) -> ProbeResult:
        """List the models and time it: the "Test connection" of providers."""
        start = time.perf_counter()
        models = self.list_models()
        return ProbeResult(models, time.perf_counter() - start)

    # -- jobs ------------------------------------------------------------------------------------

    def submit(self, request: Request, sink: Sink | None = None, *, stream: bool = True) -> Job:
        """Start a chat or completion job on its own thread. ``stream=False`` asks the server
        for one complete answer (delivered as a single Delta) instead of SSE."""
        job = Job(request, sink)
        job._on_cancel = self._on_job_cancel
        if not isinstance(request, ChatRequest | CompletionRequest):
            error = BadRequestError(
                f"A remote server runs chat and completion requests, not {type(request).__name__}."
            )
            job.finish(Failed(job.id, error))
            return job
        call = _Call(job)
        thread = threading.Thread(
            target=self._run_job, args=(call, stream), name=f"ember-remote-{job.id}", daemon=True
        )
        with self._lock:
            if self._stopping:
                raise EngineCrashedError("The remote engine is shutting down.")
            self._calls[job.id] = call
            self._threads[job.id] = thread
        thread.start()
        return job

    def run(self, request: Request, timeout: float | None = None, *, stream: bool = True) -> Any:
        """Submit and wait for the result (the full text)."""
        return self.submit(request, stream=stream).result(timeout)

    @property
    def active_jobs(self) -> int:
        with self._lock:
            return len(self._calls)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel every job, wait for their threads, close connections. Idempotent."""
        with self._lock:
            self._stopping = True
            calls = list(self._calls.values())
            threads = list(self._threads.values())
        for call in calls:
            call.job.cancel()
        deadline = time.monotonic() + timeout
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._client.close()

    def _on_job_cancel(self, job: Job) -> None:
        with self._lock:
            call = self._calls.get(job.id)
        if call is None:
            return
        call.abort()
        timer = threading.Timer(CANCEL_GRACE, self._force_cancelled, (call,))
        timer.daemon = True
        timer.start()

    def _force_cancelled(self, call: _Call) -> None:
        # The thread could not be woken (still connecting, say): the final event goes now and
        # whatever the thread does later is dropped.
        if call.job.finish(Finished(call.job.id, "cancelled")):
            log.debug("%s: cancelled without the thread's confirmation", call.job.id)

    # -- a job's thread --------------------------------------------------------------------------

    def _run_job(self, call: _Call, stream: bool) -> None:
        job = call.job
        progress = _Progress(job.submitted_at)
        final: FinalEvent
        try:
            if job.cancelled.is_set():
                raise _CancelledError
            job.emit(Started(job.id))
            self._generate(call, progress, stream)
            final = Finished(
                job.id, progress.reason(), progress.usage(), progress.timings(), progress.text
            )
        except Exception as e:
            final = self._final_for(job, progress, e)
        finally:
            call.release()
            with self._lock:
                self._calls.pop(job.id, None)
                self._threads.pop(job.id, None)
        job.finish(final)

    def _final_for(self, job: Job, progress: _Progress, e: Exception) -> FinalEvent:
        if job.cancelled.is_set():  # whatever broke, it broke because the stream was closed
            return Finished(
                job.id, "cancelled", progress.usage(), progress.timings(), progress.text
            )
        if isinstance(e, EngineError):
            return Failed(job.id, e, progress.usage(), progress.timings())
        log.exception("Remote job %s failed unexpectedly", job.id)
        error = EngineCrashedError(f"Talking to {self.label} failed: {e}")
        return Failed(job.id, error, progress.usage(), progress.timings())

    def _generate(self, call: _Call, progress: _Progress, stream: bool) -> None:
        request = call.job.request
        assert isinstance(request, ChatRequest | CompletionRequest)
        model = request.model or self.default_model or self._first_model()
        path = "/chat/completions" if isinstance(request, ChatRequest) else "/completions"
        attempt = 0
        while True:
            body = request_body(request, model, stream=stream, llama_extras=self.llama_extras)
            if not self._stream_options:
                body.pop("stream_options", None)
            delay = self._attempt(call, progress, path, body, model=model, attempt=attempt)
            if delay is None:
                return
            attempt += 1
            if call.job.cancelled.wait(delay):
                raise _CancelledError

    def _attempt(
        self,
        call: _Call,
        progress: _Progress,
        path: str,
        body: dict[str, Any],
        *,
        model: str,
        attempt: int,
    ) -> float | None:
        """One HTTP exchange; returns the seconds to wait before retrying, or None when done."""
        import httpx

        url = self.base_url + path
        headers = {"Accept": "text/event-stream"} if body["stream"] else {}
        timeout = self._timeout
        if not body["stream"] and timeout.read is not None:  # silence lasts the whole answer
            timeout = httpx.Timeout(
                connect=timeout.connect,
                read=max(timeout.read, NON_STREAM_READ_TIMEOUT),
                write=timeout.write,
                pool=timeout.pool,
            )
        with httpx.Client(headers=self._headers, verify=self._ssl, timeout=timeout) as c:
            try:
                with c.stream(
                    "POST", url, json=body, headers=headers, extensions={"trace": call.trace}
                ) as response:
                    progress.responded = True
                    if response.status_code >= 400:
                        response.read()
                        return self._retry_or_raise(response, model, attempt, body)
                    if response.headers.get("content-type", "").startswith("text/event-stream"):
                        self._read_stream(call, progress, response)
                    else:
                        response.read()
                        self._read_whole(call, progress, response)
            except httpx.HTTPError as e:
                if call.job.cancelled.is_set():
                    raise _CancelledError from e
                raise self._transport_error(e, progress) from e
        return None

    def _retry_or_raise(
        self, response: httpx.Response, model: str, attempt: int, body: dict[str, Any]
    ) -> float:
        status = response.status_code
        if (
            status in (400, 422)
            and "stream_options" in body
            and "stream_options" in response.text  # an older server: do without usage
        ):
            self._stream_options = False
            return 0.0
        wait = retry_after_seconds(response)
        retryable = status == 429 or (status == 503 and wait is not None)
        if retryable and attempt < self.max_retries:
            wait = 0.5 * 2**attempt if wait is None else wait
            if wait <= self.max_retry_wait:
                log.info("%s answered %s; retrying in %.1f s", self.label, status, wait)
                return wait
        raise self._status_error(response, model)

    def _first_model(self) -> str:
        models = self.list_models()
        if not models:
            raise RemoteModelNotFoundError(f"{self.label} at {self.base_url} serves no models.")
        return models[0]

    # -- reading answers -------------------------------------------------------------------------

    def _read_stream(self, call: _Call, progress: _Progress, response: httpx.Response) -> None:
        for data in iter_sse_data(response.iter_lines()):
            if call.job.cancelled.is_set():
                raise _CancelledError
            if data.strip() == "[DONE]":
                progress.done = True
                return
            try:
                chunk = json.loads(data)
            except ValueError as e:
                raise RemoteServerError(
                    f"{self.label} sent something that is not JSON: {_clip(data, 120)}"
                ) from e
            self._apply_chunk(call, progress, chunk)
        if progress.finish_reason is None:  # closed cleanly, but before the answer ended
            raise self._lost()

    def _apply_chunk(self, call: _Call, progress: _Progress, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        if "error" in chunk:
            raise RemoteServerError(f"{self.label} failed mid-answer: {_message_of(chunk)}")
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._apply_delta(call, progress, delta)
            elif isinstance(choice.get("text"), str) and choice["text"]:  # completions
                progress.output(choice["text"])
                call.job.emit(Delta(call.job.id, choice["text"]))
            if choice.get("finish_reason"):
                progress.finish_reason = choice["finish_reason"]
        usage = _usage(chunk.get("usage"))
        if usage is not None:
            progress.server_usage = usage

    def _apply_delta(self, call: _Call, progress: _Progress, delta: dict[str, Any]) -> None:
        text = delta.get("content")
        if isinstance(text, str) and text:
            progress.output(text)
            call.job.emit(Delta(call.job.id, text))
        for tc in delta.get("tool_calls") or []:
            progress.output("", 1 if tc.get("function", {}).get("arguments") else 0)
            call.job.emit(_tool_call_delta(call.job.id, tc))

    def _read_whole(self, call: _Call, progress: _Progress, response: httpx.Response) -> None:
        try:
            data = response.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise RemoteServerError(
                f"{self.label} answered with something that is not a completion: "
                f"{_clip(response.text, 120)}"
            ) from e
        usage = _usage(data.get("usage"))
        progress.server_usage = usage
        message = choice.get("message") or {}
        text = message.get("content") if "message" in choice else choice.get("text")
        n = usage.completion_tokens if usage else 1
        progress.output(text or "", n)
        if text:
            call.job.emit(Delta(call.job.id, text, n))
        for i, tc in enumerate(message.get("tool_calls") or []):
            call.job.emit(_tool_call_delta(call.job.id, {"index": i, **tc}))
        progress.finish_reason = choice.get("finish_reason")
        progress.done = True

    # -- errors ----------------------------------------------------------------------------------

    def _transport_error(self, e: httpx.HTTPError, progress: _Progress | None) -> RemoteError:
        import httpx

        where = f"{self.label} at {self.base_url}"
        mid_answer = progress is not None and progress.first_at is not None
        if isinstance(e, httpx.ConnectTimeout):
            return RemoteUnreachableError(
                f"Can't reach {where}: connecting timed out — is the server running and the "
                "address right?"
            )
        if isinstance(e, httpx.ConnectError):
            return RemoteUnreachableError(f"Can't reach {where} — is the server running?")
        if isinstance(e, httpx.TimeoutException):
            seconds = self._timeout.read
            if mid_answer:
                return RemoteTimeoutError(
                    f"{where} sent nothing for {seconds:g} s mid-answer; the text so far is kept."
                )
            return RemoteTimeoutError(
                f"{where} did not answer within {seconds:g} s; it may be busy or still loading "
                "the model. Try again, or raise the timeout."
            )
        if isinstance(e, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            if progress is not None and progress.responded:
                return self._lost()
            return RemoteConnectionLostError(f"{where} closed the connection without answering.")
        return RemoteError(f"Talking to {where} failed: {e}")

    def _lost(self) -> RemoteConnectionLostError:
        return RemoteConnectionLostError(
            f"The connection to {self.label} at {self.base_url} was lost mid-answer; "
            "the text so far is kept."
        )

    def _status_error(self, response: httpx.Response, model: str | None) -> RemoteError:
        status = response.status_code
        detail = error_message(response)
        if status in (401, 403):
            what = "rejected the API key" if self._has_key else "requires an API key"
            return RemoteAuthError(
                f"The server {what} (HTTP {status}: {detail}). Set the right key for {self.label}.",
                status,
            )
        if status == 404 and model is not None:
            return self._model_not_found(model, detail)
        if status == 429:
            wait = retry_after_seconds(response)
            hint = f"; it asks to wait {wait:.0f} s" if wait is not None else "; try again later"
            return RemoteRateLimitError(
                f"{self.label} is limiting requests (HTTP 429: {detail}){hint}.", status
            )
        if status >= 500:
            return RemoteServerError(f"{self.label} failed (HTTP {status}): {detail}", status)
        lowered = detail.lower()
        if "context length" in lowered or "context_length" in lowered or "too long" in lowered:
            return RemoteContextOverflowError(f"{self.label} refused the request: {detail}", status)
        return RemoteBadRequestError(
            f"{self.label} refused the request (HTTP {status}): {detail}", status
        )

    def _model_not_found(self, model: str, detail: str) -> RemoteError:
        try:
            served = self.list_models()
        except RemoteError as e:
            if e.upstream_status == 404:  # no API at all under this URL: say that instead
                return e
            return RemoteModelNotFoundError(f"{model} is not served by {self.label} ({e})", 404)
        if model in served:  # the model is there; this endpoint is not (TGI without it, say)
            return RemoteBadRequestError(
                f"{self.label} serves {model} but answered 404 for this request: {detail}", 404
            )
        listing = ", ".join(served) if served else "nothing"
        return RemoteModelNotFoundError(
            f"{model} is not served by {self.label}; it serves: {listing}.", 404
        )


# ---- helpers ---------------------------------------------------------------------------------


def _shorter(a: httpx.Timeout, b: httpx.Timeout) -> httpx.Timeout:
    import httpx

    def pick(x: float | None, y: float | None) -> float | None:
        return y if x is None else x if y is None else min(x, y)

    return httpx.Timeout(
        connect=pick(a.connect, b.connect),
        read=pick(a.read, b.read),
        write=pick(a.write, b.write),
        pool=pick(a.pool, b.pool),
    )


def _model_ids(data: Any) -> list[str]:
    items = (data.get("data") or data.get("models") or []) if isinstance(data, dict) else data
    ids: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            ids.append(item)
        elif isinstance(item, dict):
            value = item.get("id") or item.get("name") or item.get("model")
            if isinstance(value, str) and value not in ids:
                ids.append(value)
    return ids


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        cached_tokens=int(cached or 0),
    )


def _tool_call_delta(job_id: str, tc: dict[str, Any]) -> ToolCallDelta:
    fn = tc.get("function") or {}
    return ToolCallDelta(
        job_id,
        index=int(tc.get("index") or 0),
        id=tc.get("id"),
        name=fn.get("name"),
        arguments=fn.get("arguments") or "",
    )
