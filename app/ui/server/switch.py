"""A small on/off switch (a checkable button drawn as a track and a sliding knob).

``busy`` draws the switch half-way in colour while the server starts or stops; clicking still
works (the controller keeps the wanted state). Colours follow the theme's palette.
"""

from __future__ import annotations

from PySide6.QtCore import (
    Property,
    QEasingCurve,
    QPropertyAnimation,
    QRectF,
    QSize,
    Qt,
    Slot,
)
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QAbstractButton, QWidget

from app.ui import theme


class ToggleSwitch(QAbstractButton):
    def __init__(self, parent: QWidget | None = None, width: int = 40, height: int = 22) -> None:
        super().__init__(parent)
        self.setCheckable(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setFixedSize(width, height)
        self._offset = 0.0
        self._busy = False
        self._animation = QPropertyAnimation(self, b"offset", self)
        self._animation.setDuration(140)
        self._animation.setEasingCurve(QEasingCurve.Type.OutCubic)
        self.toggled.connect(self._on_toggled)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return self.size()

    def _get_offset(self) -> float:
        return self._offset

    def _set_offset(self, value: float) -> None:
        self._offset = value
        self.update()

    offset = Property(float, _get_offset, _set_offset)

    @property
    def busy(self) -> bool:
        return self._busy

    def set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self.update()

    def set_checked_quietly(self, checked: bool) -> None:
        """Show a state without emitting ``toggled``/``clicked`` (the model changed it)."""
        if checked == self.isChecked():
            return
        self.blockSignals(True)
        self.setChecked(checked)
        self.blockSignals(False)
        self._animate(checked)

    @Slot(bool)
    def _on_toggled(self, checked: bool) -> None:
        self._animate(checked)

    def _animate(self, checked: bool) -> None:
        self._animation.stop()
        if not self.isVisible():
            self._set_offset(1.0 if checked else 0.0)
            return
        self._animation.setStartValue(self._offset)
        self._animation.setEndValue(1.0 if checked else 0.0)
        self._animation.start()

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        palette = theme.current()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(1, 1, -1, -1)
        radius = rect.height() / 2
        off, on = QColor(palette.border_strong), QColor(palette.accent)
        if self._busy:
            on = QColor(palette.accent)
            on.setAlphaF(0.55)
        t = self._offset
        track = QColor(
            round(off.red() + (on.red() - off.red()) * t),
            round(off.green() + (on.green() - off.green()) * t),
            round(off.blue() + (on.blue() - off.blue()) * t),
            round(off.alpha() + (on.alpha() - off.alpha()) * t),
        )
        if not self.isEnabled():
            track.setAlphaF(track.alphaF() * 0.5)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(track)
        painter.drawRoundedRect(rect, radius, radius)
        if self.hasFocus() and self.focusPolicy() != Qt.FocusPolicy.NoFocus:
            ring = QColor(palette.accent)
            ring.setAlphaF(0.35)
            painter.setPen(ring)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(rect, radius, radius)
            painter.setPen(Qt.PenStyle.NoPen)
        margin = 2.5
        knob = rect.height() - 2 * margin
        x = rect.left() + margin + (rect.width() - knob - 2 * margin) * t
        painter.setBrush(QColor("#FFFFFF"))
        painter.drawEllipse(QRectF(x, rect.top() + margin, knob, knob))
        painter.end()
