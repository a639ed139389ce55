"""A small graph of one resource over the last minutes, for Settings → Hardware: a caption
("RAM · 6.4 GB of 25 GB · Ember 1.1 GB") above an area for the machine's use and a line for
Ember's own share, scaled to the resource's total (100% at the top).

The caption is the graph's accessible name and the newest numbers its description, so a
screen reader reads what the picture shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPaintEvent, QPen
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.ui import theme

GRAPH_HEIGHT = 44
MIN_SPAN = 60.0  # seconds across a graph until the history is longer


class _Plot(QWidget):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setMinimumHeight(GRAPH_HEIGHT)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.total: Sequence[float] = ()
        self.ember: Sequence[float] = ()
        self.max_span = 1.0  # the longest x range: the history's length in seconds
        self.span = MIN_SPAN
        self.times: Sequence[float] = ()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        return QSize(240, GRAPH_HEIGHT)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        p = theme.current()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        painter.setPen(QPen(QColor(p.border_strong), 1))
        painter.setBrush(QColor(p.surface))
        painter.drawRoundedRect(rect, 4, 4)
        if len(self.times) >= 2:
            # the last minute at least, the whole history once it is longer (five minutes)
            self.span = max(MIN_SPAN, min(self.max_span, self.times[-1] - self.times[0]))
            machine = self._points(rect, self.total)
            area = QPainterPath(QPointF(machine[0].x(), rect.bottom()))
            for point in machine:
                area.lineTo(point)
            area.lineTo(QPointF(machine[-1].x(), rect.bottom()))
            area.closeSubpath()
            fill = QColor(p.accent)
            fill.setAlpha(60)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.drawPath(area)
            painter.setPen(QPen(QColor(p.accent), 1.5))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPolyline(machine)
            if self.ember:
                painter.setPen(QPen(QColor(p.text), 1.5, Qt.PenStyle.DashLine))
                painter.drawPolyline(self._points(rect, self.ember))
        painter.end()

    def _points(self, rect: QRectF, values: Sequence[float]) -> list[QPointF]:
        newest = self.times[-1]
        out = []
        for t, v in zip(self.times, values, strict=False):
            x = rect.right() - (newest - t) / self.span * rect.width()
            y = rect.bottom() - max(0.0, min(1.0, v)) * rect.height()
            out.append(QPointF(x, y))
        return out


class UsageGraph(QWidget):
    """One resource: ``show(times, machine, ember, caption, details)`` with shares 0-1."""

    def __init__(self, name: str, span_seconds: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.caption = QLabel(name, self)
        self.caption.setObjectName("FieldHelp")
        self.caption.setWordWrap(True)
        self.plot = _Plot(self)
        self.plot.max_span = span_seconds
        layout.addWidget(self.caption)
        layout.addWidget(self.plot)
        self.setAccessibleName(name)

    def show_values(
        self,
        times: Sequence[float],
        machine: Sequence[float],
        ember: Sequence[float],
        caption: str,
    ) -> None:
        self.plot.times, self.plot.total, self.plot.ember = times, machine, ember
        self.plot.setVisible(bool(times))  # nothing to draw (no swap): the caption says so
        self.caption.setText(caption)
        self.plot.setAccessibleName(f"{self.name} over the last minutes")
        self.plot.setAccessibleDescription(caption)
        self.setToolTip(
            f"{caption}\nArea: the whole machine. Dashed line: Ember."
            if ember
            else f"{caption}\nArea: the whole machine."
        )
        self.plot.update()
