"""The Models page's download bridge lives as long as its widget: deleting it unsubscribes it
from the download manager (there is no separate stop to forget)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.library.download_state import Download, DownloadEvent, DownloadState
from app.library.downloads import DownloadManager
from app.ui.models.download_bridge import DownloadBridge
from app.ui.relay import Relay


def test_the_download_bridge_stops_listening_when_deleted(qtbot: QtBot, tmp_path: Path) -> None:
    manager = DownloadManager(tmp_path / "models", tmp_path / "downloads")
    try:
        bridge = DownloadBridge(manager)
        assert len(manager._subscribers) == 1
        bridge.deleteLater()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        assert manager._subscribers == []
    finally:
        manager.shutdown()


def test_a_manager_thread_holds_a_relay_not_the_bridge(qtbot: QtBot, tmp_path: Path) -> None:
    # A manager thread holding a bound method of the bridge would keep the bridge (and the
    # Models page under it) alive, and could drop the last reference off the GUI thread.
    manager = DownloadManager(tmp_path / "models", tmp_path / "downloads")
    try:
        bridge = DownloadBridge(manager)
        (subscriber,) = manager._subscribers
        assert isinstance(getattr(subscriber, "__self__", None), Relay)
        assert getattr(subscriber, "__self__", None) is not bridge

        # a send that races the deletion does nothing (no RuntimeError on the manager thread)
        bridge.deleteLater()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        errors: list[BaseException] = []
        thread = threading.Thread(target=_call, args=(subscriber, errors))
        thread.start()
        thread.join()
        assert errors == []
    finally:
        manager.shutdown()


def _call(subscriber: Callable[[DownloadEvent], None], errors: list[BaseException]) -> None:
    download = Download(
        "d1",
        "org/repo",
        "main",
        ("m.gguf",),
        DownloadState.DOWNLOADING,
        100,
        10,
        0.0,
        None,
        None,
        None,
        None,
        (),
    )
    try:
        subscriber(DownloadEvent("progress", download))
    except BaseException as error:  # what the manager's thread would have died of
        errors.append(error)
