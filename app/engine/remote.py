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

The wire format lives in :mod:`app.engine.remote_wire`, the errors in
:mod:`app.engine.remote_errors`, a job's own state in :mod:`app.engine.remote_job`.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app import __version__
from app.engine.remote_errors import (
    RemoteAuthError,
    RemoteBadRequestError,
    RemoteConnectionLostError,
    RemoteContextOverflowError,
    RemoteError,
    RemoteModelNotFoundError,
    RemoteRateLimitError,
    RemoteServerError,
    RemoteTimeoutError,
    RemoteUnreachableError,
)
from app.engine.remote_job import Call, Progress
from app.engine.remote_limits import (
    AnswerTooLargeError,
    iter_lines_capped,
    read_capped,
)
from app.engine.remote_wire import (
    clip,
    error_message,
    iter_sse_data,
    message_of,
    model_ids,
    normalize_base_url,
    request_body,
    retry_after_seconds,
    tool_call_delta,
    usage_of,
)
from app.engine.types import (
    BadRequestError,
    ChatRequest,
    CompletionRequest,
    Delta,
    EngineCrashedError,
    EngineError,
    Failed,
    FinalEvent,
    Finished,
    JobCancelledError,
    Request,
    Started,
)
from app.engine.worker import Job, Sink

if TYPE_CHECKING:  # httpx is imported where a request is made: the app starts faster
    import httpx

__all__ = [
    "CANCEL_GRACE",
    "DEFAULT_TIMEOUT",
    "LIST_TIMEOUT",
    "NON_STREAM_READ_TIMEOUT",
    "ProbeResult",
    "RemoteEngine",
]

log = logging.getLogger(__name__)

# httpx.Timeout arguments (seconds)
DEFAULT_TIMEOUT = {"connect": 5.0, "read": 120.0, "write": 30.0, "pool": 5.0}
LIST_TIMEOUT = {"connect": 5.0, "read": 15.0, "write": 15.0, "pool": 5.0}
NON_STREAM_READ_TIMEOUT = 600.0  # a whole answer, not the gap between two chunks
CANCEL_GRACE = 0.3  # seconds a cancelled job's thread gets to deliver its own final event


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
        self._calls: dict[str, Call] = {}
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
            with self._client.stream("GET", url, timeout=timeout) as streamed:
                response = read_capped(streamed, self.label)
        except httpx.HTTPError as e:
            raise self._transport_error(e, None) from e
        except AnswerTooLargeError as e:
            raise RemoteServerError(str(e)) from None
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
        return model_ids(data)

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
        call = Call(job)
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

    def _force_cancelled(self, call: Call) -> None:
        # The thread could not be woken (still connecting, say): the final event goes now and
        # whatever the thread does later is dropped.
        if call.job.finish(Finished(call.job.id, "cancelled")):
            log.debug("%s: cancelled without the thread's confirmation", call.job.id)

    # -- a job's thread --------------------------------------------------------------------------

    def _run_job(self, call: Call, stream: bool) -> None:
        job = call.job
        progress = Progress(job.submitted_at)
        final: FinalEvent
        try:
            if job.cancelled.is_set():
                raise JobCancelledError
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

    def _final_for(self, job: Job, progress: Progress, e: Exception) -> FinalEvent:
        if job.cancelled.is_set():  # whatever broke, it broke because the stream was closed
            return Finished(
                job.id, "cancelled", progress.usage(), progress.timings(), progress.text
            )
        if isinstance(e, EngineError):
            return Failed(job.id, e, progress.usage(), progress.timings())
        log.exception("Remote job %s failed unexpectedly", job.id)
        error = EngineCrashedError(f"Talking to {self.label} failed: {e}")
        return Failed(job.id, error, progress.usage(), progress.timings())

    def _generate(self, call: Call, progress: Progress, stream: bool) -> None:
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
                raise JobCancelledError

    def _attempt(
        self,
        call: Call,
        progress: Progress,
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
                        error = read_capped(response, self.label)
                        return self._retry_or_raise(error, model, attempt, body)
                    if response.headers.get("content-type", "").startswith("text/event-stream"):
                        self._read_stream(call, progress, response)
                    else:
                        whole = read_capped(response, self.label)
                        self._read_whole(call, progress, whole)
            except AnswerTooLargeError as e:
                raise RemoteServerError(str(e)) from None
            except httpx.HTTPError as e:
                if call.job.cancelled.is_set():
                    raise JobCancelledError from e
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

    def _read_stream(self, call: Call, progress: Progress, response: httpx.Response) -> None:
        for data in iter_sse_data(iter_lines_capped(response, self.label)):
            if call.job.cancelled.is_set():
                raise JobCancelledError
            if data.strip() == "[DONE]":
                progress.done = True
                return
            try:
                chunk = json.loads(data)
            except ValueError as e:
                raise RemoteServerError(
                    f"{self.label} sent something that is not JSON: {clip(data, 120)}"
                ) from e
            self._apply_chunk(call, progress, chunk)
        if progress.finish_reason is None:  # closed cleanly, but before the answer ended
            raise self._lost()

    def _apply_chunk(self, call: Call, progress: Progress, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            return
        if "error" in chunk:
            raise RemoteServerError(f"{self.label} failed mid-answer: {message_of(chunk)}")
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
        usage = usage_of(chunk.get("usage"))
        if usage is not None:
            progress.server_usage = usage

    def _apply_delta(self, call: Call, progress: Progress, delta: dict[str, Any]) -> None:
        text = delta.get("content")
        if isinstance(text, str) and text:
            progress.output(text)
            call.job.emit(Delta(call.job.id, text))
        for tc in delta.get("tool_calls") or []:
            progress.output("", 1 if tc.get("function", {}).get("arguments") else 0)
            call.job.emit(tool_call_delta(call.job.id, tc))

    def _read_whole(self, call: Call, progress: Progress, response: httpx.Response) -> None:
        try:
            data = response.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise RemoteServerError(
                f"{self.label} answered with something that is not a completion: "
                f"{clip(response.text, 120)}"
            ) from e
        usage = usage_of(data.get("usage"))
        progress.server_usage = usage
        message = choice.get("message") or {}
        text = message.get("content") if "message" in choice else choice.get("text")
        n = usage.completion_tokens if usage else 1
        progress.output(text or "", n)
        if text:
            call.job.emit(Delta(call.job.id, text, n))
        for i, tc in enumerate(message.get("tool_calls") or []):
            call.job.emit(tool_call_delta(call.job.id, {"index": i, **tc}))
        progress.finish_reason = choice.get("finish_reason")
        progress.done = True

    # -- errors ----------------------------------------------------------------------------------

    def _transport_error(self, e: httpx.HTTPError, progress: Progress | None) -> RemoteError:
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
