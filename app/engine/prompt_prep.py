"""Prompts rendered and tokenized off the engine thread, so a long one never pauses the answers
being written (llama-server tokenizes in its HTTP threads for the same reason).

The :class:`~app.engine.scheduler.Scheduler` prepares a short prompt (up to :data:`INLINE_CHARS`
characters, well under a millisecond) itself when it admits the job, as before: a hop to another
thread would cost more than it saves, and answers admitted together are read together. Every
longer one goes to its model's :class:`PromptPrep`: one preparing thread renders the chat
template and tokenizes (:func:`prepare`), highest ``priority`` first (the app's own chats), then
in admission order; it runs only while there is work. The engine thread takes the results
(:meth:`PromptPrep.take`) at its next step and opens their slots there (the prefix cache and the
KV cache stay the engine thread's). A job cancelled while waiting is never prepared; one
cancelled while being prepared is ended by the scheduler at once, and its result dropped.

Thread safety: llama.cpp's ``llama_tokenize`` and ``llama_vocab_get_add_bos`` read only the
model's vocabulary (``const`` members of ``llama_vocab``, a tokenizer session per call), which
``llama_decode`` on the engine thread never writes; chat templates render with a per-thread
budget (:mod:`app.engine.template_sandbox`). A prompt with images is tokenized with the projector
on the engine thread, as before (its text is rendered here). The bounds stay those of
:mod:`app.engine.templates` and the tokenizer (the request's size limits at the edges).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.engine.reasoning import ThinkingPlan
from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    EngineCrashedError,
    EngineError,
    Model,
    content_text,
)

if TYPE_CHECKING:
    from app.engine.worker import Job

log = logging.getLogger(__name__)

INLINE_CHARS = 8192  # prompts up to this long are prepared on the engine thread


def prompt_chars(request: object) -> int:
    """About how many characters ``request``'s prompt has before rendering (cheap; for
    choosing where to prepare it)."""
    n = len(getattr(request, "prediction", None) or "")
    if isinstance(request, CompletionRequest):
        return n + len(request.prompt) + len(request.suffix or "")
    if isinstance(request, ChatRequest):
        n += sum(len(content_text(m.get("content"))) for m in request.messages)
        return n + (len(str(request.tools)) if request.tools else 0)
    return n


@dataclass(slots=True)
class Prepared:
    """A job's prompt, ready for a slot; ``error`` when preparing it failed (the request's
    fault, or an :class:`EngineCrashedError` for a bug)."""

    job: Job
    prompt: list[int]
    text: str = ""  # the rendered chat (a prompt with images is tokenized from it)
    stops: tuple[str, ...] = ()
    echo: str = ""
    thinking: ThinkingPlan | None = None
    predicted: list[int] | None = None  # OpenAI's ``prediction``, tokenized (drafts)
    error: EngineError | None = None


def prepare(model: Model, job: Job, predictions: bool) -> Prepared:
    """Render and tokenize ``job``'s prompt (any thread). Errors are returned, never raised."""
    r = job.request
    try:
        if isinstance(r, ChatRequest):
            rendered = model.render_chat(r)
            prep = Prepared(job, [], rendered.text, rendered.stop, thinking=rendered.thinking)
            if not r.images:
                prep.prompt = model.tokenize(rendered.text)
        else:
            assert isinstance(r, CompletionRequest)
            prep = Prepared(job, model.completion_tokens(r), echo=r.prompt if r.echo else "")
        prediction = getattr(r, "prediction", None)
        if predictions and prediction:
            prep.predicted = model.tokenize(prediction, False)
        return prep
    except EngineError as e:
        return Prepared(job, [], error=e)
    except Exception as e:  # a bug must not kill the thread: the job fails, the others go on
        log.exception("Preparing the prompt of %s failed unexpectedly", job.id)
        return Prepared(job, [], error=EngineCrashedError(f"The engine failed: {e}"))


class PromptPrep:
    """The prompts of one model's admitted jobs, prepared on a thread of their own.

    Every method but ``wake`` (called from the preparing thread when a result is ready) is
    the engine thread's. ``drain`` drops what waits and returns once nothing is being prepared
    (before the model is freed).
    """

    def __init__(self, model: Model, wake: Callable[[], None], predictions: bool = False) -> None:
        self._model = model
        self._wake = wake
        self._predictions = predictions
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._waiting: list[tuple[int, int, Job]] = []  # a heap: (-priority, order, job)
        self._order = itertools.count()
        self._ready: list[Prepared] = []
        self._busy = False  # a thread is running (preparing, or about to take the next job)
        self._jobs: dict[Job, float] = {}  # submitted, not taken: their seconds in the queue

    def __len__(self) -> int:
        """How many jobs are being prepared (each holds a slot)."""
        return len(self._jobs)

    def submit(self, job: Job, queued: float) -> None:
        self._jobs[job] = queued
        priority = int(getattr(job.request, "priority", 0))
        with self._lock:
            heapq.heappush(self._waiting, (-priority, next(self._order), job))
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._run, name="ember-prompt-prep", daemon=True).start()

    @property
    def has_news(self) -> bool:
        """Whether a prompt is ready or a job was cancelled (``take`` has work)."""
        return bool(self._ready) or any(job.cancelled.is_set() for job in self._jobs)

    def take_cancelled(self) -> list[tuple[Job, float]]:
        """The jobs cancelled while being prepared (their results will be dropped)."""
        gone = [(job, queued) for job, queued in self._jobs.items() if job.cancelled.is_set()]
        for job, _ in gone:
            del self._jobs[job]
        return gone

    def take(self) -> list[tuple[Prepared, float]]:
        """The prompts prepared since the last call, in the order they were finished."""
        with self._lock:
            ready, self._ready = self._ready, []
        return [(p, self._jobs.pop(p.job)) for p in ready if p.job in self._jobs]

    def drain(self) -> list[tuple[Job, float]]:
        """Drop everything and wait for the prompt being prepared, if any (bounded: one
        tokenization); returns the jobs that were being prepared."""
        with self._idle:
            self._waiting.clear()
            while self._busy:
                self._idle.wait()
            self._ready.clear()
        jobs, self._jobs = list(self._jobs.items()), {}
        return jobs

    def _run(self) -> None:
        while True:
            with self._lock:
                job = self._next()
                if job is None:
                    self._busy = False
                    self._idle.notify_all()
                    return
            prepared = prepare(self._model, job, self._predictions)
            with self._lock:
                self._ready.append(prepared)
            self._wake()

    def _next(self) -> Job | None:
        """Under the lock: the next job to prepare (a cancelled one is skipped: the scheduler
        ends it), or None when none waits."""
        while self._waiting:
            job = heapq.heappop(self._waiting)[2]
            if not job.cancelled.is_set():
                return job
        return None
