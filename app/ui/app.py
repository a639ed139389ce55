"""``run_gui()``: start the desktop app (what ``ember`` without arguments does)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from importlib import resources

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication, QIcon, QPixmap
from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__
from app.chats.models import ChatStoreError
from app.ui import theme
from app.ui.errors import ErrorReporter, setup_file_logging
from app.ui.main_window import MainWindow
from app.ui.services import create_services
from app.ui.single_instance import SingleInstance, SingleInstanceError
from app.ui.theme import ThemeManager

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


def run_gui(argv: Sequence[str] | None = None) -> int:
    """Open the main window and run until it is closed; returns the exit code."""
    import qasync

    app = create_application(argv)
    log_file = setup_file_logging()
    instance = SingleInstance()
    try:
        if not instance.start(list(argv or [])):
            log.info("Ember is already running; it was asked to come to the front")
            return 0
    except SingleInstanceError as error:
        QMessageBox.warning(None, "Ember", str(error))
        return 1
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
        window.start_background_services()
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
