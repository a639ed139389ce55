"""A fenced code block: a header with the language and a Copy button, highlighted code below.

Long lines scroll sideways instead of wrapping; the block is always as tall as its code.

While a block streams, its code grows at the end only: whole groups of ``FROZEN_LINES`` lines
are highlighted and laid out once, in labels of their own, and only the last group is redone
on each update (re-rendering everything made a 300-line block cost ~250 ms per update). While
that last group fills, its whole lines are kept in pieces of ``PIECE_LINES`` (an update redoes
at most that many lines, not up to 40: ~5 ms instead of ~30), joined into the group's label
once it is whole. A block that arrives complete is one label, so it is highlighted in one piece
and selectable across all its lines.
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
from app.ui.chat.height_cache import CachedLabel, invalidate_ancestors, laid_out_width
from app.ui.chat.markdown import CodeSegment, code_html

_LANGUAGE_NAMES = {
    "py": "python",
    "js": "javascript",
    "ts": "typescript",
    "sh": "shell",
    "bash": "bash",
    "": "text",
}


FROZEN_LINES = 40
PIECE_LINES = 10

_MARGIN_X, _MARGIN_TOP, _MARGIN_BOTTOM = 14, 10, 12


class _CodeScroll(QScrollArea):
    """Scrolls sideways only; its height follows the code."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CodeScroll")
        self.setAccessibleName("Code")
        # Made in the viewport it will live in: a widget made without a parent is a window
        # until setWidget moves it (styled twice, and a window's size constraints each time).
        self.code_box = self._label = QWidget(self.viewport())
        self.setWidget(self.code_box)
        self.setWidgetResizable(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def fit(self) -> None:
        self._label.adjustSize()
        height = self._label.height()
        # Not laid out yet: it will be as wide as the column it is in (guessing from its
        # default width counted a scroll bar, then took it back: one more layout per block).
        laid_out = self.testAttribute(Qt.WidgetAttribute.WA_Resized)
        width = self.viewport().width() if laid_out else laid_out_width(self)
        if self._label.width() > width:
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
        self.copy_button.setAccessibleName(icons.spoken("Copy the code"))
        self.copy_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.copy_button, "copy", size=15)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        header_layout = QHBoxLayout(header)
        header_layout.setContentsMargins(14, 4, 6, 4)
        header_layout.addWidget(self.language_label)
        header_layout.addStretch(1)
        header_layout.addWidget(self.copy_button)

        self.code_scroll = _CodeScroll(self)
        self._code_box = self.code_scroll.code_box
        self._code_box.setObjectName("CodeBox")
        self._code_lines = QVBoxLayout(self._code_box)
        self._code_lines.setContentsMargins(0, 0, 0, 0)
        self._code_lines.setSpacing(0)
        self._code_lines.setSizeConstraint(QVBoxLayout.SizeConstraint.SetFixedSize)
        self._frozen: list[CachedLabel] = []  # highlighted groups of a streamed block
        self._frozen_chars = 0  # how much of the code they hold
        self._pieces: list[tuple[CachedLabel, str]] = []  # whole lines of the group filling
        self._pieces_chars = 0
        self.code_label = self._new_label()  # the code (or, while streaming, its last part)
        self._code_lines.addWidget(self.code_label)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(header)
        layout.addWidget(self.code_scroll)
        self._reset_timer = QTimer(self)
        self._reset_timer.setSingleShot(True)
        self._reset_timer.setInterval(1600)
        self._reset_timer.timeout.connect(self._on_reset_copy_button)
        # Styled before the code is measured: the style sets the code's font, and a font
        # change after the text would lay it out again.
        self.ensurePolished()
        self.set_segment(segment)

    @property
    def code(self) -> str:
        return self._code

    @property
    def language(self) -> str:
        return self._language

    def _new_label(self) -> CachedLabel:
        label = CachedLabel(self._code_box)
        label.setObjectName("CodeText")
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setFont(theme.mono_font())
        label.setCursor(Qt.CursorShape.IBeamCursor)
        label.setContentsMargins(_MARGIN_X, _MARGIN_TOP, _MARGIN_X, _MARGIN_BOTTOM)
        label.ensurePolished()  # before its text is measured (see __init__)
        return label

    def set_segment(self, segment: CodeSegment) -> None:
        palette = theme.current()
        self._closed = segment.closed
        if (
            segment.code == self._code
            and segment.language == self._language
            and palette.name == self._html_style
        ):
            return
        restyled = palette.name != self._html_style or segment.language != self._language
        done = self._frozen_chars + self._pieces_chars
        grown = segment.code.startswith(self._code[:done])
        if restyled or not grown:
            self._unfreeze()
        self._code = segment.code
        self._language = segment.language
        self._html_style = palette.name
        name = _LANGUAGE_NAMES.get(segment.language, segment.language)
        self.language_label.setText(name)
        if not segment.closed:
            self._freeze_whole_groups(palette)
        tail = segment.code[self._frozen_chars + self._pieces_chars :]
        self.code_label.set_text(code_html(tail, segment.language, palette))
        self.code_scroll.fit()

    def _freeze_whole_groups(self, palette: theme.Palette) -> None:
        """Move whole groups of lines that no update can change into labels of their own (and
        whole pieces of the group still filling)."""
        while True:
            lines = self._code[self._frozen_chars :].split("\n")
            if len(lines) > FROZEN_LINES + 1:  # the last line may still be growing
                self._freeze_group(lines[:FROZEN_LINES], palette)
                continue
            done = len(self._pieces) * PIECE_LINES
            if len(lines) - done <= PIECE_LINES + 1:
                return
            piece = "\n".join(lines[done : done + PIECE_LINES])
            html = code_html(piece, self._language, palette)
            label = self._frozen_label(html, len(self._frozen) + len(self._pieces))
            self._pieces.append((label, html))
            self._pieces_chars += len(piece) + 1

    def _freeze_group(self, lines: list[str], palette: theme.Palette) -> None:
        parts = [html for _label, html in self._pieces]
        rest = lines[len(self._pieces) * PIECE_LINES :]
        if rest:
            parts.append(code_html("\n".join(rest), self._language, palette))
        html = _joined(parts)
        if self._pieces:
            label = self._pieces[0][0]  # the group's label now
            label.set_text(html)
            self._drop([piece for piece, _html in self._pieces[1:]])
        else:
            label = self._frozen_label(html, len(self._frozen))
        self._frozen.append(label)
        self._frozen_chars += len("\n".join(lines)) + 1
        self._pieces.clear()
        self._pieces_chars = 0

    def _frozen_label(self, html: str, index: int) -> CachedLabel:
        label = self._new_label()
        label.set_text(html)
        first = index == 0
        label.setContentsMargins(_MARGIN_X, _MARGIN_TOP if first else 0, _MARGIN_X, 0)
        self._code_lines.insertWidget(index, label)
        self.code_label.setContentsMargins(_MARGIN_X, 0, _MARGIN_X, _MARGIN_BOTTOM)
        return label

    def _drop(self, labels: list[CachedLabel]) -> None:
        for label in labels:
            self._code_lines.removeWidget(label)
            label.setParent(None)  # out of the block now; deleted once Qt is back in its loop
            label.deleteLater()

    def _unfreeze(self) -> None:
        """Back to one label (a new theme, or code that did not just grow)."""
        self._drop(self._frozen + [label for label, _html in self._pieces])
        self._frozen.clear()
        self._pieces.clear()
        self._frozen_chars = self._pieces_chars = 0
        self.code_label.setContentsMargins(_MARGIN_X, _MARGIN_TOP, _MARGIN_X, _MARGIN_BOTTOM)

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


def _joined(parts: list[str]) -> str:
    """The lines of several ``code_html`` results (one <pre> each) in one <pre>."""
    head = parts[0][: parts[0].index(">") + 1]
    bodies = [part[part.index(">") + 1 : -len("</pre>")] for part in parts]
    return head + "\n".join(bodies) + "</pre>"
