"""Discover: search the Hub for GGUF models and open one.

The search box is debounced (typing waits for a pause); sort, size and author filters apply at
once. Searches run on the page's "hub" lane, latest wins (the task runner's key): a search
still waiting for a thread is dropped when a newer one is made, and an answer to an older
search is never shown. Errors
(offline, rate-limited, a bad mirror) are shown in the results column with "Try again".

Signals: none of its own; the repository detail's are re-emitted by the page.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import QSize, Qt, QTimer, Slot
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.library import hub, hub_errors
from app.library.hub import RepoSummary, Sort
from app.ui import theme
from app.ui.models.repo_detail import RepoDetail
from app.ui.models.widgets import (
    Chip,
    ElidedLabel,
    StatePanel,
    compact_count,
    counted,
    relative_time,
    stat,
)
from app.ui.task_runner import Lane, tasks

DEBOUNCE_MS = 350
ONE_ROW_WIDTH = 960  # narrower, the search field takes a row above the filters (its hint cut)
SIDE_BY_SIDE_WIDTH = 900  # narrower, the results sit above the repository

RESULT_LIMIT = 60
SORTS: tuple[tuple[str, Sort], ...] = (
    ("Most downloaded", "downloads"),
    ("Most liked", "likes"),
    ("Trending", "trending"),
    ("Recently updated", "updated"),
)
SIZES: tuple[tuple[str, float | None, float | None], ...] = (
    ("Any size", None, None),
    ("Up to 3B", None, 3.5),
    ("3B – 9B", 2.5, 9.5),
    ("9B – 20B", 8.5, 20.5),
    ("20B – 40B", 19.5, 40.5),
    ("Over 40B", 39.5, None),
)


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    sort: Sort
    author: str | None
    min_params: float | None
    max_params: float | None

    @property
    def filtered(self) -> bool:
        return bool(self.text or self.author or self.min_params or self.max_params)


class ResultRow(QWidget):
    """One search result: name, author, size hint, downloads, likes, last update."""

    def __init__(self, summary: RepoSummary, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ResultRow")
        self.summary = summary
        name = ElidedLabel(summary.name, self)
        name.setObjectName("ResultName")
        name.setToolTip(summary.id)
        name.setText(summary.name)
        author = QLabel(summary.author or "", self)
        author.setObjectName("ResultAuthor")
        top = QHBoxLayout()
        top.setSpacing(8)
        top.addWidget(name, 1)
        if summary.gated:
            gated = Chip("Gated", "warning", self)
            gated.setToolTip("Accept the repository's terms on the Hub and set HF_TOKEN")
            top.addWidget(gated)
        if summary.params:
            top.addWidget(Chip(summary.params, "accent", self))
        bottom = QHBoxLayout()
        bottom.setSpacing(14)
        bottom.addWidget(author)
        bottom.addStretch(1)
        bottom.addWidget(stat("download", compact_count(summary.downloads), self))
        bottom.addWidget(stat("heart", compact_count(summary.likes), self))
        updated = relative_time(summary.last_modified)
        if updated:
            bottom.addWidget(stat("clock", updated, self))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(3)
        layout.addLayout(top)
        layout.addLayout(bottom)
        for label in self.findChildren(QLabel):
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)


class DiscoverView(QWidget):
    """See the module docstring. ``detail`` is the repository view on the right."""

    def __init__(self, detail: RepoDetail, hub_lane: Lane, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("DiscoverView")
        self.detail = detail
        self.hub_lane = hub_lane
        self.results: list[RepoSummary] = []
        self.searched = False
        self._search_key = (object(), "search")  # the task runner's: the latest search wins
        self._last_query: Query | None = None

        self.search = QLineEdit(self)
        self.search.setAccessibleName("Search models on Hugging Face")
        self.search.setObjectName("HubSearch")
        self.search.setPlaceholderText("Search models on Hugging Face, e.g. qwen, llama, gemma")
        self.search.setClearButtonEnabled(True)
        self.search.addAction(theme.icon("search"), QLineEdit.ActionPosition.LeadingPosition)
        self.sort_box = QComboBox(self)
        self.sort_box.setObjectName("SortBox")
        for label, key in SORTS:
            self.sort_box.addItem(label, key)
        self.size_box = QComboBox(self)
        self.size_box.setObjectName("SizeBox")
        for label, *_ in SIZES:
            self.size_box.addItem(label)
        self.size_box.setToolTip("Parameter count, from the Hub's GGUF data or the name")
        self.author = QLineEdit(self)
        self.author.setAccessibleName("Author")
        self.author.setObjectName("AuthorField")
        self.author.setPlaceholderText("Author")
        self.author.setToolTip("Only models from this Hub user or organization, e.g. unsloth")
        self.author.setClearButtonEnabled(True)
        self.author.setMinimumWidth(100)
        self.author.setMaximumWidth(150)
        self.bar = QGridLayout()
        self.bar.setHorizontalSpacing(8)
        self.bar.setVerticalSpacing(8)
        self._one_row: bool | None = None
        self._arrange_bar(True)

        self.caption = QLabel(self)
        self.caption.setObjectName("ResultsCaption")
        self.list = QListWidget(self)
        self.list.setObjectName("ResultList")
        self.list.setAccessibleName("Models found")
        self.list.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.list.setUniformItemSizes(True)
        self.list.currentRowChanged.connect(self._on_current_row_changed)
        self.state = StatePanel(self)
        self.state.action_clicked.connect(self.search_now)
        self.results_stack = QStackedWidget(self)
        self.results_stack.addWidget(self.state)
        self.results_stack.addWidget(self.list)
        left = QWidget(self)
        self.results_column = left
        left.setObjectName("ResultsColumn")
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.setSpacing(6)
        left_layout.addWidget(self.caption)
        left_layout.addWidget(self.results_stack, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName("DiscoverSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setHandleWidth(14)  # a gap: a thinner handle lay over the detail's border
        self.splitter.addWidget(left)
        self.splitter.addWidget(detail)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([400, 700])
        # Small enough for the narrowest window (MIN_SIZE); the splitter gives them more.
        left.setMinimumWidth(210)
        detail.setMinimumWidth(300)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 4, 24, 16)
        layout.setSpacing(12)
        layout.addLayout(self.bar)
        self._repo_in_front = False
        self.back_button = QPushButton("‹ All results", self)
        self.back_button.setObjectName("SecondaryButton")
        self.back_button.clicked.connect(self._on_back_clicked)
        self.back_button.hide()
        layout.addWidget(self.back_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.splitter, 1)

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self.search_now)
        self.search.textChanged.connect(self._debounce.start)
        self.author.textChanged.connect(self._debounce.start)
        self.search.returnPressed.connect(self.search_now)
        self.author.returnPressed.connect(self.search_now)
        self.sort_box.currentIndexChanged.connect(self.search_now)
        self.size_box.currentIndexChanged.connect(self.search_now)
        # Tab in the order the bar shows them (they were made right to left)
        for first, second in (
            (self.search, self.author),
            (self.author, self.size_box),
            (self.size_box, self.sort_box),
        ):
            QWidget.setTabOrder(first, second)

    # -- searching ------------------------------------------------------------------------

    def query(self) -> Query:
        _, low, high = SIZES[max(0, self.size_box.currentIndex())]
        return Query(
            text=self.search.text().strip(),
            sort=self.sort_box.currentData() or "downloads",
            author=self.author.text().strip() or None,
            min_params=low,
            max_params=high,
        )

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._arrange_bar(self.width() >= ONE_ROW_WIDTH)
        self._arrange_columns()

    def _arrange_columns(self) -> None:
        """Results and repository side by side; in a narrow page (where side by side cut the
        repository's title, files and buttons) one at a time, with "All results" to go back."""
        narrow = self.width() < SIDE_BY_SIDE_WIDTH
        repo = self._repo_in_front and self.detail.summary is not None
        self.results_column.setVisible(not narrow or not repo)
        self.detail.setVisible(not narrow or repo)
        self.back_button.setVisible(narrow and repo)

    @Slot()
    def _on_back_clicked(self) -> None:
        self._repo_in_front = False
        self._arrange_columns()
        self.list.setFocus()

    def _arrange_bar(self, one_row: bool) -> None:
        """Search and filters on one row; in a narrow page the search gets a row of its own
        (squeezed beside the filters it showed three letters of its hint)."""
        if one_row == self._one_row:
            return
        self._one_row = one_row
        filters: tuple[QWidget, ...] = (self.author, self.size_box, self.sort_box)
        for each in (self.search, *filters):
            self.bar.removeWidget(each)
        if one_row:
            self.bar.addWidget(self.search, 0, 0)
            for column, each in enumerate(filters, 1):
                self.bar.addWidget(each, 0, column)
        else:
            self.bar.addWidget(self.search, 0, 0, 1, 3)
            for column, each in enumerate(filters):
                self.bar.addWidget(each, 1, column)
        for column in range(4):
            self.bar.setColumnStretch(column, 0)
        self.bar.setColumnStretch(0, 1)

    def ensure_searched(self) -> None:
        """The first time the page is shown: the most downloaded models."""
        if not self.searched:
            self.search_now()

    @Slot()
    def search_now(self) -> None:
        self._debounce.stop()
        self.searched = True
        q = self.query()
        self._last_query = q
        if not self.results:
            self.state.show_state("loading", "Searching the Hub…")
            self.results_stack.setCurrentWidget(self.state)
        self.caption.setText("Searching…")

        def search() -> list[RepoSummary]:
            return hub.search_models(
                q.text, q.sort, q.author, q.min_params, q.max_params, limit=RESULT_LIMIT
            )

        tasks().submit(
            search,
            lambda result: self._on_search_done(q, result, None),
            lambda error: self._on_search_done(q, None, error),
            key=self._search_key,  # a newer search supersedes it
            lane=self.hub_lane,
            receiver=self,
        )

    def _on_search_done(self, q: Query, result: object, error: BaseException | None) -> None:
        if error is not None or not isinstance(result, list):
            self.results = []
            self.list.clear()
            message = (
                str(error) if isinstance(error, hub_errors.HubError) else f"Search failed: {error}"
            )
            self.state.show_state("error", "Can't search the Hub", message, "Try again")
            self.results_stack.setCurrentWidget(self.state)
            self.caption.setText("")
            return
        self.results = result
        self._fill(result)
        if not result:
            hint = "Try a shorter name, or clear the filters." if q.filtered else ""
            wanted = f" match “{html.escape(q.text)}”" if q.text else " match these filters"
            self.state.show_state("empty", f"No GGUF models{wanted}", hint)
            self.results_stack.setCurrentWidget(self.state)
            self.caption.setText("")
            return
        self.results_stack.setCurrentWidget(self.list)
        sort_label = self.sort_box.currentText().lower()
        n = len(result)
        count = f"{n}{'+' if n >= RESULT_LIMIT else ''}"
        if q.text:
            self.caption.setText(f"{counted(n, 'result', count)} for “{q.text}”, {sort_label}")
        else:
            self.caption.setText(f"{counted(n, 'GGUF model', count)}, {sort_label}")

    def _fill(self, results: list[RepoSummary]) -> None:
        current = self.detail.summary.id if self.detail.summary is not None else None
        self.list.blockSignals(True)
        self.list.clear()
        for summary in results:
            item = QListWidgetItem(self.list)
            row = ResultRow(summary)
            item.setSizeHint(QSize(200, max(58, row.sizeHint().height())))
            item.setData(Qt.ItemDataRole.UserRole, summary.id)
            self.list.setItemWidget(item, row)
            if summary.id == current:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)

    @Slot(int)
    def _on_current_row_changed(self, row: int) -> None:
        if 0 <= row < len(self.results):
            self.detail.open_repo(self.results[row])
            self._repo_in_front = True
            self._arrange_columns()

    def open_result(self, repo_id: str) -> None:
        """Select a result by id (keyboard users, tests)."""
        for index, summary in enumerate(self.results):
            if summary.id == repo_id:
                self.list.setCurrentRow(index)
                return
