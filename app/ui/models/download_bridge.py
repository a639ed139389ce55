"""Turns the DownloadManager's events (raised on its worker threads) into Qt signals.

``DownloadBridge`` subscribes to the manager with a :class:`~app.ui.relay.Relay`'s ``send``
(the manager's threads hold nothing of the bridge, and a send racing the bridge's deletion
does nothing); every event crosses to the GUI thread through a queued signal and updates
``downloads`` (the latest snapshot of each download) there.

Signals (GUI thread): ``changed(Download)`` for an added or updated download;
``removed(str id)``; ``completed(Download)`` once per finished download, with its paths;
``active_changed(int)``: how many are queued, running or verifying.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.library.download_state import Download, DownloadEvent, DownloadState
from app.library.downloads import DownloadManager
from app.ui.relay import Relay

ACTIVE = (DownloadState.QUEUED, DownloadState.DOWNLOADING, DownloadState.VERIFYING)


class DownloadBridge(QObject):
    """See the module docstring."""

    changed = Signal(object)
    removed = Signal(str)
    completed = Signal(object)
    active_changed = Signal(int)

    def __init__(self, manager: DownloadManager, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.manager = manager
        self.downloads: dict[str, Download] = {d.id: d for d in manager.list()}
        self._active = self.active_count
        relay = Relay(self._on_event, self)
        unsubscribe = manager.subscribe(relay.send)
        self.destroyed.connect(lambda *_: unsubscribe())  # the Python side may be gone by then

    # queries ------------------------------------------------------------------------------

    @property
    def active_count(self) -> int:
        return sum(1 for d in self.downloads.values() if d.state in ACTIVE)

    def find(self, repo_id: str, filename: str) -> Download | None:
        """The newest download of ``filename`` from ``repo_id`` (any state), if any."""
        found = None
        for download in self.downloads.values():
            if download.repo_id == repo_id and filename in download.filenames:
                found = download
        return found

    # events -------------------------------------------------------------------------------

    def _on_event(self, event: DownloadEvent) -> None:
        download = event.download
        if event.kind == "removed":
            self.downloads.pop(download.id, None)
            self.removed.emit(download.id)
        else:
            previous = self.downloads.get(download.id)
            if event.kind == "progress" and previous is not None and previous.state.is_final:
                return  # a late progress event must not undo the final state
            self.downloads[download.id] = download
            self.changed.emit(download)
            finished_now = previous is None or previous.state != DownloadState.COMPLETED
            if download.state == DownloadState.COMPLETED and finished_now:
                self.completed.emit(download)
        active = self.active_count
        if active != self._active:
            self._active = active
            self.active_changed.emit(active)
