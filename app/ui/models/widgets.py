"""Small building blocks shared by the Models page: number formats, chips, state panels."""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.ui import icons, theme


def compact_count(n: int) -> str:
    """1234 -> "1.2K", 5_600_000 -> "5.6M" (as the Hub shows counts)."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            value = n / scale
            text = f"{value:.1f}".rstrip("0").rstrip(".") if value < 100 else f"{value:.0f}"
            return f"{text}{suffix}"
    return str(n)


def counted(n: int, noun: str, text: str | None = None) -> str:
    """ "1 result", "3 results", "1.2K downloads": the noun agrees with the number (``text``
    is how the number is shown, ``str(n)`` by default)."""
    return f"{str(n) if text is None else text} {noun}{'' if n == 1 else 's'}"


def relative_time(when: datetime | None, now: datetime | None = None) -> str:
    """ "3 days ago", "2 months ago"; "" when unknown."""
    if when is None:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    for limit, unit, size in (
        (3600, "minute", 60),
        (86400, "hour", 3600),
        (86400 * 30, "day", 86400),
        (86400 * 365, "month", 86400 * 30),
    ):
        if seconds < limit:
            n = max(1, int(seconds // size))
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    n = int(seconds // (86400 * 365))
    return f"{n} year{'s' if n != 1 else ''} ago"


def duration(seconds: float | None) -> str:
    """An ETA: "45 s", "3 min", "1 h 20 min"."""
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s" if s < 600 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


class Chip(QLabel):
    """A small rounded label; ``kind`` selects its colours in models.qss."""

    def __init__(self, text: str = "", kind: str = "plain", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setObjectName("Chip")
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)
        self.set_kind(kind)

    def set_kind(self, kind: str) -> None:
        theme.set_style_property(self, "kind", kind)


class IconLabel(QLabel):
    """A themed icon as a label (re-tinted when the palette changes)."""

    def __init__(
        self, name: str, size: int = 14, role: str = "faint", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._name, self._size, self._role = name, size, role
        self.setFixedSize(size, size)
        self.refresh()

    def refresh(self) -> None:
        color = theme.current().role(self._role)
        self.setPixmap(icons.pixmap(self._name, color, self._size, self.devicePixelRatioF()))

    def set_icon(self, name: str, role: str | None = None) -> None:
        self._name = name
        self._role = role or self._role
        self.refresh()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.refresh()


class ElidedLabel(QLabel):
    """A one-line label that ends in "…" when it is too narrow (full text in the tooltip)."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = text
        self.setToolTip(text)
        self.setMinimumWidth(40)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self.updateGeometry()
        elided = self.fontMetrics().elidedText(
            text, Qt.TextElideMode.ElideRight, max(0, self.width())
        )
        self.setText(elided)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        hint = super().sizeHint()
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + 4, hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        elided = self.fontMetrics().elidedText(
            self._full, Qt.TextElideMode.ElideRight, max(0, self.width())
        )
        if elided != self.text():
            self.setText(elided)


def scroll_list(name: str, parent: QWidget) -> tuple[QScrollArea, QWidget, QVBoxLayout]:
    """A frameless scroll area of stacked rows: (the area, its body, the rows' layout, which
    ends with a stretch: insert rows before it)."""
    body = QWidget(parent)
    body.setObjectName(f"{name}Body")
    rows = QVBoxLayout(body)
    rows.setContentsMargins(0, 0, 8, 16)
    rows.setSpacing(8)
    rows.addStretch(1)
    scroll = QScrollArea(parent)
    scroll.setObjectName(f"{name}Scroll")
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setWidget(body)
    return scroll, body, rows


def stat(name: str, text: str, parent: QWidget) -> QWidget:
    """An icon followed by a muted number ("⬇ 12K")."""
    box = QWidget(parent)
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(4)
    row.addWidget(IconLabel(name, 13, "faint", box))
    label = QLabel(text, box)
    label.setObjectName("StatText")
    row.addWidget(label)
    return box


class StatePanel(QWidget):
    """A centred message for empty, loading and error states, with an optional action.

    Signal: ``action_clicked()``.
    """

    action_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("StatePanel")
        self.icon = IconLabel("search", 36, "faint", self)
        self.title = QLabel(self)
        self.title.setObjectName("StateTitle")
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title.setWordWrap(True)
        self.text = QLabel(self)
        self.text.setObjectName("StateText")
        self.text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.busy = QProgressBar(self)
        self.busy.setObjectName("LoadingBar")
        self.busy.setRange(0, 0)
        self.busy.setTextVisible(False)
        self.busy.setFixedSize(160, 4)
        self.button = QPushButton(self)
        self.button.setObjectName("SecondaryButton")
        self.button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.button.clicked.connect(self.action_clicked)
        column = QVBoxLayout(self)
        column.setContentsMargins(32, 24, 32, 24)
        column.setSpacing(8)
        column.addStretch(2)
        column.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignHCenter)
        column.addSpacing(4)
        for label in (self.title, self.text):
            # Centred by stretches, not by an alignment flag: an aligned label is given its
            # one-line width, and its wrapped lines then get cut off.
            label.setMaximumWidth(520)
            label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
            row = QHBoxLayout()
            row.addStretch(1)
            row.addWidget(label, 100)
            row.addStretch(1)
            column.addLayout(row)
        column.addSpacing(6)
        column.addWidget(self.busy, 0, Qt.AlignmentFlag.AlignHCenter)
        column.addWidget(self.button, 0, Qt.AlignmentFlag.AlignHCenter)
        column.addStretch(3)

    def show_state(
        self,
        kind: str,
        title: str,
        text: str = "",
        action: str | None = None,
        icon: str | None = None,
    ) -> None:
        """``kind``: "empty", "loading" or "error"."""
        self.setProperty("kind", kind)
        name = icon or {"error": "alert", "loading": "download"}.get(kind, "search")
        self.icon.set_icon(name, "danger" if kind == "error" else "faint")
        self.icon.setVisible(kind != "loading")
        self.title.setText(title)
        self.text.setText(text)
        self.text.setVisible(bool(text))
        self.busy.setVisible(kind == "loading")
        self.button.setText(action or "")
        self.button.setVisible(bool(action))
