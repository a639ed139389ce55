"""``Relay``: how code on a worker thread reaches a GUI object without owning it.

A worker thread that holds a reference to a GUI object keeps it alive, and when the worker
drops the last reference, Python destroys the object on the worker's thread. A Qt object
destroyed off its thread leaves its timers registered with the GUI thread, and they later fire
into freed memory: a segfault. (Seen: a tokenize job's sink was a closure over the chat's token
counter, which held the closed window's callbacks; the engine dropped the job last.)

Hand worker-side code ``relay.send`` instead of a bound method or a closure over ``self``:

- the relay has a parent, so Qt, not Python, decides when it dies, on the GUI thread;
- it holds nothing but a lock and a flag, so the worker's reference keeps nothing else alive;
- ``send`` after its parent is gone does nothing (checked under a lock that the destruction
  also takes, so a send never races the object's deletion).

The receiver is called on the GUI thread (a queued connection), never after it was deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal


class _Gate:
    """Open until the relay is destroyed; plain Python, so the worker may outlive the relay."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = True

    def close(self) -> None:
        with self.lock:
            self.open = False


class Relay(QObject):
    """See the module docstring. ``send(value)`` from any thread; ``receiver(value)`` on the
    GUI thread."""

    _arrived = Signal(object)

    def __init__(self, receiver: Callable[[Any], object], parent: QObject) -> None:
        super().__init__(parent)
        gate = self._gate = _Gate()
        # A lambda, which the connection owns (a bound method is held weakly; the gate would
        # need a weak reference, and the cyclic collector could clear it before Qt calls it).
        self.destroyed.connect(lambda *_: gate.close(), Qt.ConnectionType.DirectConnection)
        self._arrived.connect(receiver, Qt.ConnectionType.QueuedConnection)

    def send(self, value: object) -> None:
        gate = self._gate
        with gate.lock:
            if gate.open:
                self._arrived.emit(value)
