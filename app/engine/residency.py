"""Which models stay loaded: a memory budget over all of them, and an idle time-to-live each.

Several models can be loaded at once (an editor's chat, autocomplete and embedding models).
:class:`Residency` watches the :class:`~app.engine.worker.EngineWorker`'s models for the API
gateway and the app:

- **Memory budget.** Before a model is loaded just in time, :meth:`Residency.make_room`
  judges it by the fit rule of the Models page's badge (:func:`app.engine.fit.fit_check`, or
  what an earlier load with the same settings really took, :mod:`app.engine.fit_records`)
  against the budget left by the models that stay: by default the free memory plus what the
  loaded models hold. While it does not fit, the least recently *used* model that was loaded
  just in time is unloaded; never one with answers (or other jobs) running or waiting, and
  never one the person loaded (the app, ``ember serve --model``). If it still does not fit,
  the load is refused at once with :class:`~app.engine.types.ModelTooLargeError` saying which
  busy models hold the memory (it does not wait for them: a client retries, as after any 400).
- **Time-to-live.** A model loaded just in time is unloaded after ``ttl`` seconds unused (a
  request's ``ttl`` / ``keep_alive``, else the default); 0 unloads it when its answers end,
  None keeps it. The clock restarts when an answer ends; a model with an answer running or
  waiting is never unloaded. A daemon thread (``ember-residency``) sleeps until the next
  expiry; :meth:`Residency.expire_due` is that thread's one step, which tests call with a fake
  clock. Nothing here runs on the event loop or the GUI thread but quick reads under a lock.

Thread-safe: every public method may be called from any thread.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    EmbeddingRequest,
    Event,
    LoadedModel,
    LoadParams,
    ModelTooLargeError,
    RenderPromptRequest,
    TokenizeRequest,
    UnloadRequest,
)

if TYPE_CHECKING:
    from app.engine.gguf import GGUFInfo
    from app.engine.worker import EngineWorker, Job

log = logging.getLogger(__name__)

# What a model loaded for an API request keeps by default: LM Studio's JIT models stay 60
# minutes idle (Ollama's default is 5 minutes; `ember serve --model-ttl 5m` is that).
DEFAULT_JIT_TTL: Final = 3600.0
BUSY_POLL_SECONDS: Final = 1.0  # a model with a TTL and an answer running is looked at again
# A request that resolved a model holds it this long, or until it submits its job: the budget
# and the time-to-live leave it loaded while the request plans its answer.
HOLD_SECONDS: Final = 30.0
MAX_SLEEP_SECONDS: Final = 60.0  # the timer looks at least this often (a clock that jumped)
_ANSWERS = (ChatRequest, CompletionRequest, EmbeddingRequest, TokenizeRequest, RenderPromptRequest)


@dataclass(slots=True)
class _Entry:
    last_used: float  # on the residency's clock
    ttl: float | None  # seconds unused before it is unloaded; None: kept
    jit: bool  # loaded for a request: the budget may unload it for another
    held_until: float = 0.0  # resolved by a request that has not submitted its job yet


@dataclass(frozen=True, slots=True)
class Resident:
    """One loaded model as ``ember ps``, ``/api/ps``, ``/v1/models`` and the app show it."""

    model: LoadedModel
    memory_bytes: int  # what llama.cpp allocated, else the estimate
    busy: bool  # answers (or other jobs) running or waiting
    ttl: float | None  # None: stays loaded
    expires_at: float | None  # seconds since the epoch; None: stays loaded
    jit: bool  # loaded just in time for a request (the budget may unload it)


@dataclass(frozen=True, slots=True)
class Room:
    """What :meth:`Residency.make_room` decided: the models it unloads for the new one."""

    evicted: tuple[str, ...]
    needed_bytes: int
    room_bytes: int  # the budget left for the new model once they are gone


def models_in_use(worker: EngineWorker) -> set[str]:
    """Ids of the models with answers, embeddings or tokenizing running or waiting."""
    return worker.models_in_use(_ANSWERS)


class Residency:
    """The loaded models' last use, time-to-live and memory, for one engine worker.

    ``budget_bytes``: the memory all loaded models may hold together (None: the free memory
    plus what they hold now). ``clock``: monotonic seconds (tests pass a fake one);
    ``wall``: seconds since the epoch, for showing when a model expires. ``timer``: run the
    thread that unloads expired models (off: the owner calls :meth:`expire_due`).
    """

    def __init__(
        self,
        worker: EngineWorker,
        *,
        budget_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        available: Callable[[], int] | None = None,
        timer: bool = True,
    ) -> None:
        self.worker = worker
        self.budget_bytes = budget_bytes
        self._clock = clock
        self._wall = wall
        self._available = available
        self._cond = threading.Condition()
        self._entries: dict[str, _Entry] = {}
        self._unloading: set[str] = set()
        self._pending: dict[str, int] = {}  # loads decided but not done: their bytes
        self._thread: threading.Thread | None = None
        self._closed = not timer  # no timer thread: the owner calls expire_due()

    # -- what requests and loads tell it -----------------------------------------------------

    def track(self, model_id: str, *, ttl: float | None, jit: bool) -> None:
        """A model was loaded: just in time for a request (``jit``) or by the person."""
        with self._cond:
            self._pending.pop(model_id, None)
            self._entries[model_id] = _Entry(self._clock(), _ttl(ttl), jit)
            self._cond.notify_all()
        self._ensure_thread()

    def requested(self, model_id: str, ttl: float | None) -> None:
        """A request uses ``model_id``; its ``ttl`` (if given) applies to a model loaded just
        in time, never to one the person loaded."""
        with self._cond:
            entry = self._entries.get(model_id)
            if entry is None:
                return
            entry.last_used = self._clock()
            entry.held_until = entry.last_used + HOLD_SECONDS
            if ttl is not None and entry.jit:
                entry.ttl = _ttl(ttl)
            self._cond.notify_all()

    def touch(self, model_id: str | None) -> None:
        """An answer started or ended on ``model_id`` (the engine knows it from now on): its
        idle clock starts again."""
        if model_id is None:
            return
        with self._cond:
            entry = self._entries.get(model_id)
            if entry is not None:
                entry.last_used = self._clock()
                entry.held_until = 0.0
                self._cond.notify_all()

    def load_failed(self, model_id: str) -> None:
        with self._cond:
            self._pending.pop(model_id, None)

    @property
    def unloading(self) -> set[str]:
        """Models an unload was submitted for and that are not gone yet."""
        with self._cond:
            return set(self._unloading)

    # -- what is loaded ---------------------------------------------------------------------

    def snapshot(self) -> list[Resident]:
        """The loaded models (the most recently loaded last), each with its memory and expiry.
        Reads GGUF headers for models llama.cpp did not report allocations for: not on the
        event loop."""
        loaded = self.worker.loaded_models()
        busy = models_in_use(self.worker)
        with self._cond:
            entries = {m.model_id: self._entries.get(m.model_id) for m in loaded}
            now, wall = self._clock(), self._wall()
        out = []
        for m in loaded:
            entry = entries[m.model_id]
            ttl = entry.ttl if entry is not None else None
            expires = None
            if entry is not None and ttl is not None:
                idle_from = now if m.model_id in busy else entry.last_used
                expires = wall + max(0.0, idle_from + ttl - now)
            jit = entry.jit if entry is not None else False
            out.append(Resident(m, memory_of(m), m.model_id in busy, ttl, expires, jit))
        return out

    # -- the memory budget -------------------------------------------------------------------

    def make_room(self, path: str, params: LoadParams, model_id: str) -> Room:
        """Before loading ``path`` as ``model_id``: unload the least recently used idle models
        loaded just in time until it fits the budget (the badge's rule). Raises
        ModelTooLargeError (unless ``params.force``) when it cannot fit without unloading a
        busy model or one the person loaded. Reads the GGUF header: not on the event loop."""
        from app.engine import fit, gguf
        from app.engine.gguf_reader import GGUFError

        try:
            info = gguf.read_gguf(path)
        except GGUFError:  # no such file, not a GGUF: the load itself says what is wrong
            return Room((), 0, 0)
        n_ctx = params.n_ctx or _default_context(info)
        loaded = [m for m in self.worker.loaded_models() if m.model_id != model_id]
        busy = models_in_use(self.worker)
        with self._cond:
            loaded = [m for m in loaded if m.model_id not in self._unloading]
            held = sum(memory_of(m) for m in loaded)
            held += sum(b for mid, b in self._pending.items() if mid != model_id)
            order = sorted(
                (m for m in loaded if self._evictable(m.model_id, busy)),
                key=lambda m: self._entries[m.model_id].last_used,
            )
            jit = {mid for mid, e in self._entries.items() if e.jit}
        budget = self.budget_bytes
        room = (budget if budget is not None else self._free() + held) - held
        needed = _needed(info, path, replace(params, n_ctx=n_ctx), n_ctx)
        evicted: list[LoadedModel] = []
        while needed > room and order:
            victim = order.pop(0)
            evicted.append(victim)
            room += memory_of(victim)
        verdict = fit.fit_for_load(info, params, available_ram=max(0, room))
        if needed > room and verdict.level == "wont_fit" and not params.force:
            raise _too_large(verdict, loaded, busy, jit)
        for victim in evicted:
            log.info("Unloading %s to make room for %s", victim.model_id, model_id)
            self.unload(victim.model_id)
        with self._cond:
            self._pending[model_id] = needed
        return Room(tuple(m.model_id for m in evicted), needed, room)

    def _evictable(self, model_id: str, busy: set[str]) -> bool:
        entry = self._entries.get(model_id)
        # a model a request resolved a moment ago (its job not submitted yet) is the most
        # recently used: it goes last
        return entry is not None and entry.jit and model_id not in busy

    def _free(self) -> int:
        if self._available is not None:
            return self._available()
        from app.engine.sizing import available_memory

        return available_memory()

    # -- unloading ---------------------------------------------------------------------------

    def unload(self, model_id: str, sink: Callable[[Event], None] | None = None) -> Job:
        """Unload a model (after the answers being written, as every unload)."""
        with self._cond:
            self._unloading.add(model_id)
            self._entries.pop(model_id, None)

        def done(event: Event) -> None:
            from app.engine.types import Failed, Finished

            if isinstance(event, Finished | Failed):
                with self._cond:
                    self._unloading.discard(model_id)
            if sink is not None:
                sink(event)

        return self.worker.submit(UnloadRequest(model_id), done)

    def expire_due(self) -> list[str]:
        """Unload the models whose time-to-live ran out (the timer thread's one step);
        returns their ids. A busy model's clock starts again instead."""
        loaded = {m.model_id for m in self.worker.loaded_models()}
        busy = models_in_use(self.worker)
        due = []
        with self._cond:
            now = self._clock()
            for model_id in list(self._entries):
                entry = self._entries[model_id]
                if model_id not in loaded and model_id not in self._pending:
                    del self._entries[model_id]  # unloaded by someone else
                elif entry.ttl is None or model_id not in loaded:
                    continue
                elif model_id in busy:
                    entry.last_used = now
                elif now >= max(entry.last_used + entry.ttl, entry.held_until):
                    due.append(model_id)
        for model_id in due:
            log.info("Unloading %s: unused for its time-to-live", model_id)
            self.unload(model_id)
        return due

    def _next_wake(self, busy: set[str]) -> float | None:
        """Under the lock: seconds until the timer should look again (None: no model has a
        time-to-live). A busy model's clock starts again, and it is looked at shortly."""
        now = self._clock()
        waits = []
        for model_id, entry in self._entries.items():
            if entry.ttl is None:
                continue
            if model_id in busy:
                entry.last_used = now
                waits.append(BUSY_POLL_SECONDS)
            else:
                waits.append(max(entry.last_used + entry.ttl, entry.held_until) - now)
        return max(0.0, min(*waits, MAX_SLEEP_SECONDS)) if waits else None

    # -- the timer thread --------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        with self._cond:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(target=self._run, name="ember-residency", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Have the timer look again now (tests, after moving a fake clock)."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            busy = models_in_use(self.worker)  # the worker's lock, never inside ours
            with self._cond:
                if self._closed:
                    return
                wait = self._next_wake(busy)
                if wait is None or wait > 0:
                    self._cond.wait(wait)  # woken by a use, a new TTL, close() or the time
                    continue
            try:
                self.expire_due()
            except Exception:  # a failure here must not end the timer
                log.exception("Checking the models' time-to-live failed")


def ttl_setting(value: object) -> float | None:
    """The ``server.model_ttl`` setting (or ``--model-ttl``) as a time-to-live: None keeps
    models; a value that is no duration (a hand-edited settings file) is the default."""
    from app.engine.durations import DurationError, seconds_of

    try:
        seconds = seconds_of(value)
    except DurationError:
        log.warning("server.model_ttl %r is no duration; using %s s", value, DEFAULT_JIT_TTL)
        seconds = None
    return _ttl(DEFAULT_JIT_TTL if seconds is None else seconds)


def _ttl(ttl: float | None) -> float | None:
    return None if ttl is None or ttl < 0 else float(ttl)


def _default_context(info: GGUFInfo) -> int:
    from app.engine.sizing import default_context

    return default_context(info)


def memory_of(model: LoadedModel) -> int:
    """What a loaded model holds: llama.cpp's own figures, else the estimate for its file."""
    allocated = model.allocated_ram + model.allocated_gpu
    if allocated > 0:
        return allocated
    try:
        st = os.stat(model.path)
        return _estimate(model.path, st.st_size, st.st_mtime_ns, model.n_ctx, model.params)
    except Exception:  # an unreadable file: counts as its size
        try:
            return os.path.getsize(model.path)
        except OSError:
            return 0


@functools.lru_cache(maxsize=64)
def _estimate(path: str, _size: int, _mtime: int, n_ctx: int, params: LoadParams) -> int:
    from app.engine import gguf, sizing

    return sizing.estimate(gguf.read_gguf(path), n_ctx, params).total_bytes


def _needed(info: GGUFInfo, path: str, params: LoadParams, n_ctx: int) -> int:
    """Bytes a load of ``path`` with ``params`` (its context set) takes: measured at an
    earlier load with the same settings when there is a record, else the badge's estimate."""
    from app.engine import sizing
    from app.engine.fit_records import FitRecords

    layers = params.n_gpu_layers if params.n_gpu_layers >= 0 else 0
    try:
        measured = FitRecords().get(path, info.file_size or 0, params, n_ctx, layers)
    except Exception:
        measured = None
    if measured is not None:
        return measured.total
    return sizing.estimate(info, n_ctx, params).total_bytes


def _too_large(
    verdict: Any, loaded: list[LoadedModel], busy: set[str], jit: set[str]
) -> ModelTooLargeError:
    from app.engine.gguf_format import human_bytes

    kept = [
        f"{m.model_id} ({human_bytes(memory_of(m))}, "
        + ("answering" if m.model_id in busy else "loaded in the app")
        + ")"
        for m in loaded
        if m.model_id in busy or m.model_id not in jit
    ]
    held = f" Kept loaded: {', '.join(kept)}." if kept else ""
    hint = (
        " Try again when their answers end, or unload one (`ember ps` lists them)." if kept else ""
    )
    return ModelTooLargeError(
        f"{verdict.message}{held}{hint}",
        fits_n_ctx=verdict.max_context or None,
        needed_bytes=verdict.needed_bytes,
        available_bytes=verdict.available_bytes,
    )
