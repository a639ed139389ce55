"""The conformance suite's window: the real MainWindow on the fake worker (answers stream at a
steady, scripted pace), the fake Hub as HF_ENDPOINT, a theme, and the folder screenshots go to
(``EMBER_GUI_SHOTS``, default ``build/gui-conformance/``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QWidget

from app.ui.main_window import MainWindow
from app.ui.theme import ThemeManager
from tests.helpers.hub_server import FakeHub, fake_hub_env
from tests.ui.fake_app import fake_services, load_fake, model_file, show_window
from tests.ui.parallel_fake import ParallelFakeWorker

pytestmark = pytest.mark.gui_conformance

# the minimum; the default window on a 1024x640 screen; the default window on a 1280x800
# screen (92% of it); a 1280x800 window; a 1920x1080 one
SIZES = [(640, 480), (942, 588), (1177, 736), (1280, 800), (1920, 1080)]
THEMES = ["light", "dark"]
ROOT = Path(__file__).resolve().parents[3]


def shots_folder() -> Path:
    return Path(os.environ.get("EMBER_GUI_SHOTS") or ROOT / "build" / "gui-conformance")


class Shots:
    """Writes one PNG per state: ``<folder>/<size>-<theme>/<nn>-<state>.png``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    def save(self, widget: QWidget, state: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count += 1
        name = re.sub(r"[^a-z0-9]+", "-", state.lower()).strip("-")
        path = self.folder / f"{self.count:02d}-{name}.png"
        widget.grab().save(str(path))
        return path


@pytest.fixture
def hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FakeHub]:
    with fake_hub_env(monkeypatch, tmp_path_factory) as fake:
        yield fake


@pytest.fixture
def fake_worker(tmp_path: Path) -> Iterator[ParallelFakeWorker]:
    """Answers stream at 8 tokens a second until stopped (the chat asks for 100,000)."""
    worker = ParallelFakeWorker(tokens_per_second=8)
    load_fake(worker, model_file(tmp_path, "Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf"))
    yield worker
    worker.shutdown()


@pytest.fixture
def themed(ember_app: QApplication, request: pytest.FixtureRequest) -> Iterator[str]:
    name = getattr(request, "param", "light")
    ThemeManager(ember_app, name).apply()
    yield name
    if name != "light":
        ThemeManager(ember_app, "light").apply()


@pytest.fixture
def conformance_window(
    qtbot, ember_app: QApplication, fake_worker: ParallelFakeWorker, hub: FakeHub, themed: str
) -> Iterator[MainWindow]:
    from tests.ui.conformance.states import hub_repos

    hub_repos(hub)
    services = fake_services(fake_worker, 100_000)
    window = show_window(qtbot, services)
    yield window
    window.controller.stop()
    window.close()
    services.close()
