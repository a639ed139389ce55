"""The request log panel: a live table of API requests and, below it, the selected request's
bodies (pretty-printed JSON, or the raw event stream or NDJSON lines of a streamed answer).

Signals: ``clear_requested()`` (the Clear button; the owner clears the server's log too).
"""

from __future__ import annotations

import json

from PySide6.QtCore import QEvent, QItemSelection, QModelIndex, Qt, Signal, Slot
from PySide6.QtGui import QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.server.requestlog import RequestRecord
from app.ui import icons, theme
from app.ui.server.request_table import (
    RequestTableModel,
    duration_text,
    short_model,
    status_role,
    tokens_text,
)


def pretty_body(body: str) -> str:
    """JSON bodies indented; a streamed answer as its text followed by the raw events;
    anything else (a truncated body) as it came."""
    text = body.strip()
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    if text.startswith("data:"):
        answer, finish = assemble_stream(text)
        summary = f"Streamed answer (finish reason: {finish or 'none'}):\n\n{answer}"
        return f"{summary}\n\n──── events ────\n\n{body}"
    if text.startswith("{") and (assembled := assemble_ndjson(text)) is not None:
        answer, finish = assembled
        summary = f"Streamed answer (done reason: {finish or 'none'}):\n\n{answer}"
        return f"{summary}\n\n──── lines ────\n\n{body}"
    return body


def assemble_ndjson(stream: str) -> tuple[str, str | None] | None:
    """The text of an Ollama API stream (one JSON object a line: chat ``message`` s, generate
    ``response`` s), and its done reason; None if it is not one (a truncated JSON body).
    Unparseable lines (a truncated middle) are skipped."""
    parts: list[str] = []
    finish: str | None = None
    found = False
    for line in stream.splitlines():
        try:
            chunk = json.loads(line)
        except ValueError:
            continue
        if not isinstance(chunk, dict) or not {"done", "status", "error"} & chunk.keys():
            continue
        found = True
        message = chunk.get("message")
        piece = message.get("content") if isinstance(message, dict) else chunk.get("response")
        if isinstance(piece, str):
            parts.append(piece)
        reason = chunk.get("done_reason") or chunk.get("error")
        finish = reason if isinstance(reason, str) else finish
    return ("".join(parts), finish) if found else None


def assemble_stream(stream: str) -> tuple[str, str | None]:
    """The text of a server-sent events stream of chat or text completion chunks, and its
    finish reason. Unparseable events (a truncated middle) are skipped."""
    parts: list[str] = []
    finish: str | None = None
    for line in stream.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            continue
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content") if isinstance(delta, dict) else None
            piece = piece if isinstance(piece, str) else choice.get("text")
            if isinstance(piece, str):
                parts.append(piece)
            finish = choice.get("finish_reason") or finish
    return "".join(parts), finish


class BodyView(QFrame):
    """A titled, read-only, monospaced body with a Copy button."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("BodyView")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.title = QLabel(title, self)
        self.title.setObjectName("BodyTitle")
        self.copy_button = QToolButton(self)
        self.copy_button.setObjectName("BodyCopy")
        self.copy_button.setText("Copy")
        self.copy_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        icons.set_icon(self.copy_button, "copy", size=14)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("BodyText")
        self.text.setReadOnly(True)
        self.text.setFont(theme.mono_font(9.5))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.text.setPlaceholderText("(empty)")
        header = QHBoxLayout()
        header.setContentsMargins(12, 6, 6, 2)
        header.addWidget(self.title)
        header.addStretch(1)
        header.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.text, 1)

    def set_body(self, body: str) -> None:
        self.text.setPlainText(pretty_body(body))
        self.copy_button.setEnabled(bool(body))

    @Slot()
    def _on_copy_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())
        self.copy_button.setText("Copied")


class RequestDetails(QWidget):
    """One request: a summary line, its error, the request and response bodies side by side."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("RequestDetails")
        self.record: RequestRecord | None = None
        self.summary = QLabel(self)
        self.summary.setObjectName("DetailSummary")
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setWordWrap(True)
        self.error = QLabel(self)
        self.error.setObjectName("DetailError")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.hide()
        self.request_view = BodyView("Request", self)
        self.response_view = BodyView("Response", self)
        bodies = QSplitter(Qt.Orientation.Horizontal, self)
        bodies.setObjectName("BodySplitter")
        bodies.setChildrenCollapsible(False)
        bodies.setHandleWidth(8)
        bodies.addWidget(self.request_view)
        bodies.addWidget(self.response_view)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 10, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(self.summary)
        layout.addWidget(self.error)
        layout.addWidget(bodies, 1)
        self.show_record(None)

    def show_record(self, record: RequestRecord | None) -> None:
        self.record = record
        if record is None:
            self.summary.setText("Select a request to see what was sent and answered.")
            self.summary.setProperty("empty", True)
            self.error.hide()
            self.request_view.set_body("")
            self.response_view.set_body("")
        else:
            self.summary.setProperty("empty", False)
            self.summary.setText(_summary_html(record))
            self.error.setText(record.error or "")
            self.error.setVisible(bool(record.error))
            self.request_view.set_body(record.request_body)
            self.response_view.set_body(record.response_body)
            for view in (self.request_view, self.response_view):
                view.copy_button.setText("Copy")
        self.summary.style().unpolish(self.summary)
        self.summary.style().polish(self.summary)


def _summary_html(record: RequestRecord) -> str:
    palette = theme.current()
    color = palette.role(status_role(record.status))
    parts = [
        f"<b>{record.method} {record.path}</b>",
        f'<span style="color:{color}; font-weight:600;">{record.status}</span>',
        duration_text(record.duration),
    ]
    if record.model:
        parts.append(short_model(record.model))
    if record.prompt_tokens is not None or record.completion_tokens is not None:
        parts.append(f"{tokens_text(record)} tokens")
    if record.stream:
        parts.append("streamed")
    if record.client:
        parts.append(f"from {record.client}")
    separator = f'<span style="color:{palette.faint};">  ·  </span>'
    return separator.join(parts)


# The longest text each narrow column shows, and the cell's padding (server.qss) plus room.
_SAMPLES = {0: "00:00:00", 1: "OPTIONS", 4: "88888 → 88888", 5: "88.88 s", 6: "888"}
_CELL_PADDING = 2 * 6 + 12


class RequestLogPanel(QWidget):
    """The table of requests (newest first) over the selected request's details."""

    clear_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("RequestLogPanel")
        self.model = RequestTableModel(self)
        title = QLabel("Requests", self)
        title.setObjectName("CardTitle")
        self.count_label = QLabel(self)
        self.count_label.setObjectName("FieldHelp")
        self.clear_button = QPushButton("Clear", self)
        self.clear_button.setObjectName("SmallButton")
        self.clear_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.clear_button.clicked.connect(self._on_clear_clicked)
        header = QHBoxLayout()
        header.setSpacing(8)
        header.addWidget(title)
        header.addWidget(self.count_label)
        header.addStretch(1)
        header.addWidget(self.clear_button)

        self.table = QTableView(self)
        self.table.setObjectName("RequestTable")
        self.table.setAccessibleName("Requests")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.setAlternatingRowColors(False)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(30)
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.table.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        head = self.table.horizontalHeader()
        head.setHighlightSections(False)
        head.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        head.setStretchLastSection(False)
        self._fit_columns()
        head.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        head.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)

        self.empty = QLabel(
            "No requests yet.\nRequests from editors, scripts and the Connect snippets "
            "appear here as they happen.",
            self,
        )
        self.empty.setObjectName("LogEmpty")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.stack = QStackedWidget(self)
        self.stack.setObjectName("LogStack")
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.table)

        self.details = RequestDetails(self)
        self.splitter = QSplitter(Qt.Orientation.Vertical, self)
        self.splitter.setObjectName("LogSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setHandleWidth(10)
        self.splitter.addWidget(self.stack)
        self.splitter.addWidget(self.details)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.details.hide()  # until a request is picked: the table gets the height

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addLayout(header)
        layout.addWidget(self.splitter, 1)
        self._refresh_count()

    def _fit_columns(self) -> None:
        """Time, method, tokens, duration and status as wide as their longest text in the
        table's font, as styled (a fixed 72 px cut the time short with some fonts)."""
        self.table.ensurePolished()
        head = self.table.horizontalHeader()
        head.ensurePolished()
        metrics = self.table.fontMetrics()
        for column, sample in _SAMPLES.items():
            text = metrics.horizontalAdvance(sample) + _CELL_PADDING
            self.table.setColumnWidth(column, max(text, head.sectionSizeHint(column)))

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self._fit_columns()  # the style sheet's font is known now

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._fit_columns()

    # -- records --------------------------------------------------------------------------

    def set_records(self, records: list[RequestRecord]) -> None:
        self.model.reset(records)
        self.details.show_record(None)
        self.details.hide()
        self._refresh_count()

    def add_record(self, record: RequestRecord) -> None:
        self.model.add(record)
        self._refresh_count()
        # Keep showing the request the user picked; the new one is row 0.
        shown = self.details.record
        if shown is not None:
            row = self.model.row_of(shown.id)
            if row < 0:
                self.details.show_record(None)
                self.details.hide()

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def _refresh_count(self) -> None:
        count = self.model.rowCount()
        noun = "request" if count == 1 else "requests"
        self.count_label.setText(f"{count:,} {noun} · click one for its details" if count else "")
        self.clear_button.setEnabled(count > 0)
        self.stack.setCurrentWidget(self.table if count else self.empty)

    @Slot(QItemSelection, QItemSelection)
    def _on_selection_changed(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        rows = self.table.selectionModel().selectedRows()
        index = rows[0] if rows else QModelIndex()
        record = self.model.record_at(index.row()) if index.isValid() else None
        self.details.show_record(record)
        self.details.setVisible(record is not None)

    @Slot()
    def _on_clear_clicked(self) -> None:
        self.set_records([])
        self.clear_requested.emit()
