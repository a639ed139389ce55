"""The old entry point for background work, kept for its callers: ``run_in_background(fn,
on_done, owner)`` calls ``fn()`` off the GUI thread and later ``on_done(result, error)`` on it,
skipped if ``owner`` was deleted. It is a thin adapter over the app's ``TaskRunner``
(app/ui/task_runner.py), which new code uses directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject

from app.ui.task_runner import Lane, LaneName, Task, owner_of, tasks

Callback = Callable[[Any, BaseException | None], None]


def run_in_background(
    fn: Callable[[], Any],
    on_done: Callback,
    owner: QObject | None = None,
    lane: LaneName | Lane = "disk",
) -> Task:
    """``lane="network"`` for anything that waits on another machine (see task_runner)."""
    return tasks().submit(
        fn,
        lambda result: on_done(result, None),
        lambda error: on_done(None, error),
        lane=lane,
        receiver=owner if owner is not None else owner_of(on_done),
        name=getattr(fn, "__qualname__", None),
    )
