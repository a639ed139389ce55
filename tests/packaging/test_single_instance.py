"""SingleInstance: the first launch listens, later launches (real subprocesses) hand it their
arguments and exit; a crashed first instance is taken over, a hung one is reported."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.ui.single_instance import SingleInstance, SingleInstanceError, default_key
from tests.helpers.bundle import ROOT

LAUNCH = """
import sys, time
from PySide6.QtCore import QCoreApplication
from app.ui.single_instance import SingleInstance, SingleInstanceError
app = QCoreApplication([])
key, timeout, mode, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
instance = SingleInstance(key, timeout_ms=timeout)
try:
    primary = instance.start(argv)
except SingleInstanceError as error:
    print(f"error: {error}", flush=True)
    sys.exit(3)
print("primary" if primary else "sent", flush=True)
if mode == "hold" and primary:
    time.sleep(120)  # holds the lock and the socket, never runs an event loop: "hung"
sys.exit(2 if primary else 0)
"""


def launch(
    key: str, *argv: str, mode: str = "launch", timeout_ms: int = 5000, cwd: Path = ROOT
) -> subprocess.Popen[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCH, key, str(timeout_ms), mode, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )


@pytest.fixture
def key(tmp_path: Path) -> str:
    return default_key(tmp_path)


@pytest.fixture
def first(qtbot: QtBot, key: str) -> Iterator[SingleInstance]:
    instance = SingleInstance(key)
    assert instance.start(["ember"])
    assert instance.is_primary
    yield instance
    instance.close()


def test_second_launch_hands_over_its_arguments_and_exits(
    qtbot: QtBot, first: SingleInstance, key: str, tmp_path: Path
) -> None:
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with qtbot.waitSignal(first.message_received, timeout=20_000) as blocker:
        second = launch(key, "model.gguf", "--flag", "not-a-file", cwd=tmp_path)
    out, err = second.communicate(timeout=30)
    assert second.returncode == 0, err
    assert out.strip() == "sent"
    model = str((tmp_path / "model.gguf").resolve())
    assert blocker.args == [[model, "--flag", "not-a-file"]]


def test_several_launches_each_arrive(qtbot: QtBot, first: SingleInstance, key: str) -> None:
    received: list[list[str]] = []
    first.message_received.connect(received.append)
    launches = [launch(key, f"message-{n}") for n in range(3)]
    qtbot.waitUntil(lambda: len(received) == 3, timeout=30_000)
    for process in launches:
        assert process.communicate(timeout=30)[0].strip() == "sent"
    assert sorted(received) == [["message-0"], ["message-1"], ["message-2"]]


def test_a_crashed_first_instance_is_taken_over(key: str) -> None:
    crashed = launch(key, mode="hold")
    try:
        assert crashed.stdout is not None
        assert crashed.stdout.readline().strip() == "primary"
    finally:
        crashed.kill()  # no clean-up: its lock file and socket stay behind
        crashed.communicate()
    instance = SingleInstance(key)
    try:
        assert instance.start([])
    finally:
        instance.close()


def test_a_hung_first_instance_is_reported(key: str) -> None:
    hung = launch(key, mode="hold")
    try:
        assert hung.stdout is not None
        assert hung.stdout.readline().strip() == "primary"
        with pytest.raises(SingleInstanceError, match=r"already running \(process \d+\)"):
            SingleInstance(key, timeout_ms=1000).start(["x"])
    finally:
        hung.kill()
        hung.communicate()


def test_close_lets_the_next_launch_be_first(qtbot: QtBot, key: str) -> None:
    instance = SingleInstance(key)
    assert instance.start([])
    instance.close()
    again = launch(key)
    out, err = again.communicate(timeout=30)
    assert (again.returncode, out.strip()) == (2, "primary"), err


def test_the_key_is_per_user_and_per_home(tmp_path: Path) -> None:
    one, two = default_key(tmp_path / "one"), default_key(tmp_path / "two")
    assert one != two
    assert default_key(tmp_path / "one") == one
    assert len(one) < 40  # it becomes a socket path, which has a short limit
