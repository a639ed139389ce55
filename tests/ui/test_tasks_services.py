"""The app's task runner is part of the services' lifecycle: the keyring probe runs on it, and
closing the services (quitting) stops it in order, waiting for disk work in flight."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail
from pytestqt.qtbot import QtBot

from app.ui.services import Services, create_services
from app.ui.task_runner import CancelToken, Task, TaskState, shutdown_tasks, tasks

TIMEOUT = 10_000
GATE = TIMEOUT / 1000


@pytest.fixture
def services(ember_home: Path) -> Iterator[Services]:
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # never probe the keyring of the machine running tests
    services = create_services()
    yield services
    services.close()
    shutdown_tasks(wait=0)
    keyring.set_keyring(previous)


def settled_at_warm_up(qtbot: QtBot, services: Services, name: str) -> Task:
    """The task called ``name`` that the services' warm-up (at start) runs, once it settled."""

    def named(task: Task) -> bool:
        return task.name == name

    with qtbot.waitSignal(tasks().settled, timeout=TIMEOUT, check_params_cb=named) as settled:
        services.warm_up()
    task = settled.args[0]
    assert isinstance(task, Task)
    return task


def test_the_keyring_probe_runs_on_the_network_lane(qtbot: QtBot, services: Services) -> None:
    task = settled_at_warm_up(qtbot, services, "probe the keyring")
    assert task.lane is tasks().lanes["network"] and task.state is TaskState.DONE


def test_closing_the_services_waits_for_disk_work_and_calls_nothing_back(
    qtbot: QtBot, services: Services
) -> None:
    runner = tasks()
    token = CancelToken()
    writing = threading.Event()
    written: list[str] = []

    def write() -> str:  # stops at a cancel, but only after its write is complete
        writing.set()
        token.wait(GATE)
        written.append("settings")
        return "written"

    answers: list[str] = []
    task = runner.submit(write, answers.append, lane="disk", token=token)
    assert writing.wait(GATE)

    services.close()

    assert written == ["settings"]  # close waited for it
    assert task.state is TaskState.CANCELLED and answers == []
    assert runner.closed and tasks() is not runner  # a new start gets a fresh runner


def test_start_up_removes_on_the_disk_lane_the_attached_files_a_purge_left(
    qtbot: QtBot, services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.chats import attachments
    from tests.helpers.chat_attachments import attach_text, chat_with_files

    monkeypatch.setattr(attachments, "MAX_REMOVALS", 1)  # the purge at quit leaves the rest
    files = [attach_text(tmp_path, f"f{i}.txt", f"File number {i}.\n") for i in range(3)]
    chat = chat_with_files(services.store, *files)
    services.store.delete_conversation(chat)
    services.store.purge_deleted()
    assert any(f.stored.path.exists() for f in files)

    task = settled_at_warm_up(qtbot, services, "remove unused attachments")
    assert task.lane is tasks().lanes["disk"] and task.state is TaskState.DONE
    assert not [f for f in files if f.stored.path.exists()]
