"""Background work for the Models page: Hub requests, header reads, library scans.

``Runner(max_threads)`` runs blocking functions on daemon threads (at most ``max_threads`` at
once, the rest wait in order) and calls ``callback(result, error)`` on the GUI thread through a
queued signal. Daemon threads, not a QThreadPool: a Hub that does not answer must never keep
the app from quitting (a QThreadPool waits for its threads when it is destroyed).

A runner with one thread serialises its jobs: the page uses one for the ``Library``, so its
scans and imports run in order. Callbacks of a deleted runner are dropped.

Latest wins: a job submitted with a ``key`` (e.g. ``"search"``) supersedes the earlier jobs
with that key. Those still waiting are dropped unrun, and those already running (a thread cannot
be stopped) finish but their callbacks are not called, so an older answer never arrives after a
newer one. ``cancel_waiting()`` drops every job not started yet (a repository's fit badges when
another repository is opened). Dropped jobs never call back. Everything here runs on the GUI
thread except the jobs themselves, and nothing waits.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]


@dataclass(frozen=True, slots=True)
class _Job:
    fn: Callable[[], Any]
    callback: Callback
    key: Hashable | None
    ticket: int


class Runner(QObject):
    """Signals: ``_finished`` (internal, crosses from a worker thread to the GUI thread)."""

    _finished = Signal(object, object, object)  # _Job, result, error

    def __init__(self, max_threads: int, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._max = max(1, max_threads)
        self._name = name
        self._waiting: deque[_Job] = deque()
        self._running = 0
        self._tickets = itertools.count(1)
        self._latest: dict[Hashable, int] = {}  # key -> ticket of the job that may call back
        self._finished.connect(self._on_finished)

    @property
    def busy(self) -> bool:
        return self._running > 0 or bool(self._waiting)

    def submit(
        self, fn: Callable[[], Any], callback: Callback, key: Hashable | None = None
    ) -> None:
        """Run ``fn()`` off the GUI thread; ``callback(result, error)`` later on it. With a
        ``key``, this job supersedes the earlier ones with the same key (the module docstring)."""
        job = _Job(fn, callback, key, next(self._tickets))
        if key is not None:
            self._latest[key] = job.ticket
            if any(waiting.key == key for waiting in self._waiting):
                self._waiting = deque(w for w in self._waiting if w.key != key)
        self._waiting.append(job)
        self._start_waiting()

    def cancel_waiting(self) -> int:
        """Drop every job that has not started (they never call back); returns how many."""
        dropped, self._waiting = list(self._waiting), deque()
        for job in dropped:
            if job.key is not None and self._latest.get(job.key) == job.ticket:
                del self._latest[job.key]
        return len(dropped)

    def _start_waiting(self) -> None:
        while self._running < self._max and self._waiting:
            job = self._waiting.popleft()
            self._running += 1
            thread = threading.Thread(
                target=self._work, args=(job,), name=f"ember-{self._name}", daemon=True
            )
            thread.start()

    def _work(self, job: _Job) -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = job.fn()
        except Exception as e:
            log.debug("Background job failed", exc_info=True)
            error = e
        with contextlib.suppress(RuntimeError):  # the runner (and its page) are gone
            self._finished.emit(job, result, error)

    @Slot(object, object, object)
    def _on_finished(self, job: _Job, result: Any, error: BaseException | None) -> None:
        self._running -= 1
        self._start_waiting()
        if job.key is not None:
            if self._latest.get(job.key) != job.ticket:
                return  # superseded while it ran: a newer answer is coming
            del self._latest[job.key]
        try:
            job.callback(result, error)
        except RuntimeError:  # the widget it would update was deleted meanwhile
            log.debug("A Models page callback found its widget deleted", exc_info=True)
