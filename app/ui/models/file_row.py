"""One downloadable model in a repository's file list: name, size, fit badge, Download."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.engine.gguf_format import human_bytes
from app.library.download_state import Download, DownloadState
from app.library.hub import ModelFile
from app.ui import icons, theme
from app.ui.models import fit
from app.ui.models.widgets import Chip, ElidedLabel

_FIT_KINDS = {"fits": "success", "tight": "warning", "wont_fit": "danger"}
_WONT_FIT_TIP = "Probably too big for this computer's free memory (hover the badge for why)"


class FileRow(QFrame):
    """One downloadable model: name, size, fit badge, Download button."""

    def __init__(self, model: ModelFile, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("FileRow")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.model = model
        self.fit_requested = False
        name = model.name + (f"  ·  {model.split_count} parts" if model.is_split else "")
        # Ends in "…" in a narrow page instead of pushing the badge and button out of the row.
        self.name = ElidedLabel(name, self)
        self.name.setObjectName("FileName")
        self.name.setToolTip("\n".join(model.filenames))
        self.size_label = QLabel(human_bytes(model.size), self)
        self.size_label.setObjectName("FileSize")
        self.size_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.size_label.setMinimumWidth(64)
        self.fit = Chip("Checking…", "plain", self)
        self.fit.setToolTip("Reading the file's header to estimate the memory it needs…")
        self.fit.setMinimumWidth(72)
        self.fit.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.button = QPushButton("Download", self)
        self.button.setObjectName("DownloadButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.setMinimumWidth(150)
        icons.set_icon(self.button, "download", "accent_text", 16)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 8, 10, 8)
        layout.setSpacing(12)
        layout.addWidget(self.name, 1)
        layout.addWidget(self.size_label)
        layout.addWidget(self.fit)
        layout.addWidget(self.button)
        self.state = "download"
        self._icon = "download"

    @property
    def wont_fit(self) -> bool:
        return self.button.property("fit") == "wont_fit"

    def set_fit(self, badge: fit.FitBadge | None, error: str | None = None) -> None:
        if badge is None:
            self.fit.setText("Unknown")
            self.fit.set_kind("plain")
            self.fit.setToolTip(f"Ember could not estimate the memory this file needs: {error}")
        else:
            self.fit.setText(badge.label)
            self.fit.set_kind(_FIT_KINDS[badge.level])
            self.fit.setToolTip(badge.tooltip)
        # A file that will not fit keeps its button, subdued: the accent goes to those that do.
        theme.set_style_property(self.button, "fit", badge.level if badge else "unknown")
        self._refresh_icon()
        if self.state == "download":
            self.button.setToolTip(_WONT_FIT_TIP if self.wont_fit else "")

    def set_download(self, download: Download | None, installed: bool) -> None:
        """ "Downloaded", "Downloading 40%", "Paused 40%", "Retry" or "Download"."""
        percent = f"{download.fraction:.0%}" if download and download.total_bytes else ""
        state = download.state if download is not None else None
        if installed:
            text, self.state, icon, enabled = "Downloaded", "installed", "check", False
        elif state in (DownloadState.DOWNLOADING, DownloadState.QUEUED):
            busy = state == DownloadState.DOWNLOADING and percent
            text = f"Downloading {percent}" if busy else "Queued…"
            self.state, icon, enabled = "running", "download", True
        elif state == DownloadState.VERIFYING:
            text, self.state, icon, enabled = "Verifying…", "running", "check", True
        elif state == DownloadState.PAUSED:
            text = f"Paused {percent}".strip()
            self.state, icon, enabled = "running", "download", True
        elif state == DownloadState.FAILED:
            text, self.state, icon, enabled = "Retry download", "retry", "regenerate", True
        else:
            text, self.state, icon, enabled = "Download", "download", "download", True
        self.button.setText(text)
        self.button.setEnabled(enabled)
        theme.set_style_property(self.button, "state", self.state)
        self._icon = icon
        self._refresh_icon()
        if download is not None and state == DownloadState.FAILED and download.error:
            self.button.setToolTip(download.error)
        elif self.state == "download" and self.wont_fit:
            self.button.setToolTip(_WONT_FIT_TIP)
        else:
            self.button.setToolTip("")

    def _refresh_icon(self) -> None:
        accent = self.state == "retry" or (self.state == "download" and not self.wont_fit)
        icons.set_icon(self.button, self._icon, "accent_text" if accent else "muted", 16)
