"""EngineWorker: the one thread that owns every loaded model.

Loading, unloading, generating, tokenizing and embedding are all jobs on its queue, so a model
swap never overlaps a generation and a llama.cpp context is never touched by two threads.
Chats and completions run together: the worker admits them, in queue order, into the free slots
of their model's :class:`~app.engine.scheduler.Scheduler` (``LoadParams.n_parallel``) and steps
every scheduler that has work, one batch at a time. Other jobs run between steps, in queue
order, and never wait behind a generation waiting for a slot (the app counts a chat's tokens
before it submits the chat); a load or unload waits until no answer is being written (a model
swap never overlaps a generation). Jobs marked ``priority`` (the app's own chats) go ahead of
waiting API requests, so the app's chat takes the next free slot.

A job has an id, its request, a cancel token and a sink. The sink receives ``Started``,
``Delta`` events and exactly one final event (``Finished`` or ``Failed``), and nothing after
it, even when the final event comes from another thread (a cancel) while events are being
emitted. A job's sink is called by one thread at a time, in the order the events were accepted.
Sinks are called on the worker thread, except for a job cancelled while still queued, whose
final event is sent from the cancelling thread; either way sinks must be quick and thread-safe
(hand events to Qt with a queued signal, to asyncio with ``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from app.engine.draft_model import open_draft
from app.engine.scheduler import Scheduler
from app.engine.types import (
    BadRequestError,
    ChatRequest,
    CompletionRequest,
    EmbeddingRequest,
    EngineCrashedError,
    EngineError,
    Event,
    Failed,
    FinalEvent,
    Finished,
    JobCancelledError,
    LoadParams,
    LoadProgress,
    LoadRequest,
    Model,
    ModelNotLoadedError,
    QueueFullError,
    RenderPromptRequest,
    Request,
    Started,
    Timings,
    TokenizeRequest,
    UnloadRequest,
    Usage,
    engine_model_id,
    new_job_id,
)

log = logging.getLogger(__name__)

Sink = Callable[[Event], None]


class Job:
    """A unit of work on the engine worker. Iterate ``events()`` or pass a sink."""

    def __init__(self, request: Request, sink: Sink | None = None) -> None:
        self.id = new_job_id()
        self.request = request
        self.cancelled = threading.Event()
        self.submitted_at = time.perf_counter()
        self._events: queue.SimpleQueue[Event] | None = None if sink else queue.SimpleQueue()
        self._sink = sink
        self._final: FinalEvent | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self._pending: deque[Event] = deque()  # accepted, not yet delivered
        self._deliverer: int | None = None  # the thread delivering ``_pending``, if any
        self._on_cancel: Callable[[Job], None] | None = None

    # -- consumer side ----------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the job as soon as possible: mid-prompt, between tokens or while queued."""
        self.cancelled.set()
        if self._on_cancel is not None:
            self._on_cancel(self)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def final(self) -> FinalEvent | None:
        """The final event once delivered (``done``), else None."""
        return self._final if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> FinalEvent:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.id} did not finish within {timeout} s")
        assert self._final is not None
        return self._final

    def result(self, timeout: float | None = None) -> Any:
        """The job's result; raises the job's EngineError if it failed."""
        final = self.wait(timeout)
        if isinstance(final, Failed):
            raise final.error
        return final.result

    def events(self, timeout: float | None = None) -> Iterator[Event]:
        """Every event up to and including the final one (only for jobs without a sink)."""
        if self._events is None:
            raise RuntimeError("This job delivers its events to a sink")
        while True:
            event = self._events.get(timeout=timeout)
            yield event
            if isinstance(event, Finished | Failed):
                return

    # -- worker side ------------------------------------------------------------------------

    # Events are accepted under ``_lock`` (nothing once the final one is in) into ``_pending``
    # and delivered outside it by the thread holding the delivery turn (``_deliverer``). So
    # events reach the sink one at a time and in order, nothing follows the final event, and no
    # lock is held while a sink runs. ``finish`` never waits: when another thread is delivering,
    # it leaves the final event to that thread, so a sink may cancel or finish its own job, or
    # wait for a thread that does, without deadlocking. ``emit`` waits for its turn instead
    # (back-pressure: producers cannot outrun the sink); a sink's own emits are queued.

    def emit(self, event: Event) -> None:
        """Deliver a non-final event; dropped once the job has its final event."""
        me = threading.get_ident()
        with self._turn:
            while self._deliverer is not None and self._deliverer != me:
                if self._final is not None:
                    return
                self._turn.wait()
            if self._final is not None:
                return
            self._pending.append(event)
            if self._deliverer == me:  # emitted from inside the sink: delivered next
                return
            self._deliverer = me
        self._deliver_pending()

    def finish(self, event: FinalEvent) -> bool:
        """Deliver the final event; returns False if the job already had one. When another
        thread is delivering an event just now, the final event follows it from that thread,
        after this returns; ``wait``/``done``/``final`` report it once it has been delivered."""
        with self._turn:
            if self._final is not None:
                return False
            self._final = event
            self._pending.append(event)
            if self._deliverer is not None:
                return True
            self._deliverer = threading.get_ident()
        self._deliver_pending()
        return True

    def _deliver_pending(self) -> None:
        """Deliver queued events until none is left; the caller holds the delivery turn."""
        try:
            while True:
                with self._turn:
                    if not self._pending:  # seen empty and turn handed on in one step, so
                        self._deliverer = None  # an event queued meanwhile is not stranded
                        self._turn.notify_all()
                        return
                    event = self._pending.popleft()
                self._deliver(event)
                if event is self._final:
                    self._done.set()
        except BaseException:  # KeyboardInterrupt in a sink, say: hand the turn on
            with self._turn:
                self._deliverer = None
                self._turn.notify_all()
            raise

    def _deliver(self, event: Event) -> None:
        if self._events is not None:
            self._events.put(event)
            return
        assert self._sink is not None
        try:
            self._sink(event)
        except Exception:
            log.exception("An event sink of %s raised; ignoring", self.id)


@dataclass(slots=True)
class _State:
    models: dict[str, Model] = field(default_factory=dict)
    schedulers: dict[str, Scheduler] = field(default_factory=dict)
    last_loaded: str | None = None


# Called while the weights load, with the fraction done; returning False stops the load.
LoadProgressFn = Callable[[float], bool]
ModelFactory = Callable[[LoadRequest, LoadProgressFn], Model]
PROGRESS_STEP = 0.01  # report a load's progress in steps of at least 1%
ENGINE_STACK_BYTES = 16 * 1024 * 1024  # the engine thread's stack


def _default_factory(request: LoadRequest, progress: LoadProgressFn) -> Model:
    from app.engine.llamacpp import LlamaCppModel

    model = LlamaCppModel(request.path, request.params, request.model_id, progress)
    _record_fit(model)
    return model


def _record_fit(model: Any) -> None:
    """Keep what the load took beside its estimate (app/engine/fit_records.py); a record
    that cannot be written never fails the load."""
    from dataclasses import replace

    from app.engine import sizing
    from app.engine.fit_records import FitRecords

    try:
        params = replace(model.params, n_gpu_layers=model.n_gpu_layers)
        estimated = sizing.estimate(model.info, model.n_ctx, params).total_bytes
        FitRecords().add(model.describe(), model.info.file_size, estimated)
    except Exception:
        log.exception("Could not record what loading %s took", model.path)


def _generates(request: Request) -> bool:
    return isinstance(request, ChatRequest | CompletionRequest)


def _priority(request: Request) -> int:
    return int(getattr(request, "priority", 0))


class EngineWorker:
    """Owns the models; admits generations into their schedulers, runs other jobs in order.

    Thread: one daemon thread named ``ember-engine``. Public methods are thread-safe.
    ``max_queue`` bounds the number of waiting jobs; ``submit`` raises QueueFullError beyond it.
    """

    def __init__(self, max_queue: int = 64, model_factory: ModelFactory | None = None) -> None:
        self.max_queue = max_queue
        self._factory = model_factory or _default_factory
        self._queue: deque[Job] = deque()
        self._cond = threading.Condition()
        self._current: Job | None = None  # a job that is not a generation, while it runs
        self._running: dict[Job, Scheduler] = {}  # admitted generations
        self._state = _State()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="ember-engine", daemon=True)
        # llama.cpp's grammar parser recurses once per nested group (~450 bytes of C stack a
        # level, up to the 256 app/engine/gbnf.py allows): give the engine thread the 8 MB a
        # Linux main thread has, not macOS's 512 KB or Windows' 1 MB for other threads.
        previous = threading.stack_size(ENGINE_STACK_BYTES)
        try:
            self._thread.start()
        finally:
            threading.stack_size(previous)

    # -- submitting -------------------------------------------------------------------------

    def submit(self, request: Request, sink: Sink | None = None) -> Job:
        if _generates(request):
            _check_constraint(request)  # a bad grammar or schema fails here, on the caller
        job = Job(request, sink)
        job._on_cancel = self._on_job_cancel
        with self._cond:
            if self._stopping:
                raise EngineCrashedError("The engine is shutting down.")
            if len(self._queue) >= self.max_queue:
                raise QueueFullError(
                    f"The engine has {len(self._queue)} jobs waiting; try again shortly."
                )
            priority = _priority(request)
            if priority > 0:  # ahead of every waiting job of a lower priority
                at = next(
                    (i for i, j in enumerate(self._queue) if _priority(j.request) < priority),
                    len(self._queue),
                )
                self._queue.insert(at, job)
            else:
                self._queue.append(job)
            self._cond.notify()
        return job

    def run(self, request: Request, timeout: float | None = None) -> Any:
        """Submit and wait for the result (for callers that do not stream)."""
        return self.submit(request).result(timeout)

    def load(self, path: str, params: LoadParams | None = None, model_id: str | None = None) -> Job:
        return self.submit(LoadRequest(path, params or LoadParams(), model_id))

    @property
    def busy(self) -> bool:
        return self._current is not None or bool(self._running)

    @property
    def running(self) -> int:
        """How many answers are being written now."""
        return len(self._running)

    def loaded_models(self) -> list[Any]:
        """Descriptions (LoadedModel) of the loaded models; safe from any thread."""
        return [m.describe() for m in list(self._state.models.values())]

    def models_in_use(self, kinds: tuple[type, ...]) -> set[str]:
        """Ids of the models with jobs of ``kinds`` running or waiting (a job naming no model
        counts for the most recently loaded one). Any thread."""
        with self._cond:
            jobs = [j for j in (*self._queue, *self._running, self._current) if j is not None]
            last = self._state.last_loaded
        named = (
            getattr(j.request, "model", None) or last for j in jobs if isinstance(j.request, kinds)
        )
        return {model_id for model_id in named if model_id is not None}

    def _on_job_cancel(self, job: Job) -> None:
        with self._cond:
            queued = job in self._queue
            if queued:
                self._queue.remove(job)
            scheduler = self._running.get(job)
            if self._current is job:
                # Under the lock, so the flag cannot hit the next job by mistake: a new job
                # clears it only after it became current.
                model = self._model_of(job.request)
                if model is not None:
                    model.abort.set()
            self._cond.notify_all()
        if scheduler is not None:
            scheduler.on_cancel(job)
        if queued:
            waited = time.perf_counter() - job.submitted_at
            job.finish(Finished(job.id, "cancelled", timings=Timings(queued_seconds=waited)))

    def _model_of(self, request: Request) -> Model | None:
        model_id = getattr(request, "model", None)
        key = model_id or self._state.last_loaded
        return self._state.models.get(key) if key else None

    # -- lifecycle ----------------------------------------------------------------------------

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel everything, unload every model, stop the thread. Idempotent."""
        with self._cond:
            self._stopping = True
            pending = list(self._queue)
            self._queue.clear()
            current = self._current
            running = list(self._running)
            self._cond.notify_all()
        for job in pending:
            job.cancelled.set()
            job.finish(Finished(job.id, "cancelled"))
        for active in [current, *running]:
            if active is not None:
                active.cancel()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while self._turn():
                pass
        finally:
            for scheduler in list(self._state.schedulers.values()):
                scheduler.cancel_all()
            self._unload_all()

    def _turn(self) -> bool:
        """Admit what can start, run one other job or one step of every busy scheduler.
        False once the worker should stop."""
        with self._cond:
            while not self._queue and not self._running and not self._stopping:
                self._cond.wait()
            if self._stopping and not self._queue and not self._running:
                return False
            admit, other = self._take_jobs()
            if other is not None:
                self._current = other
            elif not admit and not self._stopping and not self._has_steps():
                self._cond.wait()  # only prompts being prepared: woken when one is ready
                return True
        for job, scheduler in admit:
            scheduler.admit(job)
        if other is not None:
            try:
                self._execute(other)
            finally:
                with self._cond:
                    self._current = None
            return True
        for scheduler in {id(s): s for s in self._running.values()}.values():
            try:
                scheduler.step()
            except Exception as e:  # a bug must not kill the worker: fail what it ran
                log.exception("An engine step failed unexpectedly")
                scheduler.fail_all(EngineCrashedError(f"The engine failed: {e}"))
        return True

    def _has_steps(self) -> bool:
        """Under the lock: whether a scheduler has a step to take now."""
        return any(s.has_work for s in self._running.values())

    def _wake(self) -> None:
        """From a thread preparing a prompt: one is ready for its scheduler."""
        with self._cond:
            self._cond.notify_all()

    def _take_jobs(self) -> tuple[list[tuple[Job, Scheduler]], Job | None]:
        """Under the lock: the generations that can start now (in queue order, each while its
        model has a free slot) and at most one other job. A generation waiting for a slot
        holds back nothing behind it (a tokenize, an embedding, a job for another model);
        only a load or unload waiting for the running answers holds back what follows it."""
        admit: list[tuple[Job, Scheduler]] = []
        i = 0
        while i < len(self._queue):
            job = self._queue[i]
            r = job.request
            if not _generates(r):
                if isinstance(r, LoadRequest | UnloadRequest) and self._running:
                    break  # a model swap waits for the answers being written
                del self._queue[i]
                return admit, job
            scheduler = self._scheduler_for(r)
            if scheduler is None:  # no such model: the job fails as a one-off
                del self._queue[i]
                return admit, job
            if not scheduler.has_room(pending=sum(1 for _, s in admit if s is scheduler)):
                i += 1  # it keeps its place; the jobs after it may go
                continue
            del self._queue[i]
            if job.cancelled.is_set():
                waited = time.perf_counter() - job.submitted_at
                job.finish(Finished(job.id, "cancelled", timings=Timings(queued_seconds=waited)))
                continue
            self._running[job] = scheduler
            admit.append((job, scheduler))
        return admit, None

    def _scheduler_for(self, request: Request) -> Scheduler | None:
        key = getattr(request, "model", None) or self._state.last_loaded
        if key is None:
            return None
        return self._state.schedulers.get(key)

    def _finish_generation(self, job: Job, final: FinalEvent) -> None:
        """A scheduler's job is over: free its place, then deliver its final event."""
        with self._cond:
            self._running.pop(job, None)
        job.finish(final)

    def _execute(self, job: Job) -> None:
        queued = time.perf_counter() - job.submitted_at
        if job.cancelled.is_set():
            job.finish(Finished(job.id, "cancelled", timings=Timings(queued_seconds=queued)))
            return
        job.emit(Started(job.id))
        try:
            final = self._dispatch(job)
        except EngineError as e:
            final = Failed(job.id, e)
        except Exception as e:  # a bug or a native failure must not kill the worker
            log.exception("Engine job %s failed unexpectedly", job.id)
            final = Failed(job.id, EngineCrashedError(f"The engine failed: {e}"))
        finally:
            model = self._model_of(job.request)
            if model is not None:
                model.abort.clear()
        if queued:
            final = _with_queue_time(final, queued)
        job.finish(final)

    def _dispatch(self, job: Job) -> FinalEvent:
        r = job.request
        if isinstance(r, LoadRequest):
            return self._do_load(job, r)
        if isinstance(r, UnloadRequest):
            self._do_unload(r.model)
            return Finished(job.id, "stop")
        model = self._require_model(getattr(r, "model", None))
        if isinstance(r, TokenizeRequest):
            tokens = model.tokenize(r.text, r.add_special)
            return Finished(job.id, "stop", Usage(len(tokens)), result=tokens)
        if isinstance(r, EmbeddingRequest):
            return self._do_embed(job, model, r)
        if isinstance(r, RenderPromptRequest):
            return Finished(job.id, "stop", result=model.render_chat(r.chat).text)
        raise BadRequestError(f"Unknown request type {type(r).__name__}")

    def _do_embed(self, job: Job, model: Model, r: EmbeddingRequest) -> FinalEvent:
        try:
            vectors, count = model.embed(r.inputs, r.normalize, job.cancelled.is_set)
        except JobCancelledError:
            return Finished(job.id, "cancelled")
        return Finished(job.id, "stop", Usage(count), result=vectors)

    def _require_model(self, model_id: str | None) -> Model:
        key = model_id or self._state.last_loaded
        if key is None or key not in self._state.models:
            loaded = ", ".join(self._state.models) or "none"
            what = f"Model {model_id!r} is" if model_id else "No model is"
            raise ModelNotLoadedError(f"{what} not loaded (loaded: {loaded}). Load a model first.")
        return self._state.models[key]

    def _do_load(self, job: Job, r: LoadRequest) -> FinalEvent:
        model_id = engine_model_id(r.path, r.model_id)
        if model_id in self._state.models:  # reload with (possibly) new parameters
            self._do_unload(model_id)
        reported = -1.0

        def progress(fraction: float) -> bool:
            nonlocal reported
            if job.cancelled.is_set():
                return False  # llama.cpp stops reading and the load fails: reported as cancelled
            if fraction < reported - PROGRESS_STEP:
                reported = -1.0  # reading again from the start: the CPU after a GPU that failed
            if fraction - reported >= PROGRESS_STEP or (fraction >= 1.0 > reported):
                reported = fraction
                job.emit(LoadProgress(job.id, min(1.0, max(0.0, fraction))))
            return True

        try:
            model = self._factory(r, progress)
        except EngineError:
            if job.cancelled.is_set():
                return Finished(job.id, "cancelled")
            raise
        try:
            drafts = open_draft(model, r.params)
        except BaseException:
            model.close()
            raise
        self._state.models[model.model_id] = model
        self._state.schedulers[model.model_id] = Scheduler(
            model,
            self._finish_generation,
            draft_max=r.params.draft_max,
            drafts=drafts,
            wake=self._wake,
        )
        self._state.last_loaded = model.model_id
        return Finished(job.id, "stop", result=model.describe())

    def _do_unload(self, model_id: str | None) -> None:
        ids = [model_id] if model_id else list(self._state.models)
        for mid in ids:
            scheduler = self._state.schedulers.pop(mid, None)
            if scheduler is not None:
                scheduler.cancel_all()
                if scheduler.drafts is not None:  # the draft model (app.engine.draft_model)
                    scheduler.drafts.close()
            model = self._state.models.pop(mid, None)
            if model is not None:
                model.close()
        if self._state.last_loaded not in self._state.models:
            self._state.last_loaded = next(reversed(self._state.models), None)

    def _unload_all(self) -> None:
        try:
            self._do_unload(None)
        except Exception:
            log.exception("Unloading models at shutdown failed")


def _check_constraint(request: Request) -> None:
    """Convert and bound a request's grammar or JSON schema now, on the submitting thread, so a
    bad or oversized one never takes the engine (the result is cached for the engine)."""
    from app.engine.sampling import grammar_for

    sampling = getattr(request, "sampling", None)
    if sampling is not None and (sampling.grammar or sampling.json_schema is not None):
        grammar_for(sampling)


def _with_queue_time(final: FinalEvent, queued: float) -> FinalEvent:
    t = final.timings
    timings = Timings(
        t.time_to_first_token + queued,
        t.prompt_seconds,
        t.generation_seconds,
        t.prompt_tokens_per_second,
        t.generation_tokens_per_second,
        queued,
    )
    if isinstance(final, Failed):
        return Failed(final.job_id, final.error, final.usage, timings)
    return replace(final, timings=timings)
