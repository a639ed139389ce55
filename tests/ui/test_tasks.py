"""The UI's task runner: answers on the GUI thread in order, latest wins per key, no call into a
deleted receiver, cancellation, coalesced refreshes, lanes that keep blocking work apart, and
an orderly shutdown with work in flight. Every wait is on an event (a gate, a signal)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import shiboken6
from PySide6.QtCore import QObject, Slot
from pytestqt.qtbot import QtBot

from app.ui.task_runner import (
    CancelToken,
    Lane,
    Task,
    TaskRunner,
    TaskState,
    shutdown_tasks,
    tasks,
)

TIMEOUT = 10_000  # ms a signal may take before the test fails (never reached when it works)
GATE = TIMEOUT / 1000


@pytest.fixture
def runner() -> Iterator[TaskRunner]:
    runner = TaskRunner()
    yield runner
    runner.shutdown(wait=0)


class Work:
    """Functions that record what ran; ``gated(...)`` ones hold until ``open(name)``."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.answers: list[str] = []
        self.threads: list[bool] = []  # per answer: did it arrive on the GUI thread?
        self._gates: dict[str, threading.Event] = {}
        self._started: dict[str, threading.Event] = {}

    def job(self, name: str) -> Callable[[], str]:
        def run() -> str:
            self.ran.append(name)
            return name

        return run

    def gated(self, name: str) -> Callable[[], str]:
        gate = self._gates.setdefault(name, threading.Event())
        started = self._started.setdefault(name, threading.Event())

        def run() -> str:
            self.ran.append(name)
            started.set()
            gate.wait(GATE)
            return name

        return run

    def wait_started(self, name: str) -> None:
        assert self._started[name].wait(GATE), f"{name} never started"

    def open(self, name: str) -> None:
        self._gates[name].set()

    def open_all(self) -> None:
        for gate in self._gates.values():
            gate.set()

    def answer(self, result: str) -> None:
        self.answers.append(result)
        self.threads.append(threading.current_thread() is threading.main_thread())


@pytest.fixture
def work() -> Iterator[Work]:
    work = Work()
    yield work
    work.open_all()  # no thread is left waiting on a gate


def named(name: str) -> Callable[[Task], bool]:
    return lambda task: task.name == name


def test_answers_come_to_the_gui_thread_in_order_each_before_its_settled_signal(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    serial = Lane("serial", 1)
    events: list[str] = []
    runner.settled.connect(lambda task: events.append(f"settled {task.name}"))
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("c")):
        for name in "abc":
            runner.submit(
                work.job(name),
                lambda result: events.append(f"done {result}"),
                lane=serial,
                name=name,
            )
    assert events == ["done a", "settled a", "done b", "settled b", "done c", "settled c"]

    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT) as settled:
        runner.submit(work.job("d"), work.answer)
    assert work.answers == ["d"] and work.threads == [True]
    assert settled.args[0].state is TaskState.DONE


def test_a_failure_reaches_on_error_on_the_gui_thread(qtbot: QtBot, runner: TaskRunner) -> None:
    errors: list[tuple[BaseException, bool]] = []

    def fail() -> None:
        raise ValueError("no such file")

    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT) as settled:
        runner.submit(
            fail,
            lambda _: pytest.fail("on_done called for a failure"),
            lambda error: errors.append(
                (error, threading.current_thread() is threading.main_thread())
            ),
        )
    assert settled.args[0].state is TaskState.FAILED
    [(error, on_gui_thread)] = errors
    assert isinstance(error, ValueError) and on_gui_thread


def test_latest_wins_drops_the_waiting_task_and_ignores_the_running_ones_answer(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    serial = Lane("serial", 1)
    a = runner.submit(work.gated("a"), work.answer, key="search", lane=serial, name="a")
    work.wait_started("a")
    b = runner.submit(work.job("b"), work.answer, key="search", lane=serial, name="b")
    other = runner.submit(work.job("other"), work.answer, key="card", lane=serial, name="other")
    c = runner.submit(work.job("c"), work.answer, key="search", lane=serial, name="c")
    assert b.state is TaskState.SUPERSEDED  # dropped unrun, at once
    assert a.token.cancelled  # the running one is asked to stop
    assert other.state is TaskState.PENDING  # another key is untouched
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("c")):
        work.open("a")
    assert work.ran == ["a", "other", "c"]
    assert work.answers == ["other", "c"]
    assert (a.state, c.state) == (TaskState.SUPERSEDED, TaskState.DONE)
    assert not runner.busy()


def test_a_stale_answer_that_arrives_after_the_newer_one_is_ignored(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    old = runner.submit(work.gated("old"), work.answer, key="k", name="old")
    work.wait_started("old")
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("new")):
        runner.submit(work.job("new"), work.answer, key="k", name="new")
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("old")):
        work.open("old")
    assert work.answers == ["new"]
    assert old.state is TaskState.SUPERSEDED


class Receiver(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[object] = []

    @Slot(object)
    def on_done(self, result: object) -> None:
        self.answers.append(result)


def test_nothing_is_called_on_a_receiver_deleted_while_its_task_ran(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    implied = Receiver()  # the owner of a bound-method callback
    explicit = Receiver()  # named as the receiver of a plain function
    calls: list[object] = []
    first = runner.submit(work.gated("a"), implied.on_done, name="a")
    second = runner.submit(work.gated("b"), calls.append, receiver=explicit, name="b")
    assert first.receiver is implied
    work.wait_started("a")
    work.wait_started("b")
    shiboken6.delete(implied)
    shiboken6.delete(explicit)
    # The two tasks run on a pool and may settle in either order: wait for each in turn.
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("a")):
        work.open("a")
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("b")):
        work.open("b")
    assert first.state is TaskState.RECEIVER_GONE and second.state is TaskState.RECEIVER_GONE
    assert calls == []


class EmptyModel(Receiver):
    """A receiver that is falsy (as a model with no rows may be)."""

    def __len__(self) -> int:
        return 0


def test_a_falsy_receiver_is_still_the_receiver(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    model = EmptyModel()
    task = runner.submit(work.gated("a"), model.on_done, lambda _error: None, name="a")
    assert task.receiver is model
    work.wait_started("a")
    shiboken6.delete(model)
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("a")):
        work.open("a")
    assert task.state is TaskState.RECEIVER_GONE


@pytest.fixture
def shared() -> Iterator[TaskRunner]:
    """The app's runner, which every screen uses; shut down afterwards."""
    yield tasks()
    shutdown_tasks(wait=0)


def test_the_apps_runner_skips_the_callbacks_of_a_deleted_receiver(
    qtbot: QtBot, shared: TaskRunner, work: Work
) -> None:
    """A screen's closures (not bound methods) name the screen as their receiver."""
    alive, doomed = Receiver(), Receiver()
    answers: list[tuple[object, BaseException | None]] = []

    def submit(fn: Callable[[], str], receiver: Receiver) -> Task:
        return tasks().submit(
            fn,
            lambda result: answers.append((result, None)),
            lambda error: answers.append((None, error)),
            receiver=receiver,
        )

    submit(work.gated("gone"), doomed)
    work.wait_started("gone")
    shiboken6.delete(doomed)
    with qtbot.waitSignal(shared.settled, timeout=TIMEOUT) as gone:
        work.open("gone")
    with qtbot.waitSignal(shared.settled, timeout=TIMEOUT):
        assert submit(work.job("c"), alive).receiver is alive
    assert gone.args[0].state is TaskState.RECEIVER_GONE
    assert answers == [("c", None)]


def test_cancel_stops_a_running_task_through_its_token_and_drops_a_waiting_one(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    serial = Lane("serial", 1)
    token = CancelToken()
    started = threading.Event()
    saw_cancel: list[bool] = []

    def poll() -> str:
        started.set()
        saw_cancel.append(token.wait(GATE))
        return "finished anyway"

    running = runner.submit(poll, work.answer, lane=serial, token=token, name="poll")
    waiting = runner.submit(work.job("waiting"), work.answer, lane=serial, name="waiting")
    assert started.wait(GATE)
    waiting.cancel()
    assert waiting.state is TaskState.CANCELLED  # at once: it never starts
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("poll")):
        running.cancel()
    assert saw_cancel == [True]
    assert running.state is TaskState.CANCELLED
    assert work.answers == [] and "waiting" not in work.ran


def test_coalesce_runs_once_more_after_the_running_task_whatever_the_number_of_asks(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    key = ("catalog", "providers")
    runner.submit(work.gated("1"), work.answer, key=key, coalesce=True, name="1")
    work.wait_started("1")
    second = runner.submit(work.job("2"), work.answer, key=key, coalesce=True, name="2")
    third = runner.submit(work.job("3"), work.answer, key=key, coalesce=True, name="3")
    assert second.state is TaskState.SUPERSEDED  # asks while it runs collapse into one
    assert "3" not in work.ran  # it waits for the running one
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("3")):
        work.open("1")
    assert work.ran == ["1", "3"]
    assert work.answers == ["1", "3"]  # the running one's answer still counts
    assert third.state is TaskState.DONE


def test_blocking_network_and_disk_work_never_holds_up_quick_work(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    hung = [
        runner.submit(work.gated(f"net{i}"), work.answer, lane="network")
        for i in range(runner.lanes["network"].threads + 2)
    ] + [
        runner.submit(work.gated(f"disk{i}"), work.answer, lane="disk")
        for i in range(runner.lanes["disk"].threads + 1)
    ]
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT, check_params_cb=named("quick")):
        runner.submit(work.job("quick"), work.answer, lane="quick", name="quick")
    assert work.answers == ["quick"]
    assert all(task.state is TaskState.PENDING for task in hung)
    assert runner.busy("network") and runner.busy("disk") and not runner.busy("quick")


def test_shutdown_waits_for_disk_work_abandons_network_work_and_calls_nothing_back(
    qtbot: QtBot, runner: TaskRunner, work: Work
) -> None:
    token = CancelToken()
    saving = threading.Event()
    saved: list[str] = []

    def save() -> str:  # disk work that stops at a cancel, after finishing its write
        work.ran.append("save")
        saving.set()
        token.wait(GATE)
        saved.append("written")
        return "save"

    serial = Lane("serial", 1)
    writing = runner.submit(save, work.answer, lane=serial, token=token, name="save")
    queued = runner.submit(work.job("queued"), work.answer, lane=serial, name="queued")
    hanging = runner.submit(work.gated("hang"), work.answer, lane="network", name="hang")
    work.wait_started("hang")
    assert saving.wait(GATE)
    settled: list[Task] = []
    runner.settled.connect(settled.append)

    abandoned = runner.shutdown(wait=GATE)

    assert abandoned == [hanging]
    assert saved == ["written"]  # shutdown waited for the write to finish
    assert writing.state is TaskState.CANCELLED and queued.state is TaskState.CANCELLED
    assert hanging.state is TaskState.ABANDONED
    assert sorted(t.name for t in settled) == ["hang", "queued", "save"]  # each once
    assert "queued" not in work.ran
    late = runner.submit(work.job("late"), work.answer, name="late")
    assert late.state is TaskState.CANCELLED
    work.open("hang")
    assert hanging.on_done is None  # its late answer has nothing to call
    assert work.answers == [] and "late" not in work.ran
    assert runner.shutdown() == []  # idempotent
