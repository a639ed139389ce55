"""The gateway between HTTP routes (asyncio, on the server thread) and the EngineWorker.

It resolves the model a request names (loading library models just in time), submits jobs to
the same worker the GUI uses, and hands each job's events to the event loop with
``loop.call_soon_threadsafe``. It bounds how many API jobs may wait in the engine's queue, so
API clients cannot crowd out the GUI, and can cancel every API job at once (server stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from app.engine import gguf
from app.engine.residency import DEFAULT_JIT_TTL, Residency, Resident
from app.engine.sizing import MIN_N_CTX
from app.engine.types import (
    EngineError,
    Event,
    Failed,
    FinalEvent,
    Finished,
    LoadedModel,
    LoadParams,
    LoadRequest,
    QueueFullError,
    Request,
    Started,
)
from app.engine.worker import EngineWorker, Job
from app.server.catalog import (
    CatalogError,
    CatalogModel,
    ModelCatalog,
    ModelMeta,
    StaticCatalog,
)
from app.server.errors import APIError, model_not_found

log = logging.getLogger(__name__)


# ---- model metadata -------------------------------------------------------------------------


@functools.lru_cache(maxsize=128)
def _read_meta(path: str, _size: int, _mtime_ns: int) -> ModelMeta:
    info = gguf.read_gguf(path)
    return ModelMeta(
        info.vocab_size, info.context_length, info.has_fim, info.chat_template, info.architecture
    )


def model_meta(path: str) -> ModelMeta:
    """The header summary of a model file (cached by path, size and mtime); empty if unreadable."""
    try:
        st = os.stat(path)
        return _read_meta(path, st.st_size, st.st_mtime_ns)
    except (OSError, gguf.GGUFError):
        return ModelMeta()


@dataclass(frozen=True, slots=True)
class ModelView:
    """One model as ``GET /v1/models`` shows it."""

    id: str
    created: int
    owned_by: str
    loaded: LoadedModel | None
    context_length: int | None  # in use when loaded, else the trained length
    max_context_length: int | None
    capabilities: tuple[str, ...]
    resident: Resident | None = None  # when loaded: its memory and when it is unloaded


def capabilities(meta: ModelMeta, loaded: LoadedModel | None = None) -> tuple[str, ...]:
    if meta.embedding_only:
        return ("embeddings",)
    template = (loaded.chat_template if loaded else None) or meta.chat_template or ""
    caps = ["chat", "completion", "embeddings", "tool_calls"]
    if meta.has_fim or (loaded is not None and loaded.has_fim):
        caps.append("fim")
    if "<think>" in template:
        caps.append("reasoning")
    return tuple(caps)


# ---- job events on the event loop -----------------------------------------------------------


class JobStream:
    """One engine job's events, delivered to the event loop that submitted it.

    ``sink`` runs on the worker thread; it only puts the event in an inbox and, unless a drain
    is already scheduled, schedules one on the loop: the events of a burst (several answers, a
    busy loop) cross to the loop in one call. Iterating yields every event up to and including
    the final one.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_left_queue: Callable[[], None],
        on_final: Callable[[JobStream], None],
    ) -> None:
        self._loop = loop
        self._inbox: list[Event] = []  # from the worker thread, under _lock
        self._lock = threading.Lock()
        self._draining = False  # a drain is scheduled on the loop
        self._events: deque[Event] = deque()  # on the loop
        self._waiter: asyncio.Future[None] | None = None
        self._on_left_queue = on_left_queue
        self._on_final = on_final
        self._left_queue = False
        self.job: Job | None = None
        self.final: FinalEvent | None = None

    def sink(self, event: Event) -> None:
        if not self._left_queue and isinstance(event, Started | Finished | Failed):
            self._left_queue = True
            self._on_left_queue()
        if isinstance(event, Finished | Failed):
            self._on_final(self)
        with self._lock:
            self._inbox.append(event)
            if self._draining:
                return
            self._draining = True
        # A closed loop means the server is gone and nobody listens.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            self._events.extend(self._inbox)
            self._inbox.clear()
            self._draining = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self) -> Event:
        while not self._events:
            await self._wait(None)
        return self._take()

    async def next_within(self, seconds: float) -> Event | None:
        """The next event, or None when none came within ``seconds`` (a future and a timer:
        cheaper per token than ``asyncio.wait_for``, which makes a task)."""
        if not self._events:
            await self._wait(seconds)
            if not self._events:
                return None
        return self._take()

    async def _wait(self, seconds: float | None) -> None:
        waiter = self._waiter = self._loop.create_future()
        timer = None if seconds is None else self._loop.call_later(seconds, _wake, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def _take(self) -> Event:
        event = self._events.popleft()
        if isinstance(event, Finished | Failed):
            self.final = event
        return event

    async def __aiter__(self) -> AsyncIterator[Event]:
        while self.final is None:
            yield await self.next()

    def cancel(self) -> None:
        if self.job is not None and not self.job.done:
            self.job.cancel()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class LoadHandle:
    """A load job that several requests (and threads) may wait for."""

    def __init__(
        self, model_id: str, on_done: Callable[[LoadHandle], None], jit: bool = False
    ) -> None:
        self.model_id = model_id
        self.jit = jit  # loaded just in time for a request (the residency tracks it)
        self.job: Job | None = None
        self._on_done = on_done
        self._lock = threading.Lock()
        self._final: FinalEvent | None = None
        self._done = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[FinalEvent]]] = []

    def sink(self, event: Event) -> None:
        if not isinstance(event, Finished | Failed):
            return
        loaded = event.result if isinstance(event, Finished) else None
        if isinstance(loaded, LoadedModel) and loaded.notice:  # the CPU took over from the GPU
            log.warning("%s: %s", self.model_id, loaded.notice)
        with self._lock:
            self._final = event
            waiters, self._waiters = self._waiters, []
        self._done.set()
        self._on_done(self)
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, event)

    @property
    def final(self) -> FinalEvent | None:
        return self._final

    def wait(self, timeout: float | None = None) -> LoadedModel:
        """Block until loaded (any thread); raises the load's EngineError."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"Loading {self.model_id} took longer than {timeout} s")
        assert self._final is not None
        return _loaded_or_raise(self._final)

    async def wait_async(self) -> LoadedModel:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[FinalEvent] = loop.create_future()
        with self._lock:
            if self._final is not None:
                future.set_result(self._final)
            else:
                self._waiters.append((loop, future))
        return _loaded_or_raise(await asyncio.shield(future))


def _settle(future: asyncio.Future[FinalEvent], event: FinalEvent) -> None:
    if not future.done():
        future.set_result(event)


def _loaded_or_raise(final: FinalEvent) -> LoadedModel:
    if isinstance(final, Failed):
        raise final.error
    if not isinstance(final.result, LoadedModel):
        raise EngineError("Loading the model was cancelled.")
    return final.result


# ---- the gateway ----------------------------------------------------------------------------


class Gateway:
    """Shared by the server's routes; thread-safe where noted.

    ``catalog``: the models a request may name (None: only loaded ones). ``load_params``: how
    just-in-time loads are made. ``max_waiting``: API jobs allowed to wait in the engine queue.
    ``residency``: which models stay loaded (app/engine/residency.py: the memory budget a
    model loaded just in time makes room in, unloading the least recently used idle ones,
    never a model the GUI or ``--model`` loaded; the idle time-to-live). ``model_ttl``: the
    seconds a model loaded just in time stays unused before it is unloaded (None: kept);
    a request's ``ttl`` / ``keep_alive`` overrides it for the model it loads or uses.
    ``projectors``: a model loaded just in time takes the vision projector its catalog entry
    names (``ember serve --no-mmproj`` turns that off).
    """

    def __init__(
        self,
        worker: EngineWorker,
        catalog: ModelCatalog | None = None,
        load_params: LoadParams | None = None,
        *,
        max_waiting: int = 16,
        residency: Residency | None = None,
        model_ttl: float | None = DEFAULT_JIT_TTL,
        projectors: bool = True,
    ) -> None:
        self.worker = worker
        self.catalog: ModelCatalog = catalog if catalog is not None else StaticCatalog()
        self.load_params = load_params or LoadParams()
        self.max_waiting = max_waiting
        self.residency = residency if residency is not None else Residency(worker)
        self.model_ttl = model_ttl
        self.projectors = projectors
        self._lock = threading.Lock()
        self._waiting = 0
        self._active: set[JobStream] = set()
        self._loading: dict[str, LoadHandle] = {}

    # -- models ---------------------------------------------------------------------------

    def loaded(self) -> list[LoadedModel]:
        """Loaded models, the most recently loaded last (not those being unloaded: a request
        for one loads it again). Any thread."""
        unloading = self.residency.unloading
        return [m for m in self.worker.loaded_models() if m.model_id not in unloading]

    def load(
        self, path: str, model_id: str, params: LoadParams | None = None, *, jit: bool = False
    ) -> LoadHandle:
        """Load a model on the worker; requests naming ``model_id`` meanwhile wait for it.
        ``jit``: for a request (it gets the default time-to-live and may be unloaded for
        another), else as ``--model`` (kept). Any thread. Raises QueueFullError when the
        engine queue is full."""
        with self._lock:
            pending = self._loading.get(model_id)
            if pending is not None:
                return pending
            handle = LoadHandle(model_id, self._on_load_done, jit)
            self._loading[model_id] = handle
        try:
            handle.job = self.worker.submit(
                LoadRequest(path, params or self.load_params, model_id), handle.sink
            )
        except EngineError:
            with self._lock:
                self._loading.pop(model_id, None)
            if jit:
                self.residency.load_failed(model_id)
            raise
        return handle

    def _on_load_done(self, handle: LoadHandle) -> None:
        """On the worker thread, before the waiters hear: a model loaded just in time gets
        its default time-to-live (tracked even when every request waiting for it is gone)."""
        with self._lock:
            if self._loading.get(handle.model_id) is handle:
                del self._loading[handle.model_id]
        if handle.jit:
            final = handle.final
            loaded = final.result if isinstance(final, Finished) else None
            if isinstance(loaded, LoadedModel):
                self.residency.track(loaded.model_id, ttl=self.model_ttl, jit=True)
            else:
                self.residency.load_failed(handle.model_id)

    async def resolve(
        self,
        name: str | None,
        n_ctx: int | None = None,
        force: bool = False,
        ttl: float | None = None,
    ) -> LoadedModel:
        """The loaded model a request means, loading a library model if needed (with a
        context of ``n_ctx`` tokens when given: Ollama's ``num_ctx``; a loaded model keeps its
        own; ``force``: even if the estimate says it does not fit, as ``ember serve --force``
        does for every load; ``ttl``: the request's time-to-live for a model loaded just in
        time, seconds, 0 unloads it when idle, negative keeps it). Raises APIError (no model,
        unknown model) or EngineError (the load failed; ModelTooLargeError when refused for
        memory, also by the budget over the loaded models)."""
        name = (name or "").strip()
        model = await self._resolve(name, n_ctx, force, ttl)
        self.residency.requested(model.model_id, ttl)
        return model

    async def _resolve(
        self, name: str, n_ctx: int | None, force: bool, ttl: float | None
    ) -> LoadedModel:
        loaded = self.loaded()
        if not name:
            return await self._default_model(loaded)
        hit = _match_loaded(name, loaded)
        if hit is not None:
            return hit
        pending = self._pending(name)
        if pending is not None:
            return await pending.wait_async()
        try:
            entry = await asyncio.to_thread(self.catalog.resolve, name)
        except CatalogError as e:
            raise model_not_found(name, str(e)) from e
        if entry is None:
            raise model_not_found(name)
        loaded = self.loaded()
        hit = _match_loaded(entry.id, loaded)
        if hit is None:  # the same file may be loaded under another id (realpath: off the loop)
            hit = await asyncio.to_thread(_loaded_file, entry.path, loaded)
        if hit is not None:
            return hit
        return await self._load_just_in_time(entry, n_ctx, force, ttl)

    async def _default_model(self, loaded: list[LoadedModel]) -> LoadedModel:
        if loaded:
            return loaded[-1]
        with self._lock:
            pending = next(reversed(self._loading.values()), None)
        if pending is not None:
            return await pending.wait_async()
        raise APIError(
            400,
            "No model is loaded and the request names none. Set `model` to one of the models "
            "GET /v1/models lists (it is loaded on first use), or load one in Ember first.",
            code="model_not_loaded",
            param="model",
        )

    def _pending(self, model_id: str) -> LoadHandle | None:
        with self._lock:
            return self._loading.get(model_id)

    async def _load_just_in_time(
        self,
        entry: CatalogModel,
        n_ctx: int | None = None,
        force: bool = False,
        ttl: float | None = None,
    ) -> LoadedModel:
        pending = self._pending(entry.id)
        if pending is None:
            params = replace(self.load_params, mmproj=entry.mmproj if self.projectors else None)
            if n_ctx is not None:
                params = replace(params, n_ctx=max(MIN_N_CTX, n_ctx))
            if force:
                params = replace(params, force=True)
            # the budget: idle models loaded just in time go first (off the loop: headers)
            await asyncio.to_thread(self.residency.make_room, entry.path, params, entry.id)
            log.info("Loading %s just in time for a request", entry.id)
            pending = self._pending(entry.id) or self.load(entry.path, entry.id, params, jit=True)
        return await pending.wait_async()  # resolve() applies the request's ttl

    async def models(self) -> list[ModelView]:
        """The catalog's models and the loaded ones (loaded first), each file once: a library
        model loaded under another id (a file opened in the app, a link to it) is listed by
        the id it is loaded as (requests naming its library id still reach it)."""
        return await asyncio.to_thread(self._models)  # file system work: not on the event loop

    def _models(self) -> list[ModelView]:
        entries = self.catalog.list_models()
        loaded = self.loaded()
        paths = {e.path for e in entries} | {m.path for m in loaded}
        real = {p: os.path.realpath(p) for p in paths}  # each path resolved once
        views: dict[str, ModelView] = {}
        residents = {r.model.model_id: r for r in self.residency.snapshot()}
        for m in reversed(loaded):
            entry = next((e for e in entries if e.id == m.model_id), None) or next(
                (e for e in entries if real[e.path] == real[m.path]), None
            )
            views[m.model_id] = ModelView(
                id=m.model_id,
                created=entry.created if entry else _mtime(m.path),
                owned_by=entry.owned_by if entry else "local",
                loaded=m,
                context_length=m.n_ctx,
                max_context_length=m.n_ctx_train,
                capabilities=capabilities(model_meta(m.path), m),
                resident=residents.get(m.model_id),
            )
        loaded_files = {real[m.path] for m in loaded}
        for e in entries:
            if e.id in views or real[e.path] in loaded_files:
                continue  # a loaded file is listed above, by the id it is loaded as
            meta = e.meta if e.meta is not None else model_meta(e.path)
            trained = e.context_length or meta.context_length
            views[e.id] = ModelView(
                id=e.id,
                created=e.created,
                owned_by=e.owned_by,
                loaded=None,
                context_length=trained,
                max_context_length=trained,
                capabilities=capabilities(meta),
            )
        return list(views.values())

    # -- jobs -----------------------------------------------------------------------------

    def submit(self, request: Request) -> JobStream:
        """Submit a job whose events arrive on the running loop. Raises QueueFullError."""
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise QueueFullError(
                    f"{self._waiting} API requests are already waiting for the engine; "
                    "try again shortly."
                )
            self._waiting += 1
        stream = JobStream(asyncio.get_running_loop(), self._left_queue, self._finished)
        with self._lock:
            self._active.add(stream)
        try:
            stream.job = self.worker.submit(request, stream.sink)
        except BaseException:
            with self._lock:
                self._waiting -= 1
                self._active.discard(stream)
            raise
        self.residency.touch(getattr(request, "model", None))  # the engine knows it now
        return stream

    def _left_queue(self) -> None:
        with self._lock:
            self._waiting -= 1

    def _finished(self, stream: JobStream) -> None:
        with self._lock:
            self._active.discard(stream)
        if stream.job is not None:  # the idle clock starts when the answer ends
            self.residency.touch(getattr(stream.job.request, "model", None))

    @property
    def active_jobs(self) -> int:
        with self._lock:
            return len(self._active)

    def cancel_all(self) -> None:
        """Cancel every API job (queued or running). Any thread."""
        with self._lock:
            streams = list(self._active)
        for stream in streams:
            stream.cancel()


def _ignore(_event: Event) -> None:
    pass


def _mtime(path: str) -> int:
    try:
        return int(os.stat(path).st_mtime)
    except OSError:
        return 0


def _loaded_file(path: str, loaded: list[LoadedModel]) -> LoadedModel | None:
    real = os.path.realpath(path)
    return next((m for m in reversed(loaded) if os.path.realpath(m.path) == real), None)


def _match_loaded(name: str, loaded: list[LoadedModel]) -> LoadedModel | None:
    """A loaded model by id, else by its file's path, name or stem (most recent first)."""
    for m in reversed(loaded):
        if m.model_id == name:
            return m
    for m in reversed(loaded):
        p = Path(m.path)
        if name in (m.path, p.name, p.name.removesuffix(".gguf")):
            return m
    return None
