"""The conformance suite's window: the real MainWindow on the fake worker (answers stream at a
steady, scripted pace), the fake Hub as HF_ENDPOINT, a theme, and the folder screenshots go to
(``EMBER_GUI_SHOTS``, default ``build/gui-conformance/``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtWidgets import QApplication

from app.ui.main_window import MainWindow
from app.ui.theme import ThemeManager
from tests.helpers.fake_app import FakeEngine, fake_services, show_window
from tests.helpers.hub_server import FakeHub
from tests.helpers.parallel_fake import ParallelFakeWorker

pytestmark = pytest.mark.gui_conformance


@pytest.fixture
def fake_engine() -> FakeEngine:
    """Answers stream at 8 tokens a second until stopped (the chat asks for 100,000)."""
    return FakeEngine(
        options={"tokens_per_second": 8}, model="Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf"
    )


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
    from tests.helpers.conformance.states import hub_repos

    hub_repos(hub)
    services = fake_services(fake_worker, 100_000)
    window = show_window(qtbot, services)
    yield window
    window.controller.stop()
    window.close()
    services.close()
