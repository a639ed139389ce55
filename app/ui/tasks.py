"""Run a blocking function (disk scans, big reads) off the GUI thread; get the result back on it.

``run_in_background(fn, on_done, owner)`` calls ``fn()`` on Qt's global thread pool and later
``on_done(result, error)`` on the GUI thread. The callback is skipped if ``owner`` was deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot
from shiboken6 import isValid

log = logging.getLogger(__name__)

Callback = Callable[[Any, BaseException | None], None]


class _Relay(QObject):
    """Lives on the GUI thread; its signal carries the result across (queued)."""

    done = Signal(object, object)

    def __init__(self, callback: Callback, owner: QObject | None) -> None:
        super().__init__()
        self._callback = callback
        self._owner = owner
        self.done.connect(self._on_done)

    @Slot(object, object)
    def _on_done(self, result: Any, error: BaseException | None) -> None:
        _pending.discard(self)
        if self._owner is not None and not isValid(self._owner):
            return
        self._callback(result, error)
        self.deleteLater()


class _Task(QRunnable):
    def __init__(self, fn: Callable[[], Any], relay: _Relay) -> None:
        super().__init__()
        self._fn = fn
        self._relay = relay

    def run(self) -> None:
        try:
            result = self._fn()
        except Exception as error:
            log.debug("Background task failed", exc_info=True)
            self._relay.done.emit(None, error)
        else:
            self._relay.done.emit(result, None)


_pending: set[_Relay] = set()


def run_in_background(
    fn: Callable[[], Any], on_done: Callback, owner: QObject | None = None
) -> None:
    relay = _Relay(on_done, owner)
    _pending.add(relay)
    QThreadPool.globalInstance().start(_Task(fn, relay))
