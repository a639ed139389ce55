"""The Models page's download bridge lives as long as its widget: deleting it unsubscribes it
from the download manager (there is no separate stop to forget)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.library.downloads import DownloadManager
from app.ui.models.download_bridge import DownloadBridge


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
