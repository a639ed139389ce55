"""Downloads: one live row per download, newest first, fed by the DownloadBridge.

A row shows the file, its repository, a progress bar, bytes, speed and time left, and the
actions its state allows: Pause / Resume / Cancel while unfinished, the error and Retry when
it failed, Load when it completed. Manager calls return at once (the work is on its threads).

Signals: ``load_requested(str path)``; ``discover_requested()`` (the empty state's button).
"""

from __future__ import annotations

import contextlib
import html

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.gguf_format import human_bytes
from app.library.download_state import Download, DownloadState
from app.library.downloads import DownloadManager
from app.library.quant import model_stem
from app.ui import icons, theme
from app.ui.models.download_bridge import DownloadBridge
from app.ui.models.widgets import ElidedLabel, IconLabel, StatePanel, duration, scroll_list

S = DownloadState


def status_text(d: Download) -> str:
    """ "120 MB of 250 MB · 4.2 MB/s · 32 s left", "Paused · 120 MB of 250 MB", …"""
    amount = f"{human_bytes(d.done_bytes)} of {human_bytes(d.total_bytes)}" if d.total_bytes else ""
    if d.state == S.QUEUED:
        return " · ".join(x for x in ("Waiting to start", amount) if x)
    if d.state == S.DOWNLOADING:
        if not d.total_bytes:
            return d.note or "Reading the repository…"
        parts = [amount]
        if d.speed > 0:
            parts.append(f"{human_bytes(int(d.speed))}/s")
        if d.eta is not None:
            parts.append(f"{duration(d.eta)} left")
        if d.note:
            parts.append(d.note)
        return " · ".join(parts)
    if d.state == S.VERIFYING:
        return "Checking the file and moving it into place…"
    if d.state == S.PAUSED:
        return " · ".join(x for x in ("Paused", amount) if x)
    if d.state == S.COMPLETED:
        return f"Downloaded · {human_bytes(d.total_bytes)}"
    if d.state == S.CANCELLED:
        return "Cancelled"
    return "Failed"


class DownloadRow(QFrame):
    """One download. ``update_from`` redraws it from a snapshot."""

    def __init__(self, download: Download, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("DownloadRow")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.download = download
        self.icon = IconLabel("download", 20, "muted", self)
        # both end in "…" in a narrow page (they made the list scroll sideways at 640 px)
        self.name = ElidedLabel("", self)
        self.name.setObjectName("DownloadName")
        # the name first; the repository gets what is left
        self.name.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.repo = ElidedLabel("", self)
        self.repo.setObjectName("DownloadRepo")
        self.bar = QProgressBar(self)
        self.bar.setObjectName("DownloadBar")
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(6)
        self.status = QLabel(self)
        self.status.setObjectName("DownloadStatus")
        self.status.setWordWrap(True)
        self.error = QLabel(self)
        self.error.setObjectName("DownloadError")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.primary = QPushButton(self)
        self.primary.setObjectName("RowAction")
        self.primary.setCursor(Qt.CursorShape.PointingHandCursor)
        self.cancel = QToolButton(self)
        self.cancel.setObjectName("RowIconButton")
        self.cancel.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.cancel, "close", size=16)
        head = QHBoxLayout()
        head.setSpacing(8)
        head.addWidget(self.name)
        head.addWidget(self.repo, 1)
        text = QVBoxLayout()
        text.setSpacing(5)
        text.addLayout(head)
        text.addWidget(self.bar)
        text.addWidget(self.status)
        text.addWidget(self.error)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 12, 12, 12)
        layout.setSpacing(14)
        layout.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(text, 1)
        layout.addWidget(self.primary, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.cancel, 0, Qt.AlignmentFlag.AlignVCenter)
        self.update_from(download)

    def update_from(self, d: Download) -> None:
        self.download = d
        extra = f" (+{len(d.filenames) - 1} files)" if len(d.filenames) > 1 else ""
        self.name.set_full_text(model_stem(d.filename or d.repo_id) + extra)
        self.name.setToolTip("\n".join(d.filenames))
        self.repo.set_full_text(d.repo_id)
        self.bar.setValue(int(d.fraction * 1000))
        self.bar.setVisible(d.state not in (S.COMPLETED, S.CANCELLED))
        theme.set_style_property(self.bar, "state", d.state.value)
        if d.state == S.DOWNLOADING and not d.total_bytes:
            self.bar.setRange(0, 0)  # reading the repository: indeterminate
        else:
            self.bar.setRange(0, 1000)
        self.status.setText(status_text(d))
        failed = d.state == S.FAILED
        self.error.setText(d.error or "")
        self.error.setVisible(failed and bool(d.error))
        theme.set_style_property(self, "state", d.state.value)  # the failed row's red border
        icon, role = {
            S.COMPLETED: ("check", "success"),
            S.FAILED: ("alert", "danger"),
            S.PAUSED: ("pause", "muted"),
            S.CANCELLED: ("close", "faint"),
        }.get(d.state, ("download", "accent"))
        self.icon.set_icon(icon, role)
        action = {
            S.QUEUED: "Pause",
            S.DOWNLOADING: "Pause",
            S.PAUSED: "Resume",
            S.FAILED: "Retry",
            S.CANCELLED: "Retry",
            S.COMPLETED: "Load",
        }.get(d.state)
        self.primary.setText(action or "")
        self.primary.setVisible(action is not None)
        theme.set_style_property(self.primary, "accent", action in ("Load", "Retry"))
        primary_icon = {"Pause": "pause", "Resume": "play", "Retry": "regenerate", "Load": "chat"}
        if action:
            role = "accent_text" if action in ("Load", "Retry") else "icon"
            icons.set_icon(self.primary, primary_icon[action], role, size=15)
        finished = d.state.is_final
        self.cancel.setToolTip("Remove from the list" if finished else "Cancel the download")
        self.cancel.setAccessibleName(
            icons.spoken("Remove from the list" if finished else "Cancel the download")
        )
        self.cancel.setEnabled(d.state != S.VERIFYING)


class DownloadsView(QWidget):
    """See the module docstring."""

    load_requested = Signal(str)
    discover_requested = Signal()

    def __init__(
        self, manager: DownloadManager, bridge: DownloadBridge, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("DownloadsView")
        self.manager = manager
        self.bridge = bridge
        self.rows: dict[str, DownloadRow] = {}
        self.summary = QLabel(self)
        self.summary.setObjectName("ResultsCaption")
        self.clear_button = QPushButton("Clear finished", self)
        self.clear_button.setObjectName("SecondaryButton")
        self.clear_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.clear_button.clicked.connect(self.clear_finished)
        bar = QHBoxLayout()
        bar.addWidget(self.summary, 1)
        bar.addWidget(self.clear_button)
        scroll, self.body, self.rows_layout = scroll_list("Downloads", self)
        self.empty = StatePanel(self)
        self.empty.show_state(
            "empty",
            "No downloads",
            "Models you download from Discover show up here while they arrive. "
            "Closing Ember pauses them; they continue when it starts again.",
            "Discover models",
            icon="download",
        )
        self.empty.action_clicked.connect(self.discover_requested)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.empty)
        self.stack.addWidget(scroll)
        self._list_page = scroll
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 4, 24, 16)
        layout.setSpacing(10)
        layout.addLayout(bar)
        layout.addWidget(self.stack, 1)
        bridge.changed.connect(self._on_download_changed)
        bridge.removed.connect(self._on_download_removed)
        for download in bridge.downloads.values():
            self._on_download_changed(download)
        self._update_summary()

    def row(self, download_id: str) -> DownloadRow | None:
        return self.rows.get(download_id)

    @Slot(object)
    def _on_download_changed(self, download: Download) -> None:
        row = self.rows.get(download.id)
        if row is None:
            row = DownloadRow(download, self.body)
            row.primary.clicked.connect(self._on_primary_clicked)
            row.cancel.clicked.connect(self._on_cancel_clicked)
            self.rows[download.id] = row
            self.rows_layout.insertWidget(0, row)  # newest first
        else:
            row.update_from(download)
        self._update_summary()

    @Slot(str)
    def _on_download_removed(self, download_id: str) -> None:
        row = self.rows.pop(download_id, None)
        if row is not None:
            row.deleteLater()
        self._update_summary()

    def _row_of(self, sender: object) -> DownloadRow | None:
        widget = sender.parentWidget() if isinstance(sender, QWidget) else None
        return widget if isinstance(widget, DownloadRow) else None

    @Slot()
    def _on_primary_clicked(self) -> None:
        row = self._row_of(self.sender())
        if row is None:
            return
        d = row.download
        try:
            if d.state in (S.QUEUED, S.DOWNLOADING):
                self.manager.pause(d.id)
            elif d.state == S.PAUSED:
                self.manager.resume(d.id)
            elif d.state in (S.FAILED, S.CANCELLED):
                self.manager.retry(d.id)
            elif d.state == S.COMPLETED and d.paths:
                self.load_requested.emit(str(d.paths[0]))
        except KeyError:  # removed meanwhile
            pass

    @Slot()
    def _on_cancel_clicked(self) -> None:
        row = self._row_of(self.sender())
        if row is None:
            return
        d = row.download
        try:
            if d.state.is_final:
                self.manager.remove(d.id)
            else:
                self.manager.cancel(d.id)
        except (KeyError, ValueError):
            pass

    @Slot()
    def clear_finished(self) -> None:
        for download_id, row in list(self.rows.items()):
            if row.download.state in (S.COMPLETED, S.CANCELLED):
                with contextlib.suppress(KeyError, ValueError):
                    self.manager.remove(download_id)

    def _update_summary(self) -> None:
        downloads = [row.download for row in self.rows.values()]
        self.stack.setCurrentWidget(self._list_page if downloads else self.empty)
        running = sum(1 for d in downloads if d.state in (S.QUEUED, S.DOWNLOADING, S.VERIFYING))
        failed = sum(1 for d in downloads if d.state == S.FAILED)
        parts = []
        if running:
            parts.append(f"{running} downloading")
        paused = sum(1 for d in downloads if d.state == S.PAUSED)
        if paused:
            parts.append(f"{paused} paused")
        if failed:
            parts.append(f"{failed} failed")
        done = sum(1 for d in downloads if d.state == S.COMPLETED)
        if done:
            parts.append(f"{done} finished")
        self.summary.setText(html.escape(" · ".join(parts)))
        self.clear_button.setVisible(any(d.state in (S.COMPLETED, S.CANCELLED) for d in downloads))
