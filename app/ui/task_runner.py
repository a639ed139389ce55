"""The UI's one way to run background work, in the spirit of Anki's ``TaskManager``.

``tasks().submit(fn, on_done, on_error, key=..., lane=...)`` calls ``fn()`` on a worker thread
and later ``on_done(result)`` or ``on_error(error)`` on the GUI thread. Every answer comes back
through one queued signal (``TaskRunner._delivered``), so callbacks always run on the GUI thread,
and each task settles exactly once (``TaskRunner.settled``) in one of the ``TaskState``s.

- **Lanes** keep kinds of work apart, each with its own queue and threads: ``"quick"`` (short
  CPU work: rendering, parsing), ``"disk"`` (the default: scans, reads, writes, the keyring),
  ``"network"`` (anything waiting on another machine) and ``"tools"`` (an answer's tool loop,
  stopping MCP servers: long waits on a person or a server; quit does not wait for them, it
  stops the loop through its ``StopToken``). A provider that never answers then fills
  only network threads, never the ones a disk scan needs. An owner that needs its jobs run in
  order makes its own ``Lane(name, threads=1)``.
- **Keys, latest wins**: a task submitted with a ``key`` supersedes the earlier ones with that
  key. Those still waiting are dropped unrun; one already running has its token cancelled and
  its answer ignored, so an older answer never arrives after a newer one. Keys are shared
  app-wide: include the owner in them, e.g. ``(self._scope, "search")``.
- **Coalesce** (``coalesce=True`` with a key) is "refresh again if asked mid-refresh": while a
  task with that key runs, a new one waits for it and then runs once (later asks replace it);
  the running one's answer is still delivered.
- **Receiver**: the QObject whose callbacks these are (by default the object of a bound-method
  ``on_done``/``on_error``). If it was deleted meanwhile, nothing is called.
- **Cancel**: ``task.cancel()`` drops a waiting task; a running one sees ``token.cancelled``
  (pass your own ``token`` to ``submit`` to poll it inside ``fn``). A cancelled task never
  calls back.
- **Shutdown** (``Services.close`` calls ``shutdown_tasks``): waiting tasks are dropped, running
  ones cancelled; quit waits a little for ``quick``/``disk`` work (a write must not be cut off)
  and abandons ``network`` work (its threads are daemons: a hung server cannot hold the quit).

Threads: the runner lives on the GUI thread and every method is called there; only ``fn`` and
each lane's queue (under its lock) are touched by the worker threads.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from enum import StrEnum
from typing import Any, Literal, TypeVar

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot
from shiboken6 import isValid

log = logging.getLogger(__name__)

LaneName = Literal["quick", "disk", "network", "tools"]
T = TypeVar("T")
QUIT_WAIT = 3.0  # seconds quit waits for running quick/disk work


class TaskCancelledError(Exception):
    """Raised by ``CancelToken.raise_if_cancelled`` to stop a function early."""


class CancelToken:
    """Set from the GUI thread, polled by the task's function on its worker thread."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, cut short by a cancel; True when cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise TaskCancelledError


class StopToken(CancelToken):
    """A token that also calls ``stop()`` when cancelled (on the cancelling thread, once), for
    work with its own way to stop, e.g. the tool loop's ``LoopControl.cancel``: the runner's
    shutdown then stops it instead of only flagging it."""

    __slots__ = ("_stop", "_stop_lock")

    def __init__(self, stop: Callable[[], object]) -> None:
        super().__init__()
        self._stop: Callable[[], object] | None = stop
        self._stop_lock = threading.Lock()

    def cancel(self) -> None:
        super().cancel()
        with self._stop_lock:
            stop, self._stop = self._stop, None
        if stop is not None:
            stop()


class TaskState(StrEnum):
    PENDING = "pending"  # waiting or running
    DONE = "done"  # on_done was called
    FAILED = "failed"  # fn raised: on_error was called (or the error logged)
    CANCELLED = "cancelled"  # task.cancel(), cancel_waiting() or shutdown: no callback
    SUPERSEDED = "superseded"  # a newer task with its key: no callback
    RECEIVER_GONE = "receiver_gone"  # its receiver was deleted: no callback
    ABANDONED = "abandoned"  # still running when the app quit


class Lane:
    """A queue with up to ``threads`` daemon threads, started as work arrives.

    ``wait_on_quit``: shutdown waits (a little) for its running tasks; False abandons them.
    """

    def __init__(self, name: str, threads: int, *, wait_on_quit: bool = True) -> None:
        self.name = name
        self.threads = max(1, threads)
        self.wait_on_quit = wait_on_quit
        self._lock = threading.Lock()
        self._waiting: deque[Task] = deque()
        self._running = 0

    def __repr__(self) -> str:
        return f"Lane({self.name!r}, threads={self.threads})"

    def put(self, task: Task) -> None:
        with self._lock:
            self._waiting.append(task)
            start = self._running < self.threads
            if start:
                self._running += 1
        if start:
            threading.Thread(target=self._work, name=f"ember-{self.name}", daemon=True).start()

    def discard(self, task: Task) -> bool:
        """Take ``task`` out of the queue; False when it is not waiting (running or done)."""
        with self._lock:
            try:
                self._waiting.remove(task)
            except ValueError:
                return False
            return True

    def is_waiting(self, task: Task) -> bool:
        with self._lock:
            return task in self._waiting

    def _work(self) -> None:  # a worker thread
        while True:
            with self._lock:
                if not self._waiting:
                    self._running -= 1
                    return
                task = self._waiting.popleft()
            task.run()


class Task:
    """One submitted function. ``state`` stays ``PENDING`` until it settles, once."""

    _tickets = itertools.count(1)

    def __init__(
        self,
        runner: TaskRunner,
        fn: Callable[[], Any],
        on_done: Callable[[Any], object] | None,
        on_error: Callable[[BaseException], object] | None,
        *,
        key: Hashable | None,
        lane: Lane,
        token: CancelToken,
        receiver: QObject | None,
        coalesce: bool,
        name: str,
    ) -> None:
        self.ticket = next(self._tickets)
        self.runner = runner
        self.fn = fn
        self.on_done = on_done
        self.on_error = on_error
        self.key = key
        self.lane = lane
        self.token = token
        self.receiver = receiver
        self.coalesce = coalesce
        self.name = name
        self.state = TaskState.PENDING
        self.finished = threading.Event()  # fn has returned or raised (worker thread)

    def __repr__(self) -> str:
        return f"<Task {self.ticket} {self.name!r} on {self.lane.name}: {self.state}>"

    @property
    def settled(self) -> bool:
        return self.state is not TaskState.PENDING

    def cancel(self) -> None:
        self.runner.cancel(self)

    def run(self) -> None:  # a worker thread
        result: Any = None
        error: BaseException | None = None
        if not self.token.cancelled:
            try:
                result = self.fn()
            except Exception as e:
                error = e
        self.finished.set()
        self.runner.deliver(self, result, error)


def _released() -> None:
    raise RuntimeError("This task has settled; its function was let go.")


def _release(task: Task, *, fn: bool) -> None:
    """Let go, on the GUI thread, of the GUI objects a settled task holds (its callbacks,
    their receiver, and its function once it can no longer run). The worker thread may hold
    the task last, and an object whose last reference goes on another thread is destroyed
    there: for a Qt object, a crash (see app/ui/relay.py)."""
    task.on_done = task.on_error = None
    task.receiver = None
    if fn:
        task.fn = _released


def owner_of(callback: Callable[..., object] | None) -> QObject | None:
    """The QObject a bound method (or a partial of one) belongs to, if any."""
    while isinstance(callback, functools.partial):
        callback = callback.func
    owner = getattr(callback, "__self__", None)
    return owner if isinstance(owner, QObject) else None


def _owner(*callbacks: Callable[..., object] | None) -> QObject | None:
    for callback in callbacks:
        owner = owner_of(callback)
        if owner is not None:
            return owner
    return None


class TaskRunner(QObject):
    """See the module docstring. Signal: ``settled(Task)`` (GUI thread), once per task, after
    its callback (if any) has run."""

    settled = Signal(object)
    _delivered = Signal(object, object, object)  # Task, result, error (worker -> GUI thread)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.lanes: dict[str, Lane] = {
            "quick": Lane("quick", 2),
            "disk": Lane("disk", 2),
            "network": Lane("network", 8, wait_on_quit=False),
            # One thread per answer with tools (it may wait on a person); quit stops them
            # through their tokens rather than waiting.
            "tools": Lane("tools", 16, wait_on_quit=False),
        }
        self._live: dict[int, Task] = {}  # unsettled tasks by ticket, oldest first
        self._latest: dict[Hashable, Task] = {}  # key -> the task that may call back
        self._parked: dict[Hashable, Task] = {}  # key -> coalesced task, runs after the latest
        self._closed = False
        self._delivered.connect(self._on_delivered, Qt.ConnectionType.QueuedConnection)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- submitting -----------------------------------------------------------------------

    def submit(
        self,
        fn: Callable[[], T],
        on_done: Callable[[T], object] | None = None,
        on_error: Callable[[BaseException], object] | None = None,
        *,
        key: Hashable | None = None,
        lane: LaneName | Lane = "disk",
        receiver: QObject | None = None,
        token: CancelToken | None = None,
        coalesce: bool = False,
        name: str | None = None,
    ) -> Task:
        """Run ``fn()`` off the GUI thread; its answer comes back to ``on_done``/``on_error``
        on the GUI thread (the module docstring says when it does not). Never waits."""
        self._check_thread()
        task = Task(
            self,
            fn,
            on_done,
            on_error,
            key=key,
            lane=lane if isinstance(lane, Lane) else self.lanes[lane],
            token=token or CancelToken(),
            receiver=receiver if receiver is not None else _owner(on_done, on_error),
            coalesce=coalesce,
            name=name or str(getattr(fn, "__qualname__", fn)),
        )
        if self._closed:
            log.warning("%s submitted after shutdown; dropped", task)
            task.token.cancel()
            self._settle(task, TaskState.CANCELLED)
            return task
        if key is not None:
            latest = self._latest.get(key)
            if coalesce and latest is not None and not latest.lane.is_waiting(latest):
                self._live[task.ticket] = task
                self._park(task)
                return task
            self._supersede(key, cancel_running=not coalesce)
            self._latest[key] = task
        self._live[task.ticket] = task
        task.lane.put(task)
        return task

    def _park(self, task: Task) -> None:
        """Coalesce: wait for the running task with this key, replacing an earlier wait."""
        earlier = self._parked.pop(task.key, None)
        if earlier is not None:
            self._settle(earlier, TaskState.SUPERSEDED)
        self._parked[task.key] = task

    def _supersede(self, key: Hashable, *, cancel_running: bool) -> None:
        parked = self._parked.pop(key, None)
        if parked is not None:
            self._settle(parked, TaskState.SUPERSEDED)
        for task in [t for t in self._live.values() if t.key == key]:
            if task.lane.discard(task):
                task.token.cancel()
                self._settle(task, TaskState.SUPERSEDED)
            elif cancel_running:
                task.token.cancel()  # it may stop early; _on_delivered ignores its answer

    # -- cancelling -----------------------------------------------------------------------

    def cancel(self, task: Task) -> None:
        """Drop ``task`` if it waits, else ask it to stop; it never calls back."""
        if task.settled:
            return
        task.token.cancel()
        if task.key is not None and self._parked.get(task.key) is task:
            del self._parked[task.key]
            self._settle(task, TaskState.CANCELLED)
        elif task.lane.discard(task):
            self._settle(task, TaskState.CANCELLED)
        # else it runs: its delivery settles it as cancelled

    def cancel_key(self, key: Hashable) -> None:
        """Cancel every task with ``key`` (waiting, running or coalesced)."""
        for task in [t for t in self._live.values() if t.key == key]:
            self.cancel(task)

    def cancel_waiting(self, lane: LaneName | Lane | None = None) -> int:
        """Drop the tasks not started yet (in ``lane``, or all); returns how many."""
        wanted = self.lanes[lane] if isinstance(lane, str) else lane
        dropped = 0
        for task in list(self._live.values()):
            if wanted is not None and task.lane is not wanted:
                continue
            parked = task.key is not None and self._parked.get(task.key) is task
            if parked or task.lane.is_waiting(task):
                self.cancel(task)
                dropped += 1
        return dropped

    # -- state ----------------------------------------------------------------------------

    def busy(self, lane: LaneName | Lane | None = None) -> bool:
        """Whether a task (in ``lane``, or any) has not settled yet."""
        wanted = self.lanes[lane] if isinstance(lane, str) else lane
        return any(wanted is None or t.lane is wanted for t in self._live.values())

    def pending(self) -> list[Task]:
        return list(self._live.values())

    # -- answers (GUI thread) -------------------------------------------------------------

    def deliver(self, task: Task, result: Any, error: BaseException | None) -> None:
        """Hand a finished task to the GUI thread (called by its worker thread)."""
        try:
            self._delivered.emit(task, result, error)
        except RuntimeError:  # the runner itself was deleted: nobody is left to answer
            log.debug("%s finished after its runner was deleted", task)

    @Slot(object, object, object)
    def _on_delivered(self, task: Task, result: Any, error: BaseException | None) -> None:
        if task.settled:  # cancelled at shutdown while it ran
            return
        latest = task.key is None or self._latest.get(task.key) is task
        if not latest:
            state = TaskState.SUPERSEDED
        elif task.token.cancelled:
            state = TaskState.CANCELLED
        elif task.receiver is not None and not isValid(task.receiver):
            state = TaskState.RECEIVER_GONE
        else:
            state = TaskState.DONE if error is None else TaskState.FAILED
        self._forget(task, state)  # before the callback: it may submit the same work again
        try:
            if state in (TaskState.DONE, TaskState.FAILED):
                self._call_back(task, result, error)
        finally:
            _release(task, fn=True)  # fn has returned: the worker holds none of it any more
            self.settled.emit(task)
            if latest and task.key is not None:
                self._start_parked(task.key)

    def _call_back(self, task: Task, result: Any, error: BaseException | None) -> None:
        try:
            if error is None:
                if task.on_done is not None:
                    task.on_done(result)
            elif task.on_error is not None:
                task.on_error(error)
            else:
                log.warning("%s failed", task, exc_info=error)
        except RuntimeError as e:
            if "already deleted" not in str(e):
                raise
            # A widget the callback reaches (not its receiver) was deleted meanwhile.
            log.debug("%s: its callback found a deleted widget", task, exc_info=True)

    def _start_parked(self, key: Hashable) -> None:
        task = self._parked.pop(key, None)
        if task is not None:
            self._latest[key] = task
            task.lane.put(task)

    def _settle(self, task: Task, state: TaskState) -> None:
        self._forget(task, state)
        _release(task, fn=state is not TaskState.ABANDONED)  # an abandoned fn still runs
        self.settled.emit(task)

    def _forget(self, task: Task, state: TaskState) -> None:
        task.state = state
        self._live.pop(task.ticket, None)
        if task.key is not None and self._latest.get(task.key) is task:
            del self._latest[task.key]

    # -- shutdown -------------------------------------------------------------------------

    def shutdown(self, wait: float = QUIT_WAIT) -> list[Task]:
        """Drop waiting tasks, cancel running ones, wait up to ``wait`` seconds in all for
        those on lanes that ``wait_on_quit``; returns the tasks abandoned. No callback runs
        after this. Idempotent."""
        if self._closed:
            return []
        self._closed = True
        for task in list(self._parked.values()):
            self.cancel(task)
        running: list[Task] = []
        for task in list(self._live.values()):
            self.cancel(task)
            if not task.settled:
                running.append(task)
        deadline = time.monotonic() + wait
        abandoned: list[Task] = []
        for task in running:
            waited = task.lane.wait_on_quit and task.finished.wait(
                max(0.0, deadline - time.monotonic())
            )
            if waited or task.finished.is_set():
                self._settle(task, TaskState.CANCELLED)
            else:
                abandoned.append(task)
                self._settle(task, TaskState.ABANDONED)
        if abandoned:
            log.info("Quitting without waiting for: %s", ", ".join(map(repr, abandoned)))
        return abandoned

    def _check_thread(self) -> None:
        if QThread.currentThread() != self.thread():
            raise RuntimeError("TaskRunner.submit is for the GUI thread")


_shared: TaskRunner | None = None


def tasks() -> TaskRunner:
    """The app's task runner (made on first use, which must be on the GUI thread)."""
    global _shared  # noqa: PLW0603 - one runner for the whole app, by design (aqt's taskman)
    if _shared is None or not isValid(_shared):
        app = QCoreApplication.instance()
        if app is not None and QThread.currentThread() != app.thread():
            raise RuntimeError("The task runner is made on the GUI thread")
        _shared = TaskRunner()
    return _shared


def shutdown_tasks(wait: float = QUIT_WAIT) -> list[Task]:
    """Shut the app's runner down (``Services.close``); the next ``tasks()`` makes a new one."""
    global _shared
    runner, _shared = _shared, None
    if runner is None or not isValid(runner):
        return []
    return runner.shutdown(wait)
