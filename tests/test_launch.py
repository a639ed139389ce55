"""Launching: ``ember --version`` and a second launch stay light; ``ember FILE.gguf`` opens the
app with that model, in the running Ember if there is one (real processes, offscreen Qt)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import EMBER, ember
from tests.helpers.window_scripts import CLOSE_WINDOW, OPEN_WINDOW

HEAVY = ("llama_cpp", "fastapi", "uvicorn", "huggingface_hub", "PySide6", "app.engine.worker")


def _imported_modules(*argv: str) -> set[str]:
    r = subprocess.run(
        [sys.executable, "-X", "importtime", *EMBER[1:], *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return {
        line.split("|")[-1].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:")
    }


@pytest.mark.parametrize("argv", [("--version",), ("--help",)])
def test_light_commands_import_nothing_heavy(argv: tuple[str, ...]) -> None:
    imported = _imported_modules(*argv)
    assert "app.cli" in imported  # the measurement works
    assert not [m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY]


def test_help_still_lists_every_command() -> None:
    r = ember("--help")
    assert r.returncode == 0
    for command in ("run", "info", "serve", "pull", "ls", "rm", "providers"):
        assert f"    {command} " in r.stdout


def test_opening_a_missing_model_file_says_so(tmp_path: Path) -> None:
    r = ember(str(tmp_path / "nope.gguf"))
    assert r.returncode == 1
    assert "nope.gguf: no such file" in r.stderr


def _last_model(home: Path) -> str:
    try:
        data = json.loads((home / "settings.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(data.get("ui.last_model", ""))


def test_second_launch_hands_its_file_to_the_running_app(
    gemma_path: Path, ember_home: Path
) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "EMBER_HOME": str(ember_home)}
    first = subprocess.Popen(EMBER, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        logs = ember_home / "logs"
        # the first instance is up once it logs that it started
        while not any("starting" in p.read_text() for p in logs.glob("*.log")):
            assert first.poll() is None, "the app quit at start"
            assert time.monotonic() < deadline, "the app did not start"
            time.sleep(0.2)
        second = subprocess.run(
            [*EMBER, str(gemma_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 0, second.stderr
        # the running app loads the model the second launch named
        while _last_model(ember_home) != str(gemma_path):
            assert first.poll() is None
            assert time.monotonic() < deadline, "the running app did not load the file"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGTERM)  # closes the window the normal way
        try:
            assert first.wait(60) == 0
        finally:
            if first.poll() is None:
                first.kill()


def test_first_launch_with_a_file_loads_it(gemma_path: Path, ember_home: Path) -> None:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_HOME": str(ember_home),
        "EMBER_QUIT_AFTER_START": "20",
    }
    proc = subprocess.Popen(
        [*EMBER, str(gemma_path)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 90
        while _last_model(ember_home) != str(gemma_path):
            assert proc.poll() is None, "the app quit before loading the file"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


WINDOW_IMPORTS = (
    OPEN_WINDOW
    + """
print(" ".join(sorted(m for m in ("fastapi", "uvicorn") if m in sys.modules)) or "-")
"""
    + CLOSE_WINDOW
)


def test_the_window_does_not_import_the_api_server_until_it_is_switched_on(
    ember_home: Path,
) -> None:
    """FastAPI and uvicorn cost about a second to import: an app whose server is off skips it."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "EMBER_HOME": str(ember_home)}
    r = subprocess.run(
        [sys.executable, "-c", WINDOW_IMPORTS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "-"
