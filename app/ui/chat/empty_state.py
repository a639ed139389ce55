"""What an empty chat shows: first-run guidance without a model, suggestions with one.

Signals: ``model_chosen(str path)``, ``open_file_requested()``, ``suggestion_chosen(str)``,
``browse_models_requested()`` (the first-run screen's "Browse models": open the Models page).
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt, Signal, Slot
from PySide6.QtGui import QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app import resources
from app.config import paths
from app.engine.types import LoadedModel
from app.ui import icons
from app.ui.engine_session import model_name
from app.ui.header.model_list import ModelEntry
from app.ui.models.widgets import ElidedLabel

MAX_LISTED = 5
SUGGESTIONS = (
    ("Explain", "Explain how a neural network learns, in simple terms."),
    ("Code", "Write a Python function that checks whether a string is a palindrome."),
    ("Write", "Write a short, friendly note inviting my team to a Friday lunch."),
    ("Summarize", "Summarize the key ideas of the scientific method in five bullet points."),
)


def _way_mark(icon: str, parent: QWidget) -> QLabel:
    from app.ui import theme

    mark = QLabel(parent)
    mark.setObjectName("WayMark")
    mark.setAlignment(Qt.AlignmentFlag.AlignCenter)
    mark.setFixedSize(24, 24)
    mark.setPixmap(icons.pixmap(icon, theme.current().accent, 18, parent.devicePixelRatioF()))
    return mark


def app_icon_pixmap(size: int, ratio: float = 1.0) -> QPixmap:
    source = resources.path(resources.APP_ICON_SVG).read_bytes()
    device = round(size * ratio)
    image = QPixmap(device, device)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    QSvgRenderer(QByteArray(source)).render(painter, QRectF(0, 0, device, device))
    painter.end()
    image.setDevicePixelRatio(ratio)
    return image


class _ModelRow(QPushButton):
    def __init__(self, entry: ModelEntry, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("ModelRow")
        self.entry = entry
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip(entry.path)
        # A long file name ends in "…" (full name in the tooltip) instead of being cut off.
        self.name_label = name = ElidedLabel(entry.name, self)
        name.setObjectName("ModelRowName")
        detail = QLabel(entry.detail, self)
        detail.setObjectName("ModelRowDetail")
        load = QLabel("Load", self)
        load.setObjectName("ModelRowAction")
        for label in (name, detail, load):
            label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        icon = QLabel(self)
        icon.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        from app.ui import theme

        icon.setPixmap(icons.pixmap("chip", theme.current().muted, 18, self.devicePixelRatioF()))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(10)
        layout.addWidget(icon)
        layout.addWidget(name, 1)
        layout.addWidget(detail)
        layout.addSpacing(8)
        layout.addWidget(load)
        self.setMinimumHeight(46)


class EmptyState(QWidget):
    """See the module docstring."""

    model_chosen = Signal(str)
    open_file_requested = Signal()
    suggestion_chosen = Signal(str)
    browse_models_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("EmptyState")
        self._models: list[ModelEntry] = []
        self.welcome = self._build_welcome()
        self.ready = self._build_ready()
        self.loading = self._build_loading()
        self._current: QWidget = self.welcome
        column = QVBoxLayout()
        column.addStretch(2)
        for page in (self.welcome, self.ready, self.loading):
            column.addWidget(page)
            page.setVisible(page is self._current)
        column.addStretch(3)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(32, 24, 32, 24)
        layout.addStretch(1)
        layout.addLayout(column, 100)
        layout.addStretch(1)

    # -- pages ----------------------------------------------------------------------------

    def _heading(self, parent: QWidget, title: str, subtitle: str) -> tuple[QLabel, QLabel]:
        heading = QLabel(title, parent)
        heading.setObjectName("EmptyTitle")
        heading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        sub = QLabel(subtitle, parent)
        sub.setObjectName("EmptySubtitle")
        sub.setAlignment(Qt.AlignmentFlag.AlignCenter)
        sub.setWordWrap(True)
        return heading, sub

    def _build_welcome(self) -> QWidget:
        page = QWidget(self)
        page.setMaximumWidth(560)
        logo = QLabel(page)
        logo.setPixmap(app_icon_pixmap(72, self.devicePixelRatioF()))
        logo.setAlignment(Qt.AlignmentFlag.AlignCenter)
        heading, sub = self._heading(
            page,
            "Welcome to Ember",
            "Chat with language models that run entirely on this computer. "
            "Nothing you type leaves it.",
        )
        card = QFrame(page)
        card.setObjectName("Card")
        card.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        # Two ways to a model, not two steps: marked with what each does, not numbered.
        step1 = _way_mark("chip", card)
        step1_title = QLabel("Choose a model to load", card)
        step1_title.setObjectName("StepTitle")
        self.models_hint = QLabel(card)
        self.models_hint.setObjectName("StepHint")
        self.models_hint.setWordWrap(True)
        self.model_rows = QVBoxLayout()
        self.model_rows.setSpacing(6)
        self.open_button = QPushButton("Open a GGUF file…", card)
        self.open_button.setObjectName("SecondaryButton")
        self.open_button.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.open_button, "folder", size=16)
        self.open_button.clicked.connect(self.open_file_requested)
        step2 = _way_mark("download", card)
        step2_title = QLabel("Or download one from Hugging Face", card)
        step2_title.setObjectName("StepTitle")
        step2_hint = QLabel(
            "Search thousands of GGUF models, see which ones fit this computer, and download "
            "one in a click.",
            card,
        )
        step2_hint.setObjectName("StepHint")
        step2_hint.setWordWrap(True)
        self.browse_button = QPushButton("Browse models", card)
        self.browse_button.setObjectName("PrimaryButton")
        self.browse_button.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.browse_button, "search", "accent_text", size=16)
        self.browse_button.clicked.connect(self.browse_models_requested)
        grid = QGridLayout(card)
        grid.setContentsMargins(22, 20, 22, 20)
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(8)
        grid.addWidget(step1, 0, 0, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(step1_title, 0, 1)
        grid.addWidget(self.models_hint, 1, 1)
        grid.addLayout(self.model_rows, 2, 1)
        open_row = QHBoxLayout()
        open_row.addWidget(self.open_button)
        open_row.addStretch(1)
        grid.addLayout(open_row, 3, 1)
        grid.setRowMinimumHeight(4, 14)
        grid.addWidget(step2, 5, 0, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(step2_title, 5, 1)
        grid.addWidget(step2_hint, 6, 1)
        browse_row = QHBoxLayout()
        browse_row.addWidget(self.browse_button)
        browse_row.addStretch(1)
        grid.addLayout(browse_row, 7, 1)
        layout = QVBoxLayout(page)
        layout.setSpacing(10)
        layout.addWidget(logo)
        layout.addSpacing(6)
        layout.addWidget(heading)
        layout.addWidget(sub)
        layout.addSpacing(18)
        layout.addWidget(card)
        self._fill_models()
        return page

    def _build_ready(self) -> QWidget:
        page = QWidget(self)
        page.setMaximumWidth(640)
        logo = QLabel(page)
        logo.setPixmap(app_icon_pixmap(56, self.devicePixelRatioF()))
        logo.setAlignment(Qt.AlignmentFlag.AlignCenter)
        heading, self.ready_subtitle = self._heading(page, "What can I help with?", "")
        grid = QGridLayout()
        grid.setSpacing(10)
        for index, (title, text) in enumerate(SUGGESTIONS):
            button = _SuggestionButton(page)
            button.setObjectName("Suggestion")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setProperty("prompt", text)
            button.setAccessibleName(title)
            button.setAccessibleDescription(text)
            head = QLabel(title, button)
            head.setObjectName("SuggestionTitle")
            body = QLabel(text, button)
            body.setObjectName("SuggestionText")
            body.setWordWrap(True)
            for label in (head, body):
                label.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
            inner = QVBoxLayout(button)
            inner.setContentsMargins(14, 10, 14, 12)
            inner.setSpacing(2)
            inner.addWidget(head)
            inner.addWidget(body)
            button.setMinimumHeight(72)
            button.clicked.connect(self._on_suggestion_clicked)
            grid.addWidget(button, index // 2, index % 2)
        layout = QVBoxLayout(page)
        layout.setSpacing(10)
        layout.addWidget(logo)
        layout.addSpacing(4)
        layout.addWidget(heading)
        layout.addWidget(self.ready_subtitle)
        layout.addSpacing(18)
        layout.addLayout(grid)
        return page

    def _build_loading(self) -> QWidget:
        page = QWidget(self)
        page.setMaximumWidth(480)
        heading, self.loading_subtitle = self._heading(page, "Loading the model…", "")
        bar = QProgressBar(page)
        bar.setObjectName("LoadingBar")
        bar.setRange(0, 0)
        bar.setTextVisible(False)
        bar.setFixedHeight(4)
        layout = QVBoxLayout(page)
        layout.setSpacing(12)
        layout.addWidget(heading)
        layout.addWidget(self.loading_subtitle)
        layout.addWidget(bar)
        return page

    # -- state ----------------------------------------------------------------------------

    def set_models(self, models: list[ModelEntry]) -> None:
        self._models = models
        self._fill_models()

    def _show_page(self, page: QWidget) -> None:
        self._current = page
        for candidate in (self.welcome, self.ready, self.loading):
            candidate.setVisible(candidate is page)

    def show_welcome(self) -> None:
        self._show_page(self.welcome)

    def show_ready(self, loaded: LoadedModel) -> None:
        self.ready_subtitle.setText(
            f"Chatting with {model_name(loaded.path)} · {loaded.n_ctx:,}-token context"
        )
        self._show_page(self.ready)

    def show_ready_remote(self, model_id: str) -> None:
        provider, _, model = model_id.partition("::")
        self.ready_subtitle.setText(f"Chatting with {model} on {provider}")
        self._show_page(self.ready)

    def show_loading(self, path: str) -> None:
        self.loading_subtitle.setText(
            f"{model_name(path)} is being loaded into memory. This takes a few seconds."
        )
        self._show_page(self.loading)

    @property
    def mode(self) -> str:
        page = self._current
        return "ready" if page is self.ready else "loading" if page is self.loading else "welcome"

    def _fill_models(self) -> None:
        while self.model_rows.count():
            item = self.model_rows.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        for entry in self._models[:MAX_LISTED]:
            row = _ModelRow(entry, self.welcome if hasattr(self, "welcome") else self)
            row.clicked.connect(self._on_model_row_clicked)
            self.model_rows.addWidget(row)
        if self._models:
            more = len(self._models) - MAX_LISTED
            extra = f" ({more} more in the model menu at the top)" if more > 0 else ""
            self.models_hint.setText(f"Models found on this computer{extra}:")
        else:
            self.models_hint.setText(
                f"No models found yet. Open a .gguf file you already have, or put models in "
                f"{paths().models_dir}."
            )

    @Slot()
    def _on_model_row_clicked(self) -> None:
        row = self.sender()
        if isinstance(row, _ModelRow):
            self.model_chosen.emit(row.entry.path)

    @Slot()
    def _on_suggestion_clicked(self) -> None:
        button = self.sender()
        if button is not None:
            self.suggestion_chosen.emit(str(button.property("prompt")))


SUGGESTION_MIN_WIDTH = 150


class _SuggestionButton(QPushButton):
    """A button laid out like a card (a title over wrapped text): as tall as its text needs
    at its width (a push button's own size hint ignores its layout, and cut the text)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)  # a push button's own would not shrink below its hint

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt override)
        layout = self.layout()
        return layout.totalHeightForWidth(width) if layout is not None else super().height()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        layout = self.layout()
        return layout.totalSizeHint() if layout is not None else super().sizeHint()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        # narrow enough for two side by side in a narrow chat: the text wraps to more lines
        layout = self.layout()
        if layout is None:
            return super().minimumSizeHint()
        return QSize(SUGGESTION_MIN_WIDTH, layout.totalHeightForWidth(SUGGESTION_MIN_WIDTH))
