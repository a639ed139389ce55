"""``run_gui(files)``: start the desktop app (what ``ember`` and ``ember FILE.gguf`` do).

A second launch only creates the QApplication and asks the running Ember to take its files
(single_instance.py); the main window, the engine and the chat store are imported only by the
first instance, so handing over is quick. Files also arrive as ``QFileOpenEvent`` (macOS
Finder's "Open With", a file dropped on the Dock icon): ``_FileOpenFilter`` catches them, even
before the window exists.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QFileOpenEvent, QGuiApplication, QIcon, QPixmap
from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__
from app.ui import theme
from app.ui.single_instance import SingleInstance, SingleInstanceError

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow

log = logging.getLogger(__name__)


def app_icon() -> QIcon:
    icon = QIcon()
    base = resources.files("app.ui.resources")
    png = QPixmap()
    png.loadFromData(base.joinpath("icon.png").read_bytes())
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


class _FileOpenFilter(QObject):
    """Collects the files the OS asks the app to open (``QEvent.FileOpen``); once a handler is
    set, passes them on, including those that came before."""

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        self.pending: list[str] = []
        self._handler: Callable[[list[str]], object] | None = None
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


QUIT_HOOK = "EMBER_QUIT_AFTER_START"


def _quit_after_start(window: MainWindow) -> None:
    """For smoke tests of a build: ``EMBER_QUIT_AFTER_START=<seconds>`` closes the window that
    long after it was shown, through the normal shutdown path."""
    value = os.environ.get(QUIT_HOOK, "").strip()
    if not value:
        return
    try:
        seconds = max(0.0, float(value))
    except ValueError:
        seconds = 1.0
    QTimer.singleShot(round(seconds * 1000), window.close)


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
        instance.message_received.connect(window.on_instance_message)
        _close_on_signals(window)
        window.show()
        _quit_after_start(window)
        window.start_background_services(files + opener.pending)
        opener.pending.clear()
        opener.set_handler(window.open_files)
        # Start-up objects live as long as the app; keep the cyclic GC from rescanning them
        # (a full collection over them is a visible pause while an answer streams).
        gc.collect()
        gc.freeze()
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
