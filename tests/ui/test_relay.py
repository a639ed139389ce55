"""Worker threads reach GUI objects through a ``Relay`` and never own them (app/ui/relay.py).

What it prevents: a worker that holds the last reference to a GUI object destroys it on the
worker's thread, and Qt then fires that object's timers into freed memory (a segfault the suite
hit: a tokenize job's sink held the token counter of a window closed mid-answer)."""

from __future__ import annotations

import gc
import threading
import weakref
from types import SimpleNamespace

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot
from shiboken6 import isValid

from app.engine.types import Event, Finished, TokenizeRequest, Usage
from app.ui.chat.context import TokenCounter
from app.ui.relay import Relay
from tests.helpers.fake_app import WAIT_MS


class _Window(QObject):
    """A top-level GUI object, owned by Python, with a timer running (as a chat window)."""

    def __init__(self) -> None:
        super().__init__()
        self.timer = QTimer(self)
        self.timer.start(10_000)
        self.ready = 0

    def on_ready(self) -> None:
        self.ready += 1


class _HoldingWorker:
    """An engine worker that keeps every job's sink until told to finish it."""

    def __init__(self) -> None:
        self.sinks: list[object] = []

    def submit(self, request: TokenizeRequest, sink: object) -> object:
        self.sinks.append(sink)
        return object()


def _on_thread(fn: object) -> None:
    thread = threading.Thread(target=fn)  # type: ignore[arg-type]
    thread.start()
    thread.join()


def test_a_queued_count_does_not_keep_a_closed_window_alive(ember_app: QApplication) -> None:
    worker = _HoldingWorker()
    engine = SimpleNamespace(loaded=SimpleNamespace(model_id="m"), worker=worker)
    window = _Window()
    counter = TokenCounter(engine, window)  # type: ignore[arg-type]
    counter.ensure(["a text the engine has not counted yet"], window.on_ready)
    assert len(worker.sinks) == 1 and window.ready == 0
    gone = weakref.ref(window)
    del window, counter
    gc.collect()  # on this (the GUI) thread
    assert gone() is None  # the job's sink kept nothing of it: destroyed here, not later
    sink = worker.sinks.pop()

    def finish_and_drop() -> None:  # what the engine does with the job afterwards
        nonlocal sink
        sink(Finished("job", "stop", Usage(3), result=[1, 2, 3]))  # type: ignore[operator]
        del sink

    _on_thread(finish_and_drop)
    QApplication.processEvents()


def test_a_relay_delivers_on_the_gui_thread_and_goes_quiet_with_its_parent(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    received: list[tuple[object, str]] = []
    parent = QObject()
    relay = Relay(lambda value: received.append((value, threading.current_thread().name)), parent)
    send = relay.send
    _on_thread(lambda: send("first"))
    qtbot.waitUntil(lambda: bool(received), timeout=WAIT_MS)
    assert received == [("first", threading.main_thread().name)]
    del relay
    parent.deleteLater()
    qtbot.waitUntil(lambda: not isValid(parent), timeout=WAIT_MS)
    _on_thread(lambda: send("after its parent is gone"))  # no error, nothing delivered
    QApplication.processEvents()
    assert received == [("first", threading.main_thread().name)]


def test_a_tokenize_sink_holds_only_its_key_and_a_relay(ember_app: QApplication) -> None:
    worker = _HoldingWorker()
    engine = SimpleNamespace(loaded=SimpleNamespace(model_id="m"), worker=worker)
    owner = QObject()
    counter = TokenCounter(engine, owner)  # type: ignore[arg-type]
    counter.ensure(["some text"], lambda: None)
    sink = worker.sinks[0]
    held = [cell.cell_contents for cell in sink.__closure__ or ()]  # type: ignore[attr-defined]
    owners = {type(getattr(h, "__self__", h)).__name__ for h in held}
    assert owners <= {"tuple", "Relay"}, owners
    counted: Event = Finished("job", "stop", Usage(2), result=[1, 2])
    _on_thread(lambda: sink(counted))  # type: ignore[operator]
    owner.deleteLater()
