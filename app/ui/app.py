"""``run_gui(files)``: start the desktop app (what ``ember`` and ``ember FILE.gguf`` do).

A second launch only creates the QApplication and asks the running Ember to take its files
(single_instance.py); the main window, the engine and the chat store are imported only by the
first instance, so handing over is quick. Files also arrive as ``QFileOpenEvent`` (macOS
Finder's "Open With", a file dropped on the Dock icon): ``_FileOpenFilter`` catches them, even
before the window exists.

Start-up shows the window first: what it does not need to be painted (loading the last model,
the API server, the Models and Server pages, the keyring probe, freezing the start-up objects
for the GC) waits for the event loop's turn after its first paint (``_after_first_paint``).
Heavy libraries (huggingface_hub's client, FastAPI, llama.cpp, keyring) are imported by what
uses them; tests/test_imports.py keeps them out of the window's start and bench/startup.py
times it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QFileOpenEvent, QGuiApplication, QIcon, QPixmap
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from app import __version__, resources
from app.ui import theme
from app.ui.collector import GuiCollector
from app.ui.single_instance import SingleInstance, SingleInstanceError

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow
    from app.ui.services import Services

log = logging.getLogger(__name__)


def app_icon() -> QIcon:
    icon = QIcon()
    png = QPixmap()
    png.loadFromData(resources.path(resources.APP_ICON_PNG).read_bytes())
    icon.addPixmap(png)
    return icon


def create_application(argv: Sequence[str] | None = None) -> QApplication:
    """The QApplication, configured for Ember (or the existing one, reconfigured)."""
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        app = existing
    else:
        QGuiApplication.setHighDpiScaleFactorRoundingPolicy(
            Qt.HighDpiScaleFactorRoundingPolicy.PassThrough
        )
        app = QApplication(list(argv) if argv is not None else sys.argv)
    app.setApplicationName("Ember")
    app.setApplicationDisplayName("Ember")
    app.setApplicationVersion(__version__)
    app.setOrganizationName("Ember")
    app.setDesktopFileName("ember")
    app.setStyle("Fusion")
    app.setFont(theme.app_font())
    app.setWindowIcon(app_icon())
    return app


# Only macOS sends QFileOpenEvent. Elsewhere an application-wide event filter would only cost a
# Python call for every event of every object (thousands while the window is being built).
FILE_OPEN_EVENTS = sys.platform == "darwin"


class _FileOpenFilter(QObject):
    """Collects the files the OS asks the app to open (``QEvent.FileOpen``); once a handler is
    set, passes them on, including those that came before. ``listen``: filter the app's
    events (by default only where the OS sends FileOpen)."""

    def __init__(self, app: QApplication, listen: bool = FILE_OPEN_EVENTS) -> None:
        super().__init__(app)
        self.pending: list[str] = []
        self._handler: Callable[[list[str]], object] | None = None
        if listen:
            app.installEventFilter(self)

    def set_handler(self, handler: Callable[[list[str]], object]) -> None:
        self._handler = handler
        if self.pending:
            files, self.pending = self.pending, []
            handler(files)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.FileOpen and isinstance(event, QFileOpenEvent):
            path = event.file() or event.url().toLocalFile()
            if path:
                if self._handler is not None:
                    self._handler([path])
                else:
                    self.pending.append(path)
                return True
        return super().eventFilter(watched, event)


def _close_on_signals(window: MainWindow) -> None:
    """Ctrl+C in a terminal or a polite kill (SIGTERM) closes the window the normal way, so an
    answer being written is saved as stopped. Python runs signal handlers only between
    bytecodes; the status bar's timers make sure that happens within seconds."""

    def close(_signum: int, _frame: object) -> None:
        QTimer.singleShot(0, window.close)

    for name in ("SIGINT", "SIGTERM"):
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, close)


class _AfterFirstPaint(QObject):
    """Runs its callbacks once, in the order they were added, on the event loop's turn after
    ``window`` was first exposed (Qt paints a widget window while handling its expose), or
    after ``fallback_ms`` if it is not exposed by then (started minimised, say), so that the
    work never waits on the screen."""

    def __init__(self, window: QWidget, fallback_ms: int = 1000) -> None:
        super().__init__(window)
        self.callbacks: list[Callable[[], object]] = []
        self.done = False
        self._handle = window.windowHandle()
        if self._handle is not None:
            self._handle.installEventFilter(self)
        QTimer.singleShot(fallback_ms, self, self._fire)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        handle = self._handle
        if event.type() == QEvent.Type.Expose and handle is not None and handle.isExposed():
            handle.removeEventFilter(self)
            QTimer.singleShot(0, self, self._fire)
        return super().eventFilter(watched, event)

    def _fire(self) -> None:
        if not self.done:
            self.done = True
            for callback in self.callbacks:
                callback()


def _after_first_paint(window: QWidget, callback: Callable[[], object]) -> None:
    """Call ``callback`` once ``window`` has been painted (see :class:`_AfterFirstPaint`)."""
    hook = window.findChild(_AfterFirstPaint)
    if hook is None:
        hook = _AfterFirstPaint(window)
    if hook.done:
        QTimer.singleShot(0, window, callback)
    else:
        hook.callbacks.append(callback)


def _run_in_turns(window: QWidget, steps: Sequence[Callable[[], object]]) -> None:
    """Run ``steps`` in order, one per turn of the event loop, while ``window`` is open."""
    if steps and window.isVisible():  # closed: EMBER_QUIT_AFTER_START=0, say
        steps[0]()
        if len(steps) > 1:
            QTimer.singleShot(0, window, lambda: _run_in_turns(window, steps[1:]))


QUIT_HOOK = "EMBER_QUIT_AFTER_START"
SHOWN_HOOK = "EMBER_REPORT_SHOWN"


def _report_shown(window: QWidget) -> None:
    """For bench/startup.py: with ``EMBER_REPORT_SHOWN=1``, print ``ember: window shown at
    <time.time()>`` to stderr once the window has been painted, so that a start-up can be
    timed from outside the process."""
    if os.environ.get(SHOWN_HOOK, "").strip() not in ("", "0"):

        def report() -> None:
            print(f"ember: window shown at {time.time():.6f}", file=sys.stderr, flush=True)

        _after_first_paint(window, report)


def _quit_after_start(window: MainWindow) -> None:
    """For smoke tests of a build: ``EMBER_QUIT_AFTER_START=<seconds>`` closes the window that
    long after it was shown (painted), through the normal shutdown path."""
    value = os.environ.get(QUIT_HOOK, "").strip()
    if not value:
        return
    try:
        seconds = max(0.0, float(value))
    except ValueError:
        seconds = 1.0
    _after_first_paint(
        window, lambda: QTimer.singleShot(round(seconds * 1000), window, window.close)
    )


def run_gui(files: Sequence[str] = ()) -> int:
    """Open the main window (loading the first of ``files``, if any) and run until it is
    closed; returns the exit code. If Ember is already running, hand ``files`` to it instead."""
    app = create_application(sys.argv[:1])
    opener = _FileOpenFilter(app)
    instance = SingleInstance()
    try:
        if not instance.start(list(files)):
            return 0  # the running Ember came to the front and took the files
    except SingleInstanceError as error:
        QMessageBox.warning(None, "Ember", str(error))
        return 1
    return _run_first_instance(app, instance, opener, list(files))


def _start_up_steps(
    window: MainWindow, services: Services, opener: _FileOpenFilter, files: list[str]
) -> Callable[[], None]:
    """What start-up does once the window has been painted, one step per event-loop turn (a
    click or a key press in between is handled)."""

    def start_services() -> None:
        given = files + opener.pending
        if not any(f.lower().endswith(".gguf") for f in given):
            window.controller.load_chat_model()  # the open chat's own model, not the last one
        window.start_background_services(given)
        opener.pending.clear()
        opener.set_handler(window.open_files)

    def freeze_start_up_objects() -> None:
        # They live as long as the app; keep the cyclic GC from rescanning them (a full
        # collection over them is a visible pause while an answer streams).
        gc.collect()
        gc.freeze()

    steps = [
        start_services,  # first: the model the user waits for starts loading
        lambda: window.models_pane,  # building it resumes unfinished downloads
        lambda: window.server_pane,
        freeze_start_up_objects,
        services.warm_up,
    ]
    return lambda: _run_in_turns(window, steps)


def _run_first_instance(
    app: QApplication, instance: SingleInstance, opener: _FileOpenFilter, files: list[str]
) -> int:
    import qasync

    from app.chats.models import ChatStoreError
    from app.ui.errors import ErrorReporter, setup_file_logging
    from app.ui.main_window import MainWindow
    from app.ui.services import create_services
    from app.ui.theme import ThemeManager

    log_file = setup_file_logging()
    log.info("Ember %s starting; logging to %s", __version__, log_file)
    window: MainWindow | None = None
    reporter = ErrorReporter(lambda: window)
    reporter.install()
    collector = GuiCollector(app)  # from now on, Qt objects are freed on the GUI thread only
    try:
        services = create_services()
    except ChatStoreError as error:
        QMessageBox.critical(None, "Ember cannot start", str(error))
        reporter.uninstall()
        instance.close()
        return 1
    themes = ThemeManager(app, services.settings.get("ui.theme"))
    themes.apply()
    try:
        window = MainWindow(services, themes)
        services.engine.answers_changed.connect(collector.on_answers_changed)
        instance.message_received.connect(window.on_instance_message)
        _close_on_signals(window)
        window.show()
        _report_shown(window)
        _quit_after_start(window)
        _after_first_paint(window, _start_up_steps(window, services, opener, files))
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        with loop:
            code = loop.run_forever()
        return int(code or 0)
    finally:
        services.close()
        instance.close()
        reporter.uninstall()
        log.info("Ember stopped")
