"""GUI test fixtures: the real model loaded once, a window on an isolated EMBER_HOME; and the
same window on the fake engine (``fake_worker``, ``fake_window``: no model, answers streamed at
a scripted pace), which a module tunes with ``FAKE_ENGINE = FakeEngine(...)`` or replaces by
overriding ``fake_worker``. In a module that sets ``FAKE_ENGINE``, ``window`` is that fake
window."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.ui.app import create_application
from app.ui.collector import GuiCollector
from app.ui.main_window import DEFAULT_SIZE, GEOMETRY_KEY, MainWindow
from app.ui.services import Services, create_services
from app.ui.theme import ThemeManager
from tests.helpers.fake_app import FakeEngine, fake_window_on, load_fake, model_file
from tests.helpers.parallel_fake import ParallelFakeWorker
from tests.helpers.window import SMALL_CTX, TEST_CTX, loaded_worker


@pytest.fixture(scope="session")
def ember_app(qapp: QApplication) -> QApplication:
    """The QApplication set up as ``ember`` sets it up (style, font, theme, garbage collector)."""
    app = create_application()
    ThemeManager(app, "light").apply()
    GuiCollector(app)  # as the app does: Qt objects freed on the GUI thread only
    return app


# What Qt says when a Qt object is used or destroyed off its thread: a crash waiting to happen
# (a timer left registered fires into freed memory later, in some other test).
THREAD_MISUSE = ("from another thread", "in a different thread", "to a different thread")


@pytest.fixture(autouse=True)
def _no_qt_object_off_its_thread(qtlog: Any) -> Iterator[None]:
    """Fails the test in which Qt reported a Qt object used or destroyed off its thread."""
    yield
    misuse = [r.message for r in qtlog.records if any(m in r.message for m in THREAD_MISUSE)]
    assert not misuse, f"Qt objects used or destroyed off their thread: {misuse}"


@pytest.fixture(scope="session")
def gemma_worker(gemma_path: Path) -> Iterator[EngineWorker]:
    """One engine worker with the real test model loaded, shared by the GUI tests."""
    yield from loaded_worker(gemma_path, LoadParams(n_ctx=TEST_CTX))


@pytest.fixture(scope="session")
def small_gemma_worker(gemma_path: Path) -> Iterator[EngineWorker]:
    """The test model with a 512-token context, for filling the context quickly."""
    yield from loaded_worker(gemma_path, LoadParams(n_ctx=SMALL_CTX))


@pytest.fixture
def engine_worker(request: pytest.FixtureRequest) -> EngineWorker:
    """The worker the test's windows use: the fixture its module names in ``ENGINE_WORKER``
    (``idle_worker``: no model loaded; ``small_gemma_worker``; one of the module's own), else
    the real model loaded once (``gemma_worker``). Asked for by name, so that a test on another
    worker never loads the shared model; a module may also override this fixture."""
    name = getattr(request.module, "ENGINE_WORKER", "gemma_worker")
    return cast(EngineWorker, request.getfixturevalue(name))


@pytest.fixture
def make_services(
    ember_home: Path, engine_worker: EngineWorker
) -> Iterator[Callable[[], Services]]:
    """Open services on this test's EMBER_HOME sharing the loaded model; closed at the end."""
    opened: list[Services] = []

    def make() -> Services:
        services = create_services(worker=engine_worker)
        services.settings.set("sampling.max_tokens", 12)
        services.settings.set("sampling.temperature", 0.0)
        opened.append(services)
        return services

    yield make
    for services in opened:
        services.close()


@pytest.fixture
def make_window(
    qtbot: QtBot, ember_app: QApplication, make_services: Callable[[], Services]
) -> Iterator[Callable[[], MainWindow]]:
    windows: list[MainWindow] = []

    def make() -> MainWindow:
        window = MainWindow(make_services())
        qtbot.addWidget(window)
        if window.services.settings.extra(GEOMETRY_KEY) is None:
            # The size it first opens with on a laptop (the offscreen screen is only 800x600).
            window.resize(*DEFAULT_SIZE)
        window.show()
        qtbot.waitExposed(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        if window.isVisible():
            window.close()
        window.deleteLater()
    # Delete them now: closed windows left alive make every later stylesheet change slower.
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def window(request: pytest.FixtureRequest) -> MainWindow:
    """The test's window: on the fake engine (``fake_window``) in a module that sets
    ``FAKE_ENGINE``, else on the real model (``make_window``). Asked for by name so that a fake
    window's test never loads the real model."""
    if hasattr(request.module, "FAKE_ENGINE"):
        return cast(MainWindow, request.getfixturevalue("fake_window"))
    make = cast(Callable[[], MainWindow], request.getfixturevalue("make_window"))
    return make()


@pytest.fixture
def fake_engine(request: pytest.FixtureRequest) -> FakeEngine:
    """How this module's fake engine and window are made: its ``FAKE_ENGINE``, or the default."""
    engine = getattr(request.module, "FAKE_ENGINE", FakeEngine())
    assert isinstance(engine, FakeEngine)
    return engine


@pytest.fixture
def fake_worker(tmp_path: Path, fake_engine: FakeEngine) -> Iterator[ParallelFakeWorker]:
    """The fake engine with a (fake) model loaded."""
    worker = fake_engine.worker(**fake_engine.options)
    load_fake(worker, model_file(tmp_path, fake_engine.model), fake_engine.n_ctx)
    yield worker
    worker.shutdown()


@pytest.fixture
def fake_window(
    qtbot: QtBot, ember_app: QApplication, fake_worker: ParallelFakeWorker, fake_engine: FakeEngine
) -> Iterator[MainWindow]:
    """The real window on the fake engine, on fresh services over this test's EMBER_HOME."""
    with fake_window_on(qtbot, fake_worker, fake_engine.max_tokens) as window:
        yield window
