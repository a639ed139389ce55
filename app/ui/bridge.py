"""Engine events (worker thread) -> Qt signals (GUI thread), with tokens coalesced.

The engine worker calls a job's sink on its own thread. ``JobHandle.sink`` never touches a
widget: it appends streamed text to a buffer under a lock and posts at most one wake-up signal,
queued to the GUI thread. There the buffer is drained no more than ``max_updates_per_second``
times a second, so a model producing 500 tokens/s still causes ~30 view updates a second. The
interval counts from the end of the previous update: an update that takes long (a big chunk
of Markdown) still leaves the GUI that long to handle input and paint before the next one.
Each job has its own handle, so several answers streaming at once are each coalesced.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from app.engine.types import (
    Delta,
    EngineError,
    Event,
    Failed,
    Finished,
    LoadProgress,
    PromptProgress,
    Request,
    Started,
)
from app.engine.worker import EngineWorker, Job, Sink
from app.ui.task_runner import tasks

log = logging.getLogger(__name__)

DEFAULT_UPDATES_PER_SECOND = 30

Submitter = Callable[[Request, Sink], Job]
"""Starts a job somewhere else than the engine worker (a remote provider, say)."""


class JobHandle(QObject):
    """One engine job seen from the GUI thread.

    Signals, all delivered on the GUI thread in this order: ``started()``; ``delta(text,
    n_tokens)`` any number of times (coalesced), or for a load ``progress(fraction)``; then
    exactly one of ``finished(Finished)`` or
    ``failed(Failed)``; then ``done(FinalEvent)``. Threads: ``sink`` runs on the engine worker
    thread; everything else on the GUI thread.
    """

    started = Signal()
    delta = Signal(str, int)
    progress = Signal(float)  # a load job's fraction done
    prompt_progress = Signal(int, int)  # a generation's prompt: tokens read, of how many
    finished = Signal(object)
    failed = Signal(object)
    done = Signal(object)

    # Emitted on the worker thread; queued connections carry them to the GUI thread.
    _started_posted = Signal()
    _delta_posted = Signal()
    _final_posted = Signal(object)

    def __init__(self, min_interval: float, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.job: Job | None = None
        self.final: Finished | Failed | None = None
        self._min_interval = min_interval
        self._lock = threading.Lock()
        self._cancel_requested = False
        self._pending: list[str] = []
        self._pending_tokens = 0
        self._wake_posted = False
        self._last_flush = 0.0
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)  # coarse timers may fire 5% early
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._flush)
        queued = Qt.ConnectionType.QueuedConnection
        self._started_posted.connect(self._on_started_posted, queued)
        self._delta_posted.connect(self._on_delta_posted, queued)
        self._final_posted.connect(self._on_final_posted, queued)

    def cancel(self) -> None:
        with self._lock:
            self._cancel_requested = True
            job = self.job
        if job is not None:
            job.cancel()

    def attach(self, job: Job) -> None:
        """Give the handle its job (any thread); a cancel that came first applies now."""
        with self._lock:
            self.job = job
            cancelled = self._cancel_requested
        if cancelled:
            job.cancel()

    # -- worker thread --------------------------------------------------------------------

    def sink(self, event: Event) -> None:
        if isinstance(event, Delta):
            with self._lock:
                self._pending.append(event.text)
                self._pending_tokens += event.token_count
                if self._wake_posted:
                    return
                self._wake_posted = True
            self._delta_posted.emit()
        elif isinstance(event, Started):
            self._started_posted.emit()
        elif isinstance(event, LoadProgress):
            self.progress.emit(event.fraction)  # queued: the handle lives on the GUI thread
        elif isinstance(event, PromptProgress):
            self.prompt_progress.emit(event.done, event.total)
        elif isinstance(event, Finished | Failed):
            self._final_posted.emit(event)

    def post_failure(self, error: EngineError) -> None:
        """Finish a job that could not even be submitted, through the same signals."""
        self._final_posted.emit(Failed("rejected", error))

    # -- GUI thread -----------------------------------------------------------------------

    @Slot()
    def _on_started_posted(self) -> None:
        self.started.emit()

    @Slot()
    def _on_delta_posted(self) -> None:
        wait = self._min_interval - (time.perf_counter() - self._last_flush)
        if wait <= 0:
            self._flush()
        elif not self._timer.isActive():
            self._timer.start(max(1, round(wait * 1000)))

    @Slot()
    def _flush(self) -> None:
        with self._lock:
            text = "".join(self._pending)
            tokens = self._pending_tokens
            self._pending.clear()
            self._pending_tokens = 0
            self._wake_posted = False
        if not text and not tokens:
            return
        self.delta.emit(text, tokens)
        self._last_flush = time.perf_counter()  # after the receivers' work (see the docstring)

    @Slot(object)
    def _on_final_posted(self, event: Finished | Failed) -> None:
        if self.final is not None:
            return
        self._timer.stop()
        self._flush()
        self.final = event
        if isinstance(event, Failed):
            self.failed.emit(event)
        else:
            self.finished.emit(event)
        self.done.emit(event)


class EngineBridge(QObject):
    """Submits requests to the engine worker and hands back ``JobHandle``s (GUI thread only).

    Keeps every handle alive until its final signal, so a caller may drop its reference.
    """

    def __init__(
        self,
        worker: EngineWorker,
        max_updates_per_second: float = DEFAULT_UPDATES_PER_SECOND,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.worker = worker
        self._min_interval = 1.0 / max_updates_per_second
        self._live: set[JobHandle] = set()

    def submit(self, request: Request, via: Submitter | None = None) -> JobHandle:
        """Start ``request`` on the engine worker, or with ``via`` (e.g. a remote router).

        ``via`` runs on the task runner's network lane: it may read a key from the OS keyring
        or a provider file, which the GUI thread must not wait for. The handle works the same
        either way; a cancel before the job exists cancels it as soon as it does."""
        handle = JobHandle(self._min_interval, self)
        self._live.add(handle)
        handle.done.connect(self._on_handle_done)
        if via is not None:
            tasks().submit(
                partial(_submit_via, via, request, handle),
                lane="network",
                name="start a remote request",
            )
            return handle
        try:
            handle.job = self.worker.submit(request, handle.sink)
        except EngineError as error:
            handle.post_failure(error)
        return handle

    @property
    def live_jobs(self) -> int:
        return len(self._live)

    def cancel_all(self) -> None:
        for handle in list(self._live):
            handle.cancel()

    @Slot(object)
    def _on_handle_done(self, _event: Any) -> None:
        handle = self.sender()
        if isinstance(handle, JobHandle):
            self._live.discard(handle)
            handle.deleteLater()


def _submit_via(via: Submitter, request: Request, handle: JobHandle) -> None:
    try:
        handle.attach(via(request, handle.sink))
    except EngineError as error:
        handle.post_failure(error)
    except Exception as error:  # a broken provider file or keyring: say so, don't hang
        log.exception("Submitting a job failed")
        handle.post_failure(EngineError(f"The request could not be started: {error}"))
