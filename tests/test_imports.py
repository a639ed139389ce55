"""Start-up stays fast: heavy libraries are imported by what uses them, not by the window.

Each check runs a real process (offscreen Qt) under ``python -X importtime``, which lists every
module as it is imported, so what came before a point in the start-up is known exactly.
bench/startup.py times the start-up itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.cli import EMBER
from tests.helpers.window_scripts import CLOSE_WINDOW, OPEN_WINDOW

# huggingface_hub's client: HfApi, file download, its HTTP utilities (with httpx2, about half a
# second). Only its constants (paths, offline mode) are read without going online.
HUB_CLIENT = ("huggingface_hub.", "httpx2")
HUB_LIGHT = {"huggingface_hub.constants"}

# Not needed to show the window: the Hub client, the API server (FastAPI, uvicorn, pydantic),
# llama.cpp (and numpy, jinja2 for chat templates), httpx (remote providers), the OS keyring
# (and its D-Bus backend), and the Models and Server pages, built once the window is painted.
DEFERRED = (
    *HUB_CLIENT,
    "httpx",
    "fastapi",
    "uvicorn",
    "pydantic",
    "llama_cpp",
    "numpy",
    "jinja2",
    "keyring",
    "secretstorage",
    "app.server.app",
    "app.engine.llamacpp",
    "app.ui.models.pane",
    "app.ui.server.pane",
    "app.ui.settings.settings_dialog",
)

# Not needed even once every page is built: only searching the Hub (opening the Models page),
# downloading, serving the API or loading a model imports them.
NOT_FOR_THE_PAGES = (
    *HUB_CLIENT,
    "fastapi",
    "uvicorn",
    "pydantic",
    "llama_cpp",
    "numpy",
)

SHOWN = "ember: window shown at"


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "EMBER_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hf-cache"),
        **extra,
    }


def _modules(importtime_lines: list[str]) -> set[str]:
    return {
        line.split("|")[-1].strip()
        for line in importtime_lines
        if line.startswith("import time:") and "|" in line
    }


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The ``names`` found among ``modules``: a name stands for itself and its submodules; a
    name ending in "." for that package's submodules but those in HUB_LIGHT."""

    def covered(m: str, n: str) -> bool:
        if n.endswith("."):
            return m.startswith(n) and m not in HUB_LIGHT
        return m == n or m.startswith(n + ".")

    return sorted(n for n in names if any(covered(m, n) for m in modules))


def test_the_window_is_shown_before_heavy_modules_are_imported(ember_home: Path) -> None:
    """``ember`` with no command, as a user starts it: what it imports until its window has
    been painted, and that the other pages are built right after."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", *EMBER[1:]],
        env=_env(ember_home, EMBER_REPORT_SHOWN="1", EMBER_QUIT_AFTER_START="1"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    shown = next((i for i, line in enumerate(lines) if line.startswith(SHOWN)), None)
    assert shown is not None, r.stderr[-3000:]
    before = _modules(lines[:shown])
    assert "app.ui.main_window" in before  # the measurement works
    assert _loaded(before, DEFERRED) == []
    # then, without being asked, as the Models page resumes unfinished downloads
    assert {"app.ui.models.pane", "app.ui.server.pane"} <= _modules(lines[shown:])


BUILD_EVERY_PAGE = (
    OPEN_WINDOW
    + """
# built as run_gui builds them after the first paint (showing Models would search the Hub)
window.models_pane
window.server_pane
app.processEvents()
"""
    + CLOSE_WINDOW
)


def test_building_every_page_does_not_import_the_hub_client_or_the_engine(
    ember_home: Path,
) -> None:
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", BUILD_EVERY_PAGE],
        env=_env(ember_home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    imported = _modules(r.stderr.splitlines())
    assert {"app.ui.models.pane", "app.ui.server.pane"} <= imported  # the pages were built
    assert _loaded(imported, NOT_FOR_THE_PAGES) == []
