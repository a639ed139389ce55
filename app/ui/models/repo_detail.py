"""One Hub repository: its files grouped by quantization, with a fit badge and a Download
button each, and its model card.

Everything slow runs on the task runner, on the page's "hub" lane and this view's "fit" lane:
listing files (and which are already downloaded), the model card (fetched and rendered to HTML
off the GUI thread), and the fit badges, which are computed only for the rows that are on
screen (a header read per file). Latest wins (the runner's keys): opening another repository
cancels the previous one's file listing, card and fit checks (their answers are never shown;
the checks that have not started never run).

Signals: ``download_requested(str repo_id, object ModelFile)``;
``show_downloads_requested()`` (a row whose download is running was clicked).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings
from app.library import hub, hub_errors
from app.library.download_state import Download
from app.library.downloads import DownloadManager
from app.library.hub import RepoFiles, RepoSummary
from app.ui import icons
from app.ui.models import fit
from app.ui.models.card import fetch_card, render_again
from app.ui.models.download_bridge import DownloadBridge
from app.ui.models.file_row import FileRow
from app.ui.models.widgets import StatePanel, compact_count, counted, relative_time
from app.ui.task_runner import Lane, tasks

log = logging.getLogger(__name__)

# This view's jobs, each under its own key (``RepoDetail._key``): a newer one supersedes the
# older, and opening another repository cancels them all.
HUB_JOBS = ("files", "card", "installed")

SHORT_DETAIL_HEIGHT = 360  # shorter, the head scrolls with the files
HEAD_ROW_WIDTH = 640  # narrower, the Hub button sits under the title and facts

QUANT_NOTES = {
    "Q2_K": "smallest, noticeably lower quality",
    "Q3_K_S": "very small, lower quality",
    "Q3_K_M": "small, lower quality",
    "Q3_K_L": "small, fair quality",
    "Q4_0": "small, good quality",
    "Q4_K_S": "small, good quality",
    "Q4_K_M": "balanced size and quality — recommended",
    "Q5_K_S": "larger, high quality",
    "Q5_K_M": "larger, high quality",
    "Q6_K": "large, near the original",
    "Q8_0": "large, practically lossless",
    "BF16": "full precision, largest",
    "F16": "full precision, largest",
    "F32": "unquantized, very large",
}


class RepoDetail(QWidget):
    """See the module docstring."""

    download_requested = Signal(str, object)
    show_downloads_requested = Signal()

    def __init__(
        self,
        settings: Settings,
        manager: DownloadManager,
        bridge: DownloadBridge,
        hub_lane: Lane,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("RepoDetail")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.settings = settings
        self.manager = manager
        self.bridge = bridge
        self.hub_lane = hub_lane
        self.fit_lane = Lane("fit", 2, wait_on_quit=False)
        self.summary: RepoSummary | None = None
        self.files: RepoFiles | None = None
        self.rows: dict[str, FileRow] = {}
        self.installed: set[str] = set()
        self._card_markdown = ""
        self._scope = object()  # keeps this view's task keys apart from everyone else's

        self.state = StatePanel(self)
        self.state.show_state(
            "empty",
            "Choose a model",
            "Pick a result on the left to see its files, what fits this computer, and its "
            "model card.",
            icon="box",
        )
        self.state.action_clicked.connect(self._on_retry_clicked)
        self.content = self._build_content()
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.state)
        self.stack.addWidget(self.content)
        layout = QVBoxLayout(self)
        # Children inside the rounded border: with 1 px their square corners hid its curves.
        layout.setContentsMargins(5, 5, 5, 5)
        layout.addWidget(self.stack)
        self._fit_timer = QTimer(self)
        self._fit_timer.setSingleShot(True)
        self._fit_timer.setInterval(60)
        self._fit_timer.timeout.connect(self._request_visible_fits)
        bridge.changed.connect(self._on_download_changed)
        bridge.completed.connect(self._on_download_completed)

    def _build_content(self) -> QWidget:
        page = QWidget(self)
        self.title = QLabel(page)
        self.title.setObjectName("RepoTitle")
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title.setWordWrap(True)
        self.meta = QLabel(page)
        self.meta.setObjectName("RepoMeta")
        self.meta.setWordWrap(True)
        self.hub_button = QPushButton("Open on Hugging Face", page)
        self.hub_button.setObjectName("SecondaryButton")
        self.hub_button.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.hub_button, "external", size=15)
        self.hub_button.clicked.connect(self._on_hub_clicked)
        head = _RepoHead(self.title, self.meta, self.hub_button, page)

        self.body = QWidget(page)
        self.body.setObjectName("RepoBody")
        self.body_layout = QVBoxLayout(self.body)
        self.body_layout.setContentsMargins(24, 8, 24, 24)
        self.body_layout.setSpacing(6)
        self.files_box = QVBoxLayout()
        self.files_box.setSpacing(6)
        self.files_title = QLabel("Files", self.body)
        self.files_title.setObjectName("SectionHeading")
        self.fit_hint = QLabel(self.body)
        self.fit_hint.setObjectName("FieldHelp")
        self.fit_hint.setWordWrap(True)
        self.files_state = QLabel(self.body)
        self.files_state.setObjectName("FieldHelp")
        self.files_state.setWordWrap(True)
        self.card_title = QLabel("Model card", self.body)
        self.card_title.setObjectName("SectionHeading")
        self.card = QLabel(self.body)
        self.card.setObjectName("ModelCard")
        self.card.setWordWrap(True)
        self.card.setTextFormat(Qt.TextFormat.RichText)
        self.card.setOpenExternalLinks(True)
        self.card.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.card.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.body_layout.addWidget(self.files_title)
        self.body_layout.addWidget(self.fit_hint)
        self.body_layout.addSpacing(4)
        self.body_layout.addWidget(self.files_state)
        self.body_layout.addLayout(self.files_box)
        self.body_layout.addSpacing(20)
        self.body_layout.addWidget(self.card_title)
        self.body_layout.addWidget(self.card)
        self.body_layout.addStretch(1)
        self.scroll_area = QScrollArea(page)
        self.scroll_area.setObjectName("RepoScroll")
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setWidget(self.body)
        self.scroll_area.verticalScrollBar().valueChanged.connect(self._schedule_fits)
        self.scroll_area.viewport().installEventFilter(self)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(head)
        self._head, self._page_layout = head, layout
        layout.addWidget(self.scroll_area, 1)
        return page

    # -- opening a repository -------------------------------------------------------------

    def open_repo(self, summary: RepoSummary) -> None:
        """Show ``summary``'s repository; its files and card arrive in the background."""
        self._cancel_jobs()  # the repository shown before: its answers are never shown
        self.summary = summary
        self.files = None
        self.title.setText(summary.id)
        self.meta.setText(self._meta_text(summary))
        self._clear_rows()
        self.files_state.setText("Listing the files…")
        self.files_state.show()
        self.fit_hint.setText(self._fit_hint_text())
        self.card.setText("")
        self._card_markdown = ""
        self.card_title.hide()
        self.stack.setCurrentWidget(self.content)
        self.scroll_area.verticalScrollBar().setValue(0)
        repo_id = summary.id
        manager = self.manager

        def list_files() -> tuple[RepoFiles, set[str]]:
            files = hub.list_gguf_files(repo_id)
            return files, set(manager.installed_paths(repo_id, files.models))

        tasks().submit(
            list_files, self._on_files, self._show_error, key=self._key("files"), lane=self.hub_lane
        )
        self._fetch_card(partial(fetch_card, repo_id))

    def clear(self) -> None:
        self._cancel_jobs()
        self.summary = None
        self.files = None
        self._clear_rows()
        self.stack.setCurrentWidget(self.state)

    def recheck_installed(self) -> None:
        """Files may have been deleted (My models): ask the disk again, off-thread."""
        files, manager = self.files, self.manager
        if files is None:
            return

        def check() -> set[str]:
            return set(manager.installed_paths(files.repo_id, files.models))

        tasks().submit(
            check,
            self._on_installed,
            self._on_installed_failed,
            key=self._key("installed"),
            lane=self.hub_lane,
        )

    def _on_installed(self, installed: set[str]) -> None:
        self.installed = installed
        self._refresh_buttons()

    def _on_installed_failed(self, error: BaseException) -> None:
        log.debug("Could not check which files are downloaded", exc_info=error)

    def _key(self, job: str, *more: str) -> tuple[object, ...]:
        return (self._scope, job, *more)

    def _cancel_jobs(self) -> None:
        """Cancel the jobs for the repository shown: none of their answers arrive."""
        runner = tasks()
        for job in HUB_JOBS:
            runner.cancel_key(self._key(job))
        for filename in self.rows:
            runner.cancel_key(self._key("fit", filename))

    @staticmethod
    def _meta_text(s: RepoSummary) -> str:
        parts = [f"by {html.escape(s.author or s.id.split('/')[0])}"]
        parts.append(counted(s.downloads, "download", compact_count(s.downloads)))
        parts.append(counted(s.likes, "like", compact_count(s.likes)))
        updated = relative_time(s.last_modified)
        if updated:
            parts.append(f"updated {updated}")
        if s.params:
            parts.append(f"{s.params} params")
        if s.gated:
            parts.append("gated: accept its terms on the Hub and set HF_TOKEN")
        return "  ·  ".join(parts)

    def _fit_hint_text(self) -> str:
        n_ctx = self.settings.get("load.n_ctx")
        context = f"{n_ctx:,} tokens of context" if n_ctx else "the automatic context"
        return (
            f"Fit badges estimate the memory each file needs with {context} (Settings ▸ Model "
            "loading) against the memory free now. Hover a badge for the numbers."
        )

    def _on_files(self, result: tuple[RepoFiles, set[str]]) -> None:
        files, installed = result
        self.files, self.installed = files, installed
        self._fill_rows(files)

    def _fetch_card(self, job: Callable[[], tuple[str, str]]) -> None:
        tasks().submit(
            job, self._on_card, self._on_card_failed, key=self._key("card"), lane=self.hub_lane
        )

    def _on_card(self, result: tuple[str, str]) -> None:
        self._card_markdown, rich = result
        self.card.setText(rich if self._card_markdown.strip() else "")
        self.card_title.setVisible(bool(self._card_markdown.strip()))

    def _on_card_failed(self, error: BaseException) -> None:
        # A missing card is not worth an error: the files are what matter.
        log.debug("No model card for %s", self.summary, exc_info=error)

    def _show_error(self, error: BaseException) -> None:
        message = (
            str(error) if isinstance(error, hub_errors.HubError) else f"Unexpected error: {error}"
        )
        self.state.show_state("error", "Can't open this repository", message, "Try again")
        self.stack.setCurrentWidget(self.state)

    @Slot()
    def _on_retry_clicked(self) -> None:
        if self.summary is not None:
            self.open_repo(self.summary)

    # -- rows -----------------------------------------------------------------------------

    def _clear_rows(self) -> None:
        self.rows.clear()
        while self.files_box.count():
            item = self.files_box.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()

    def _fill_rows(self, files: RepoFiles) -> None:
        self._clear_rows()
        if not files.models:
            self.files_state.setText("This repository has no GGUF model files Ember can run.")
            return
        count = len(files.models)
        self.files_state.setText(f"{count} file{'s' if count != 1 else ''}")
        for quant, models in files.by_quant().items():
            self.files_box.addWidget(self._quant_heading(quant))
            for model in models:
                row = FileRow(model, self.body)
                row.button.clicked.connect(self._on_row_button_clicked)
                self.rows[model.filename] = row
                self.files_box.addWidget(row)
        if files.projectors:
            names = ", ".join(Path(p.filename).name for p in files.projectors)
            vision = QLabel(
                f"Vision adapter ({html.escape(names)}): downloaded with the model you choose.",
                self.body,
            )
            vision.setObjectName("FieldHelp")
            vision.setWordWrap(True)
            self.files_box.addWidget(vision)
        self._refresh_buttons()
        self._schedule_fits()

    def _quant_heading(self, quant: str) -> QWidget:
        box = QWidget(self.body)
        row = QHBoxLayout(box)
        row.setContentsMargins(2, 10, 0, 2)
        row.setSpacing(8)
        name = QLabel(quant, box)
        name.setObjectName("QuantHeading")
        name.setProperty("quant", quant)
        row.addWidget(name)
        note = QUANT_NOTES.get(quant.upper())
        if note:
            label = QLabel(note, box)
            label.setObjectName("QuantNote")
            row.addWidget(label)
        row.addStretch(1)
        return box

    def _refresh_buttons(self) -> None:
        if self.summary is None:
            return
        for filename, row in self.rows.items():
            download = self.bridge.find(self.summary.id, filename)
            row.set_download(download, filename in self.installed)

    @Slot()
    def _on_row_button_clicked(self) -> None:
        button = self.sender()
        row = button.parentWidget() if isinstance(button, QPushButton) else None
        if not isinstance(row, FileRow) or self.summary is None:
            return
        if row.state == "running":
            self.show_downloads_requested.emit()
            return
        download = self.bridge.find(self.summary.id, row.model.filename)
        if row.state == "retry" and download is not None:
            self.manager.retry(download.id)
            return
        self.download_requested.emit(self.summary.id, row.model)

    @Slot(object)
    def _on_download_changed(self, download: Download) -> None:
        if self.summary is None or download.repo_id != self.summary.id:
            return
        row = self.rows.get(download.filename)
        if row is not None:
            row.set_download(download, download.filename in self.installed)

    @Slot(object)
    def _on_download_completed(self, download: Download) -> None:
        if self.summary is not None and download.repo_id == self.summary.id:
            self.installed.add(download.filename)
            self._refresh_buttons()

    # -- fit badges (lazy) ----------------------------------------------------------------

    @Slot()
    def _schedule_fits(self) -> None:
        self._fit_timer.start()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # Short, the head scrolls with the files (kept above them, it was squeezed to a line)
        short = self.height() < SHORT_DETAIL_HEIGHT
        inside = self.body_layout.indexOf(self._head) >= 0
        if short != inside:
            (self._page_layout if inside else self.body_layout).removeWidget(self._head)
            head_layout = self._head.layout()
            if short:
                self.body_layout.insertWidget(0, self._head)
                if head_layout is not None:  # the files' margins, not its own as well
                    head_layout.setContentsMargins(0, 10, 0, 8)
            else:
                self._page_layout.insertWidget(0, self._head)
                if head_layout is not None:
                    head_layout.setContentsMargins(24, 18, 24, 14)

    def eventFilter(self, watched: object, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Resize:
            self._schedule_fits()
        return False

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.ApplicationPaletteChange and self._card_markdown:
            # The theme changed: render the card again in its colours (off-thread).
            self._fetch_card(partial(render_again, self._card_markdown))

    @Slot()
    def _request_visible_fits(self) -> None:
        files = self.files
        if files is None or self.summary is None:
            return
        commit = files.commit or files.revision
        for row in self.rows.values():
            if row.fit_requested or row.visibleRegion().isEmpty():
                continue
            row.fit_requested = True
            name = row.model.filename
            tasks().submit(
                partial(fit.check, files.repo_id, commit, row.model, self.settings),
                partial(self._on_fit, name),
                partial(self._on_fit_failed, name),
                key=self._key("fit", name),
                lane=self.fit_lane,
            )

    def _on_fit(self, filename: str, badge: fit.FitBadge) -> None:
        row = self.rows.get(filename)
        if row is not None:
            row.set_fit(badge)

    def _on_fit_failed(self, filename: str, error: BaseException) -> None:
        row = self.rows.get(filename)
        if row is not None:
            row.set_fit(None, str(error))

    @Slot()
    def _on_hub_clicked(self) -> None:
        if self.summary is not None:
            QDesktopServices.openUrl(QUrl(f"{hub.hub_endpoint()}/{self.summary.id}"))


class _RepoHead(QWidget):
    """The detail's header: title and facts on the left, the Hub link on the right."""

    def __init__(self, title: QLabel, meta: QLabel, button: QPushButton, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("RepoHead")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        text = QVBoxLayout()
        text.setSpacing(4)
        text.addWidget(title)
        text.addWidget(meta)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(24, 18, 24, 14)
        layout.setSpacing(16)
        layout.addLayout(text, 1)
        layout.addWidget(button, 0, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self._row = layout

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # narrow, the button goes under the facts: beside them it left the title two words
        # a line, cut at the bottom
        direction = QBoxLayout.Direction
        wanted = direction.LeftToRight if self.width() >= HEAD_ROW_WIDTH else direction.TopToBottom
        if self._row.direction() != wanted:
            self._row.setDirection(wanted)
            self._row.setSpacing(16 if wanted == direction.LeftToRight else 8)
