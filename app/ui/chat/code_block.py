"""A fenced code block: a header with the language and a Copy button, highlighted code below.

Long lines scroll sideways instead of wrapping; the block is always as tall as its code.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui import icons, theme
from app.ui.chat.height_cache import CachedLabel, invalidate_ancestors
from app.ui.chat.markdown import CodeSegment, code_html

_LANGUAGE_NAMES = {
    "py": "python",
    "js": "javascript",
    "ts": "typescript",
    "sh": "shell",
    "bash": "bash",
    "": "text",
}


class _CodeScroll(QScrollArea):
    """Scrolls sideways only; its height follows the code label."""

    def __init__(self, label: QLabel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CodeScroll")
        self._label = label
        self.setWidget(label)
        self.setWidgetResizable(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def fit(self) -> None:
        self._label.adjustSize()
        height = self._label.height()
        if self._label.width() > self.viewport().width() or self.width() < 10:
            height += self.horizontalScrollBar().sizeHint().height()
        if self.height() != height:
            self.setFixedHeight(height)
            invalidate_ancestors(self)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.fit()


class CodeBlock(QFrame):
    """One code block. Signals: ``copied(str code)`` after the Copy button put it on the
    clipboard."""

    copied = Signal(str)

    def __init__(self, segment: CodeSegment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CodeBlock")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self._code = ""
        self._language = ""
        self._closed = True
        self._html_style = ""

        header = QFrame(self)
        header.setObjectName("CodeHeader")
        self.language_label = QLabel(header)
        self.language_label.setObjectName("CodeLanguage")
        self.copy_button = QToolButton(header)
        self.copy_button.setObjectName("CodeCopyButton")
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy the code")
        self.copy_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.copy_button, "copy", size=15)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        header_layout = QHBoxLayout(header)
        header_layout.setContentsMargins(14, 4, 6, 4)
        header_layout.addWidget(self.language_label)
        header_layout.addStretch(1)
        header_layout.addWidget(self.copy_button)

        self.code_label = CachedLabel()
        self.code_label.setObjectName("CodeText")
        self.code_label.setTextFormat(Qt.TextFormat.RichText)
        self.code_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.code_label.setContentsMargins(14, 10, 14, 12)
        self.code_label.setFont(theme.mono_font())
        self.code_label.setCursor(Qt.CursorShape.IBeamCursor)
        self.code_scroll = _CodeScroll(self.code_label, self)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(header)
        layout.addWidget(self.code_scroll)
        self._reset_timer = QTimer(self)
        self._reset_timer.setSingleShot(True)
        self._reset_timer.setInterval(1600)
        self._reset_timer.timeout.connect(self._on_reset_copy_button)
        self.set_segment(segment)

    @property
    def code(self) -> str:
        return self._code

    @property
    def language(self) -> str:
        return self._language

    def set_segment(self, segment: CodeSegment) -> None:
        palette = theme.current()
        if (
            segment.code == self._code
            and segment.language == self._language
            and palette.name == self._html_style
        ):
            return
        self._code = segment.code
        self._language = segment.language
        self._closed = segment.closed
        self._html_style = palette.name
        name = _LANGUAGE_NAMES.get(segment.language, segment.language)
        self.language_label.setText(name)
        self.code_label.set_text(code_html(segment.code, segment.language, palette))
        self.code_scroll.fit()

    def refresh_theme(self) -> None:
        self._html_style = ""
        self.set_segment(CodeSegment(self._code, self._language, self._closed))

    @Slot()
    def _on_copy_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self._code)
        self.copy_button.setText("Copied")
        icons.set_icon(self.copy_button, "check", role="success", size=15)
        self._reset_timer.start()
        self.copied.emit(self._code)

    @Slot()
    def _on_reset_copy_button(self) -> None:
        self.copy_button.setText("Copy")
        icons.set_icon(self.copy_button, "copy", size=15)
