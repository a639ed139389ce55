"""Background work for the Models page: Hub requests, header reads, library scans.

``Runner(max_threads)`` runs blocking functions on daemon threads (at most ``max_threads`` at
once, the rest wait in order) and calls ``callback(result, error)`` on the GUI thread through a
queued signal. Daemon threads, not a QThreadPool: a Hub that does not answer must never keep
the app from quitting (a QThreadPool waits for its threads when it is destroyed).

A runner with one thread serialises its jobs: the page uses one for the ``Library``, so its
scans and imports run in order. Callbacks of a deleted runner are dropped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]


class Runner(QObject):
    """Signals: ``_finished`` (internal, crosses from a worker thread to the GUI thread)."""

    _finished = Signal(object, object, object)  # callback, result, error

    def __init__(self, max_threads: int, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._max = max(1, max_threads)
        self._name = name
        self._waiting: deque[tuple[Callable[[], Any], Callback]] = deque()
        self._running = 0
        self._finished.connect(self._on_finished)

    @property
    def busy(self) -> bool:
        return self._running > 0 or bool(self._waiting)

    def submit(self, fn: Callable[[], Any], callback: Callback) -> None:
        """Run ``fn()`` off the GUI thread; ``callback(result, error)`` later on it."""
        self._waiting.append((fn, callback))
        self._start_waiting()

    def _start_waiting(self) -> None:
        while self._running < self._max and self._waiting:
            fn, callback = self._waiting.popleft()
            self._running += 1
            thread = threading.Thread(
                target=self._work, args=(fn, callback), name=f"ember-{self._name}", daemon=True
            )
            thread.start()

    def _work(self, fn: Callable[[], Any], callback: Callback) -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = fn()
        except Exception as e:
            log.debug("Background job failed", exc_info=True)
            error = e
        with contextlib.suppress(RuntimeError):  # the runner (and its page) are gone
            self._finished.emit(callback, result, error)

    @Slot(object, object, object)
    def _on_finished(self, callback: Callback, result: Any, error: BaseException | None) -> None:
        self._running -= 1
        self._start_waiting()
        try:
            callback(result, error)
        except RuntimeError:  # the widget it would update was deleted meanwhile
            log.debug("A Models page callback found its widget deleted", exc_info=True)
