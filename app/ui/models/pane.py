"""The Models page: Discover (the Hub), Downloads, My models.

Threads: nothing here waits. Hub requests and header reads run on the page's "hub" lane of
the task runner (three threads), library calls on its one-thread "library" lane (in order);
quit abandons both (a Hub that does not answer never holds it). The DownloadManager's own
threads report
through the DownloadBridge (queued signals). Unfinished downloads are restored (and resumed)
when the page is created, which is at start-up.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QLabel,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from shiboken6 import isValid

from app.library.download_state import Download
from app.library.hub import ModelFile, RemoteFile
from app.library.local_model import LocalModel
from app.library.quant import model_stem, parse_quant
from app.ui.banner import Banner
from app.ui.models.discover import DiscoverView
from app.ui.models.download_bridge import DownloadBridge
from app.ui.models.downloads_view import DownloadsView
from app.ui.models.my_models import MyModelsView
from app.ui.models.repo_detail import RepoDetail
from app.ui.services import Services
from app.ui.task_runner import Lane, tasks
from app.ui.toast import Toast

DISCOVER = "discover"
DOWNLOADS = "downloads"
MY_MODELS = "my_models"
COMPACT_HEIGHT = 520  # shorter, the page hides its heading
TABS = ((DISCOVER, "Discover"), (DOWNLOADS, "Downloads"), (MY_MODELS, "My models"))
_PROJECTOR_PREFERENCE = ("F16", "BF16", "Q8_0", "F32")


def preferred_projector(projectors: tuple[RemoteFile, ...]) -> RemoteFile | None:
    """The vision projector to fetch with a model: F16 when there is one."""

    def rank(f: RemoteFile) -> int:
        quant = (parse_quant(f.filename) or "").upper()
        return _PROJECTOR_PREFERENCE.index(quant) if quant in _PROJECTOR_PREFERENCE else 99

    return min(projectors, key=rank) if projectors else None


class ModelsPane(QWidget):
    """Signals: ``load_requested(str path)``: the user chose "Load" on a model;
    ``downloads_active(int)``: how many downloads are queued or running (for the rail badge)."""

    load_requested = Signal(str)
    downloads_active = Signal(int)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelsPane")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.services = services
        s = services
        self._ready_toast: tuple[Toast, str] | None = None
        self._started_toast: tuple[Toast, str, str] | None = None  # and the download's id
        self.load_requested.connect(self._dismiss_ready_toast)
        self.hub_lane = Lane("hub", 3, wait_on_quit=False)
        self.library_lane = Lane("library", 1, wait_on_quit=False)
        self.bridge = DownloadBridge(s.downloads, self)
        self.detail = RepoDetail(s.settings, s.downloads, self.bridge, self.hub_lane)
        self.discover = DiscoverView(self.detail, self.hub_lane, self)
        self.downloads = DownloadsView(s.downloads, self.bridge, self)
        self.my_models = MyModelsView(s.library, s.settings, self.library_lane, self)
        self.banner = Banner(self)
        self.tabs: dict[str, QToolButton] = {}
        self.stack = QStackedWidget(self)
        self._pages: dict[str, QWidget] = {
            DISCOVER: self.discover,
            DOWNLOADS: self.downloads,
            MY_MODELS: self.my_models,
        }
        for page in self._pages.values():
            self.stack.addWidget(page)
        self._build_layout()
        self._connect()
        self._restore_downloads()

    def _build_layout(self) -> None:
        title = QLabel("Models", self)
        title.setObjectName("ModelsTitle")
        subtitle = QLabel(
            "Find models on Hugging Face, see what fits this computer, and manage the ones "
            "you have.",
            self,
        )
        subtitle.setObjectName("ModelsSubtitle")
        subtitle.setWordWrap(True)
        group = QButtonGroup(self)
        group.setExclusive(True)
        tab_row = QHBoxLayout()
        tab_row.setSpacing(4)
        for key, label in TABS:
            button = QToolButton(self)
            button.setObjectName("ModelsTab")
            button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            button.setText(label)
            button.setCheckable(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setProperty("page", key)
            button.clicked.connect(self._on_tab_clicked)
            group.addButton(button)
            self.tabs[key] = button
            tab_row.addWidget(button)
        tab_row.addStretch(1)
        self.tabs[DISCOVER].setChecked(True)
        header = QWidget(self)
        header.setObjectName("ModelsHeader")
        header.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        head = QVBoxLayout(header)
        head.setContentsMargins(24, 18, 24, 0)
        head.setSpacing(2)
        head.addWidget(title)
        head.addWidget(subtitle)
        self._heading = (title, subtitle)
        head.addSpacing(10)
        head.addLayout(tab_row)
        banner_row = QHBoxLayout()
        banner_row.setContentsMargins(24, 10, 24, 0)
        banner_row.addWidget(self.banner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(header)
        layout.addLayout(banner_row)
        layout.addSpacing(12)
        layout.addWidget(self.stack, 1)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # A short window keeps its height for the repository and the lists (at 480 px the
        # heading left a repository's title and facts squeezed into one line).
        for label in self._heading:
            label.setVisible(self.height() >= COMPACT_HEIGHT)

    def _connect(self) -> None:
        self.bridge.completed.connect(self._on_download_completed)
        self.bridge.changed.connect(self._on_download_changed)
        self.bridge.active_changed.connect(self._on_active_changed)
        self.detail.download_requested.connect(self._on_download_requested)
        self.detail.show_downloads_requested.connect(self._on_show_downloads_requested)
        self.downloads.load_requested.connect(self.load_requested)
        self.downloads.discover_requested.connect(self._on_discover_requested)
        self.my_models.load_requested.connect(self.load_requested)
        self.my_models.discover_requested.connect(self._on_discover_requested)
        self.my_models.library_changed.connect(self._on_library_changed)
        self.my_models.model_deleted.connect(self._on_model_deleted)

    # -- public ---------------------------------------------------------------------------

    def activate(self) -> None:
        """The page was shown: refresh what may be stale (cheap; work runs off the GUI thread)."""
        self.discover.ensure_searched()
        if not self.my_models.scanned:
            self.my_models.refresh()
        if self.current_tab == DISCOVER:
            self.discover.search.setFocus()

    @property
    def current_tab(self) -> str:
        page = self.stack.currentWidget()
        return next((key for key, widget in self._pages.items() if widget is page), DISCOVER)

    def show_tab(self, key: str) -> None:
        page = self._pages.get(key)
        if page is None:
            return
        self.stack.setCurrentWidget(page)
        self.tabs[key].setChecked(True)
        if key == MY_MODELS and not self.my_models.scanned:
            self.my_models.refresh()
        elif key == DISCOVER:
            self.discover.ensure_searched()

    # -- downloads ------------------------------------------------------------------------

    def _restore_downloads(self) -> None:
        manager = self.services.downloads
        tasks().submit(
            lambda: manager.restore(auto_resume=True),
            self._on_restored,
            self._on_restore_failed,
            lane=self.hub_lane,
        )

    def _on_restored(self, _result: object = None) -> None:
        self._on_active_changed(self.bridge.active_count)

    def _on_restore_failed(self, error: BaseException) -> None:
        self.banner.show_message("error", f"Could not restore unfinished downloads: {error}")
        self._on_restored()

    @Slot(str, object)
    def _on_download_requested(self, repo_id: str, model: ModelFile) -> None:
        manager = self.services.downloads
        files = self.detail.files
        projector = preferred_projector(files.projectors) if files is not None else None

        def start() -> Download:
            names = list(model.filenames)
            if projector is not None:
                alone = ModelFile(model_stem(projector.filename), None, (projector,))
                if manager.installed_path(repo_id, alone) is None:
                    names.append(projector.filename)
            return manager.start(repo_id, names if len(names) > 1 else model)

        tasks().submit(
            start, self._on_download_started, self._on_download_failed, lane=self.hub_lane
        )

    def _on_download_started(self, download: Download) -> None:
        text = f"Downloading {model_stem(download.filename)}"
        toast = Toast.show_in(self, text, "Show", self._on_show_downloads_requested)
        self._started_toast = (toast, text, download.id)

    def _on_download_failed(self, error: BaseException) -> None:
        self.banner.show_message("error", f"Could not start the download: {error}")

    @Slot(object)
    def _on_download_completed(self, download: Download) -> None:
        self.my_models.refresh()
        self.services.catalog.refresh()
        if not download.paths:
            return
        path = str(download.paths[0])
        text = f"{model_stem(download.filename)} is ready"
        toast = Toast.show_in(
            self, text, "Load", lambda: self.load_requested.emit(path), timeout_ms=10_000
        )
        self._ready_toast = (toast, text)

    @Slot(object)
    def _on_download_changed(self, download: Download) -> None:
        """A download that failed or was cancelled takes its "Downloading … · Show" toast
        with it (it said the download runs)."""
        started = self._started_toast
        if started is None or started[2] != download.id or not download.state.is_final:
            return
        self._started_toast = None
        toast, text, _ = started
        if isValid(toast) and toast.isVisible() and toast.label.text() == text:
            toast.dismiss()

    @Slot(str)
    def _dismiss_ready_toast(self, _path: str) -> None:
        """A model was loaded from the page (a row's Load): its "is ready · Load" toast has
        done its job."""
        if self._ready_toast is not None:
            toast, text = self._ready_toast
            self._ready_toast = None
            if isValid(toast) and toast.isVisible() and toast.label.text() == text:
                toast.dismiss()

    @Slot(int)
    def _on_active_changed(self, count: int) -> None:
        self.tabs[DOWNLOADS].setText(f"Downloads  {count}" if count else "Downloads")
        self.downloads_active.emit(count)

    @Slot()
    def _on_library_changed(self) -> None:
        models: list[LocalModel] = self.my_models.models
        count = len(models)
        self.tabs[MY_MODELS].setText(f"My models  {count}" if count else "My models")
        # The picker scans on its own; a scan it skipped while busy is caught up here.
        self.services.catalog.refresh()

    @Slot(str)
    def _on_model_deleted(self, path: str) -> None:
        self.detail.recheck_installed()
        Toast.show_in(self, f"Deleted {Path(path).name}")

    # -- tabs -----------------------------------------------------------------------------

    @Slot()
    def _on_tab_clicked(self) -> None:
        button = self.sender()
        if isinstance(button, QToolButton):
            self.show_tab(str(button.property("page")))

    @Slot()
    def _on_show_downloads_requested(self) -> None:
        self.show_tab(DOWNLOADS)

    @Slot()
    def _on_discover_requested(self) -> None:
        self.show_tab(DISCOVER)
