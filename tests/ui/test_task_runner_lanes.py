"""A lane of one's own on the app's task runner, as the Models page uses for its Hub requests,
header reads and library calls: latest wins for keyed jobs, waiting jobs can be dropped, a
refresh asked mid-refresh runs once more after, errors reach ``on_error``, and nothing waits on
the GUI thread. (These were the Models page's ``Runner`` adapter's tests.)"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from pytestqt.qtbot import QtBot

from app.ui.task_runner import Lane, TaskRunner, shutdown_tasks, tasks

TIMEOUT = 10_000


@pytest.fixture
def runner() -> Iterator[TaskRunner]:
    yield tasks()
    shutdown_tasks(wait=0)


class Jobs:
    """Jobs that record when they run; ``gate`` holds the ones made with ``wait=True``."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()  # a gated job is running
        self.ran: list[str] = []
        self.returned: list[str] = []
        self.called: list[str] = []
        self.errors: list[BaseException] = []

    def job(self, name: str, wait: bool = False) -> Callable[[], str]:
        def run() -> str:
            self.ran.append(name)
            if wait:
                self.started.set()
                self.gate.wait(TIMEOUT / 1000)
            self.returned.append(name)
            return name

        return run

    def done(self, result: str) -> None:
        self.called.append(result)


def test_a_newer_keyed_job_supersedes_the_waiting_and_running_ones(
    qtbot: QtBot, runner: TaskRunner
) -> None:
    lane = Lane("test", 1, wait_on_quit=False)
    scope = object()
    jobs = Jobs()
    runner.submit(jobs.job("a", wait=True), jobs.done, key=(scope, "search"), lane=lane)
    assert jobs.started.wait(TIMEOUT / 1000)  # a runs
    runner.submit(jobs.job("b"), jobs.done, key=(scope, "search"), lane=lane)  # waits
    runner.submit(jobs.job("other"), jobs.done, lane=lane)  # no key: never superseded
    runner.submit(jobs.job("c"), jobs.done, key=(scope, "search"), lane=lane)  # a and b go
    runner.submit(jobs.job("d"), jobs.done, key=(scope, "card"), lane=lane)  # another key
    runner.submit(jobs.job("e"), jobs.done, key=(object(), "search"), lane=lane)  # another's
    assert jobs.returned == []  # submitting never waited for a job: a still runs
    jobs.gate.set()
    qtbot.waitUntil(lambda: not runner.busy(lane), timeout=TIMEOUT)
    assert jobs.ran == ["a", "other", "c", "d", "e"]  # b never ran
    assert jobs.called == ["other", "c", "d", "e"]  # a's answer is stale

    runner.submit(jobs.job("f"), jobs.done, key=(scope, "search"), lane=lane)  # free again
    qtbot.waitUntil(lambda: not runner.busy(lane), timeout=TIMEOUT)
    assert jobs.called[-1] == "f"


def test_a_failing_keyed_job_still_reports_when_it_is_the_latest(
    qtbot: QtBot, runner: TaskRunner
) -> None:
    lane = Lane("test", 2, wait_on_quit=False)
    jobs = Jobs()

    def fail() -> str:
        raise ValueError("no")

    runner.submit(fail, jobs.done, jobs.errors.append, key=(object(), "k"), lane=lane)
    qtbot.waitUntil(lambda: bool(jobs.errors), timeout=TIMEOUT)
    assert isinstance(jobs.errors[0], ValueError) and jobs.called == []


def test_cancel_waiting_drops_the_lanes_jobs_not_started(qtbot: QtBot, runner: TaskRunner) -> None:
    lane = Lane("test", 1, wait_on_quit=False)
    key = (object(), "k")
    jobs = Jobs()
    runner.submit(jobs.job("a", wait=True), jobs.done, lane=lane)
    assert jobs.started.wait(TIMEOUT / 1000)
    runner.submit(jobs.job("b"), jobs.done, lane=lane)
    runner.submit(jobs.job("c"), jobs.done, key=key, lane=lane)
    assert runner.cancel_waiting(lane) == 2
    assert runner.busy(lane)  # a still runs
    jobs.gate.set()
    qtbot.waitUntil(lambda: not runner.busy(lane), timeout=TIMEOUT)
    assert jobs.ran == ["a"] and jobs.called == ["a"]

    runner.submit(jobs.job("d"), jobs.done, key=key, lane=lane)  # a dropped key does not linger
    qtbot.waitUntil(lambda: not runner.busy(lane), timeout=TIMEOUT)
    assert jobs.called[-1] == "d"


def test_cancel_key_drops_a_waiting_job_and_silences_a_running_one(
    qtbot: QtBot, runner: TaskRunner
) -> None:
    """What a view does when it shows something else (Discover's repository detail)."""
    lane = Lane("test", 1, wait_on_quit=False)
    scope = object()
    jobs = Jobs()
    running = runner.submit(jobs.job("a", wait=True), jobs.done, key=(scope, "a"), lane=lane)
    assert jobs.started.wait(TIMEOUT / 1000)
    waiting = runner.submit(jobs.job("b"), jobs.done, key=(scope, "b"), lane=lane)
    runner.cancel_key((scope, "b"))
    runner.cancel_key((scope, "a"))
    assert waiting.settled and running.token.cancelled
    with qtbot.waitSignal(runner.settled, timeout=TIMEOUT):
        jobs.gate.set()
    assert jobs.ran == ["a"] and jobs.called == []  # a ran to its end; nobody was told


def test_a_coalesced_job_asked_while_it_runs_runs_once_more_after(
    qtbot: QtBot, runner: TaskRunner
) -> None:
    lane = Lane("test", 1, wait_on_quit=False)
    key = (object(), "scan")
    jobs = Jobs()
    runner.submit(jobs.job("scan 1", wait=True), jobs.done, key=key, lane=lane, coalesce=True)
    assert jobs.started.wait(TIMEOUT / 1000)
    runner.submit(jobs.job("scan 2"), jobs.done, key=key, lane=lane, coalesce=True)
    runner.submit(jobs.job("scan 3"), jobs.done, key=key, lane=lane, coalesce=True)
    assert runner.busy(lane)
    jobs.gate.set()
    qtbot.waitUntil(lambda: not runner.busy(lane), timeout=TIMEOUT)
    assert jobs.ran == ["scan 1", "scan 3"]  # the asks made meanwhile collapse into one
    assert jobs.called == ["scan 1", "scan 3"]


def test_quit_abandons_a_lane_that_does_not_wait_on_quit(qtbot: QtBot) -> None:
    """A Hub that never answers does not hold the quit (the Models page's lanes)."""
    lane = Lane("hub", 3, wait_on_quit=False)
    jobs = Jobs()
    task = tasks().submit(jobs.job("hung", wait=True), jobs.done, lane=lane)
    assert jobs.started.wait(TIMEOUT / 1000)
    try:
        assert shutdown_tasks(wait=TIMEOUT / 1000) == [task]
    finally:
        jobs.gate.set()
    assert jobs.called == []
