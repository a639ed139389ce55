"""Ready-to-paste snippets (curl, Python, Continue, Ollama, Open WebUI; or, with a drop-down
list, each coding agent's settings from app/server/clients.py): a tab row, highlighted code, a
Copy button.

``set_context(base_url, model, key, key_visible)`` refills them; a hidden key is masked on
screen and copied in full.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QFont, QFontMetrics, QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui import icons, theme
from app.ui.chat.markdown import code_html
from app.ui.server import snippets

NAMES = ("curl", "Python", "Continue", "Ollama", "Open WebUI")
TAB_PADDING = 2 * 10  # QPushButton#SnippetTab's horizontal padding in server.qss


class _Tab(QPushButton):
    """A snippet tab: its label turns semi-bold when checked, so it is always as wide as the
    bold label (the style sheet changes the font without asking for more room)."""

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        hint = super().sizeHint()
        bold = QFont(self.font())
        bold.setWeight(QFont.Weight.DemiBold)
        width = QFontMetrics(bold).horizontalAdvance(self.text()) + TAB_PADDING
        return QSize(max(hint.width(), width), hint.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return self.sizeHint()


class _CopyButton(QToolButton):
    """ "Copy" beside its icon when there is room, the icon alone in a narrow page (the tabs
    and the button did not fit in the Server page's column at 640 px)."""

    def _full_width(self) -> int:
        icon = self.iconSize().width()
        return icon + 6 + self.fontMetrics().horizontalAdvance(self.text()) + 2 * 10

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(
            max(super().sizeHint().width(), self._full_width()), super().sizeHint().height()
        )

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(self.iconSize().width() + 2 * 10, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        roomy = self.width() >= self._full_width()
        style = Qt.ToolButtonStyle
        wanted = style.ToolButtonTextBesideIcon if roomy else style.ToolButtonIconOnly
        if self.toolButtonStyle() != wanted:
            self.setToolButtonStyle(wanted)


class _Shown(Protocol):
    """A snippet: :class:`snippets.Snippet` or :class:`app.server.clients.Client`."""

    @property
    def name(self) -> str: ...
    @property
    def language(self) -> str: ...
    @property
    def code(self) -> str: ...


# (base_url, model, key) -> the snippets, in NAMES order
Source = Callable[[str, str | None, str], Sequence[_Shown]]


class SnippetView(QFrame):
    """Signals: ``copied(str name)``.

    ``names`` and ``source`` say what it shows (default: the API snippets); ``chooser``
    "tabs" puts a tab per snippet above the code, "combo" a drop-down list (for many)."""

    copied = Signal(str)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        names: Sequence[str] = NAMES,
        source: Source = snippets.snippets,
        chooser: str = "tabs",
        label: str = "",
    ) -> None:
        super().__init__(parent)
        self.setObjectName("SnippetView")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self._source = source
        self._base_url = ""
        self._model: str | None = None
        self._key = ""
        self._key_visible = False
        self._current = names[0]
        self._shown: dict[str, _Shown] = {}
        self._real: dict[str, _Shown] = {}

        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.tabs: dict[str, QPushButton] = {}
        self.combo: QComboBox | None = None
        tab_row = QHBoxLayout()
        tab_row.setContentsMargins(8, 6, 6, 0)
        tab_row.setSpacing(2)
        if chooser == "combo":
            if label:
                caption = QLabel(label, self)
                tab_row.addWidget(caption)
                tab_row.addSpacing(6)
            self.combo = QComboBox(self)
            self.combo.setObjectName("SnippetChooser")
            self.combo.setAccessibleName(label or "Snippet")
            self.combo.addItems(list(names))
            self.combo.currentTextChanged.connect(self._on_combo_changed)
            tab_row.addWidget(self.combo)
        for name in names if chooser == "tabs" else ():
            button = _Tab(name, self)
            button.setObjectName("SnippetTab")
            button.setCheckable(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(self._on_tab_clicked)
            self.group.addButton(button)
            self.tabs[name] = button
            tab_row.addWidget(button)
        if self.tabs:
            self.tabs[self._current].setChecked(True)
        tab_row.addStretch(1)
        self.copy_button = _CopyButton(self)
        self.copy_button.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.copy_button.setObjectName("BodyCopy")
        self.copy_button.setText("Copy")
        self.copy_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.copy_button, "copy", size=14)
        self.copy_button.clicked.connect(self.copy_current)
        tab_row.addWidget(self.copy_button)

        self.code = QTextBrowser(self)
        self.code.setObjectName("SnippetCode")
        self.code.setOpenLinks(False)
        self.code.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.code.setFrameShape(QFrame.Shape.NoFrame)
        self.code.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.code.document().setDocumentMargin(12)
        self.code.setFixedHeight(244)  # until set_context: as tall as the longest snippet
        self._copied_timer = QTimer(self)
        self._copied_timer.setSingleShot(True)
        self._copied_timer.setInterval(1500)
        self._copied_timer.timeout.connect(self._on_copied_timeout)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(tab_row)
        layout.addWidget(self.code)

    @property
    def current(self) -> str:
        return self._current

    def text(self, name: str | None = None) -> str:
        """The snippet as copied (with the real key)."""
        snippet = self._real.get(name or self._current)
        return snippet.code if snippet else ""

    def shown_text(self, name: str | None = None) -> str:
        snippet = self._shown.get(name or self._current)
        return snippet.code if snippet else ""

    def set_context(self, base_url: str, model: str | None, key: str, key_visible: bool) -> None:
        self._base_url, self._model, self._key, self._key_visible = (
            base_url,
            model,
            key,
            key_visible,
        )
        self._real = {s.name: s for s in self._source(base_url, model, key)}
        shown_key = key if key_visible else snippets.mask(key)
        self._shown = {s.name: s for s in self._source(base_url, model, shown_key)}
        self._render()
        self._fit_height()

    def _fit_height(self) -> None:
        """As tall as the longest snippet, so switching tabs never scrolls or jumps."""
        document = self.code.document()
        tallest = 0.0
        for snippet in self._shown.values():  # laid out in the view's own document and font
            document.setHtml(code_html(snippet.code, snippet.language, theme.current()))
            tallest = max(tallest, document.size().height())
        self._render()
        scrollbar = self.code.horizontalScrollBar().sizeHint().height()
        self.code.setFixedHeight(math.ceil(tallest) + 2 * self.code.frameWidth() + scrollbar)

    def select(self, name: str) -> None:
        self._current = name
        if name in self.tabs:
            self.tabs[name].setChecked(True)
        if self.combo is not None and self.combo.currentText() != name:
            self.combo.setCurrentText(name)
        self._render()

    @Slot(str)
    def _on_combo_changed(self, name: str) -> None:
        if name and name != self._current:
            self.select(name)

    def _render(self) -> None:
        snippet = self._shown.get(self._current)
        if snippet is None:
            self.code.clear()
            return
        scroll = self.code.horizontalScrollBar().value()
        self.code.setHtml(code_html(snippet.code, snippet.language, theme.current()))
        self.code.horizontalScrollBar().setValue(scroll)
        hidden = bool(self._key) and not self._key_visible
        self.copy_button.setToolTip(
            "Copy (with the real API key)" if hidden else "Copy to the clipboard"
        )
        self.copy_button.setAccessibleName(
            icons.spoken("Copy (with the real API key)" if hidden else "Copy to the clipboard")
        )

    @Slot()
    def copy_current(self) -> None:
        QGuiApplication.clipboard().setText(self.text())
        self.copy_button.setText("Copied")
        icons.set_icon(self.copy_button, "check", size=14)
        self._copied_timer.start()
        self.copied.emit(self._current)

    @Slot()
    def _on_copied_timeout(self) -> None:
        self.copy_button.setText("Copy")
        icons.set_icon(self.copy_button, "copy", size=14)

    @Slot()
    def _on_tab_clicked(self) -> None:
        button = self.sender()
        for name, tab in self.tabs.items():
            if tab is button:
                self.select(name)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._render()  # the theme changed: re-colour the code
        elif event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._fit_height()
