"""The Models page's Runner: latest wins for keyed jobs, waiting jobs can be dropped, and
nothing it does waits on the GUI thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from pytestqt.qtbot import QtBot

from app.ui.models.runner import Runner

TIMEOUT = 10_000


class Jobs:
    """Jobs that record when they run; ``gate`` holds the ones made with ``wait=True``."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()  # a gated job is running
        self.ran: list[str] = []
        self.returned: list[str] = []
        self.called: list[tuple[str, BaseException | None]] = []

    def job(self, name: str, wait: bool = False) -> Callable[[], str]:
        def run() -> str:
            self.ran.append(name)
            if wait:
                self.started.set()
                self.gate.wait(TIMEOUT / 1000)
            self.returned.append(name)
            return name

        return run

    def callback(self, result: object, error: BaseException | None) -> None:
        self.called.append((str(result), error))


def test_a_newer_keyed_job_supersedes_the_waiting_and_running_ones(qtbot: QtBot) -> None:
    runner = Runner(1, "test")
    jobs = Jobs()
    runner.submit(jobs.job("a", wait=True), jobs.callback, key="search")
    assert jobs.started.wait(TIMEOUT / 1000)  # a runs
    runner.submit(jobs.job("b"), jobs.callback, key="search")  # waits for the thread
    runner.submit(jobs.job("other"), jobs.callback)  # no key: never superseded
    runner.submit(jobs.job("c"), jobs.callback, key="search")  # supersedes a and b
    runner.submit(jobs.job("d"), jobs.callback, key="card")  # another key: kept
    assert jobs.returned == []  # submitting never waited for a job: a still runs
    jobs.gate.set()
    qtbot.waitUntil(lambda: not runner.busy, timeout=TIMEOUT)
    assert jobs.ran == ["a", "other", "c", "d"]  # b never ran
    assert [name for name, _ in jobs.called] == ["other", "c", "d"]  # a's answer is stale

    runner.submit(jobs.job("e"), jobs.callback, key="search")  # the key is free again
    qtbot.waitUntil(lambda: not runner.busy, timeout=TIMEOUT)
    assert jobs.called[-1] == ("e", None)


def test_a_failing_keyed_job_still_reports_when_it_is_the_latest(qtbot: QtBot) -> None:
    runner = Runner(2, "test")
    errors: list[BaseException | None] = []

    def fail() -> None:
        raise ValueError("no")

    runner.submit(fail, lambda _result, error: errors.append(error), key="k")
    qtbot.waitUntil(lambda: bool(errors), timeout=TIMEOUT)
    assert isinstance(errors[0], ValueError)


def test_cancel_waiting_drops_the_jobs_not_started(qtbot: QtBot) -> None:
    runner = Runner(1, "test")
    jobs = Jobs()
    runner.submit(jobs.job("a", wait=True), jobs.callback)
    assert jobs.started.wait(TIMEOUT / 1000)
    runner.submit(jobs.job("b"), jobs.callback)
    runner.submit(jobs.job("c"), jobs.callback, key="k")
    assert runner.cancel_waiting() == 2
    assert runner.busy  # a still runs
    jobs.gate.set()
    qtbot.waitUntil(lambda: not runner.busy, timeout=TIMEOUT)
    assert jobs.ran == ["a"] and [name for name, _ in jobs.called] == ["a"]

    runner.submit(jobs.job("d"), jobs.callback, key="k")  # a dropped key does not linger
    qtbot.waitUntil(lambda: not runner.busy, timeout=TIMEOUT)
    assert jobs.called[-1] == ("d", None)


def test_a_coalesced_job_asked_while_it_runs_runs_once_more_after(qtbot: QtBot) -> None:
    runner = Runner(1, "test")
    jobs = Jobs()
    runner.submit(jobs.job("scan 1", wait=True), jobs.callback, key="scan", coalesce=True)
    assert jobs.started.wait(TIMEOUT / 1000)
    runner.submit(jobs.job("scan 2"), jobs.callback, key="scan", coalesce=True)
    runner.submit(jobs.job("scan 3"), jobs.callback, key="scan", coalesce=True)
    assert runner.busy
    jobs.gate.set()
    qtbot.waitUntil(lambda: not runner.busy, timeout=TIMEOUT)
    assert jobs.ran == ["scan 1", "scan 3"]  # the asks made meanwhile collapse into one
    assert [name for name, _ in jobs.called] == ["scan 1", "scan 3"]
