"""Unexpected exceptions from any thread: logged to ``EMBER_HOME/logs/``, shown once, politely.

``ErrorReporter.install()`` replaces ``sys.excepthook`` and ``threading.excepthook``. The hooks
only log and post a queued signal; the dialog is shown on the GUI thread, and only for the first
error of the session (later ones are logged, so a loop of failures cannot bury the user in
dialogs).
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import cast

from PySide6.QtCore import QObject, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from app.config import paths, private_dir, private_file, private_opener

log = logging.getLogger(__name__)

LOG_FILE = "ember.log"

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files are readable by this user only: the log holds chat titles,
    file paths and error details (prompts, with the request log)."""

    def _open(self) -> io.TextIOWrapper:
        stream = open(  # noqa: SIM115 - the handler keeps the file open until it closes
            self.baseFilename,
            self.mode,
            encoding=self.encoding,
            errors=self.errors,
            opener=private_opener,
        )
        return cast("io.TextIOWrapper", stream)  # the handler's mode is always text


def setup_file_logging(level: int = logging.INFO) -> Path:
    """Log to ``logs/ember.log`` (rotated at 2 MB, 3 files kept, each 0600); returns the file."""
    logs = private_dir(paths().logs_dir)
    path = logs / LOG_FILE
    private_file(path)  # written by an Ember that did not make it private yet
    root = logging.getLogger()
    for handler in root.handlers:
        file_name = getattr(handler, "baseFilename", None)
        if isinstance(handler, logging.handlers.RotatingFileHandler) and file_name == str(path):
            return path
    handler = PrivateRotatingFileHandler(path, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    )
    handler.setLevel(level)
    if root.level > level or root.level == logging.NOTSET:
        # Let INFO reach the file without making the terminal chattier than it was.
        for existing in root.handlers:
            if existing.level == logging.NOTSET:
                existing.setLevel(root.level or logging.WARNING)
        root.setLevel(level)
    root.addHandler(handler)
    return path


class ErrorReporter(QObject):
    """Logs uncaught exceptions and shows one friendly dialog per session.

    Signals: ``error_reported(str summary)`` on the GUI thread, for every error.
    """

    error_reported = Signal(str)
    _posted = Signal(str, str)

    def __init__(
        self,
        parent_window: Callable[[], QWidget | None] | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._parent_window = parent_window or (lambda: None)
        self._shown = False
        self._previous_hooks: tuple[object, object] | None = None
        self.count = 0
        self._posted.connect(self._on_posted, Qt.ConnectionType.QueuedConnection)

    def install(self) -> None:
        self._previous_hooks = (sys.excepthook, threading.excepthook)
        sys.excepthook = self._sys_hook
        threading.excepthook = self._thread_hook

    def uninstall(self) -> None:
        if self._previous_hooks is not None:
            sys.excepthook, threading.excepthook = self._previous_hooks  # type: ignore[assignment]
            self._previous_hooks = None

    # -- hooks (any thread) ---------------------------------------------------------------

    def _sys_hook(
        self, kind: type[BaseException], error: BaseException, tb: TracebackType | None
    ) -> None:
        self.report((kind, error, tb), "main thread")

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None:
            return
        name = args.thread.name if args.thread is not None else "a thread"
        self.report((args.exc_type, args.exc_value, args.exc_traceback), name)

    def report(self, exc_info: ExcInfo, where: str) -> None:
        kind, error, tb = exc_info
        if issubclass(kind, KeyboardInterrupt):
            QApplication.quit()
            return
        details = "".join(traceback.format_exception(kind, error, tb))
        log.error("Unexpected error in %s:\n%s", where, details)
        summary = f"{kind.__name__}: {error}"
        self._posted.emit(summary, details)

    # -- GUI thread -----------------------------------------------------------------------

    @Slot(str, str)
    def _on_posted(self, summary: str, details: str) -> None:
        self.count += 1
        self.error_reported.emit(summary)
        if self._shown:
            return
        self._shown = True
        self.show_dialog(summary, details)

    def show_dialog(self, summary: str, details: str) -> None:
        log_dir = paths().logs_dir
        box = QMessageBox(self._parent_window())
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("Something went wrong")
        box.setText("Ember ran into an unexpected problem.")
        box.setInformativeText(
            "Your chats are saved, and you can keep working. If something looks wrong, "
            f"restart Ember. The details were written to {log_dir / LOG_FILE}.\n\n{summary}"
        )
        box.setDetailedText(details)
        open_logs = box.addButton("Open logs folder", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Ok)
        box.exec()
        if box.clickedButton() is open_logs:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_dir)))
