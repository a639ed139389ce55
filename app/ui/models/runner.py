"""Background work for the Models page (Hub requests, header reads, library scans): a thin
adapter over the app's ``TaskRunner`` (app/ui/task_runner.py), kept for the page's modules.

``Runner(max_threads, name)`` is one lane of its own (at most ``max_threads`` jobs at once, the
rest wait in order) and calls ``callback(result, error)`` on the GUI thread. Its threads are
daemons that quit abandons: a Hub that does not answer never keeps the app from quitting. A
runner with one thread serialises its jobs (the page's ``Library`` scans and imports).

Latest wins: a job submitted with a ``key`` supersedes this runner's earlier jobs with that
key (waiting ones are dropped unrun, running ones' answers ignored). ``cancel_waiting()`` drops
every job not started yet. Dropped jobs, and jobs of a deleted runner, never call back.
``coalesce=True`` is "scan again if asked mid-scan" (see task_runner).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from PySide6.QtCore import QObject

from app.ui.task_runner import Lane, TaskRunner, tasks

Callback = Callable[[Any, BaseException | None], None]


class Runner(QObject):
    """See the module docstring. No signals; callbacks run on the GUI thread."""

    def __init__(self, max_threads: int, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lane = Lane(name, max_threads, wait_on_quit=False)
        self._scope = object()  # keeps this runner's keys apart from everyone else's
        self._runner: TaskRunner = tasks()

    @property
    def busy(self) -> bool:
        return self._runner.busy(self._lane)

    def submit(
        self,
        fn: Callable[[], Any],
        callback: Callback,
        key: Hashable | None = None,
        *,
        coalesce: bool = False,
    ) -> None:
        """Run ``fn()`` off the GUI thread; ``callback(result, error)`` later on it.
        ``coalesce`` (with a key): asked while that key's job runs, run once more after it."""
        if self._runner.closed:
            self._runner = tasks()
        self._runner.submit(
            fn,
            lambda result: callback(result, None),
            lambda error: callback(None, error),
            key=None if key is None else (self._scope, key),
            lane=self._lane,
            receiver=self,
            coalesce=coalesce,
            name=f"{self._lane.name}: {getattr(fn, '__qualname__', fn)}",
        )

    def cancel_waiting(self) -> int:
        """Drop every job that has not started (they never call back); returns how many."""
        return self._runner.cancel_waiting(self._lane)
