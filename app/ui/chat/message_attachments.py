"""What a message shows of attached files: a question's files as chips under its bubble, and an
answer's sources ("Sources: report.pdf, page 27 · …") whose links show the passage given to
the model in a small popup.

A question's images show as thumbnails (made from the stored copy on a worker thread when
none is kept, after a restart say). Both read the message's metadata only (``attachments`` on
a question, ``sources`` and ``attachments_left_out`` on an answer), so a chat opened after a
restart shows them again.
"""

from __future__ import annotations

import functools
import html
import re
from typing import Any

from PySide6.QtCore import QMargins, QPoint, QSize, Qt, QUrl, Slot
from PySide6.QtGui import QCursor, QDesktopServices, QGuiApplication, QImage, QMouseEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.attachments.image import is_image_entry
from app.attachments.store import stored_path
from app.safe_text import label_text
from app.ui.chat.attaching import describe_size, make_thumbnail
from app.ui.chat.attachments_bar import scaled_thumbnail
from app.ui.task_runner import tasks

NAME_MAX_CHARS = 200  # of a file's name in a chip or a tooltip
MAX_PASSAGE_CHARS = 2400  # shown in the popup
IMAGE_SIDE = 96  # a sent image's thumbnail, its longer side


def attached_files(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    entries = metadata.get("attachments")
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and e.get("name")]


def sources_of(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    sources = metadata.get("sources")
    if not isinstance(sources, list):
        return []
    return [s for s in sources if isinstance(s, dict) and s.get("file")]


class _FileChip(QLabel):
    """A sent file: a click opens the copy kept with the chat in the system's viewer."""

    def __init__(self, text: str, entry: dict[str, Any], parent: QWidget) -> None:
        super().__init__(text, parent)
        self.entry = entry
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt override)
        if event.button() == Qt.MouseButton.LeftButton and self.rect().contains(
            event.position().toPoint()
        ):
            open_stored(self.entry)
        super().mouseReleaseEvent(event)


def open_stored(entry: dict[str, Any]) -> bool:
    """Open a sent file's stored copy (False when it is gone)."""
    try:
        path = stored_path(str(entry.get("sha256")), str(entry.get("suffix") or ""))
    except ValueError:
        return False
    return path.exists() and QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))


class AttachmentChips(QWidget):
    """A question's files, right-aligned under its bubble (name · size · pages); a click on
    one opens it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MessageAttachments")
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(6)
        self._row.addStretch(1)
        self.chips: list[QLabel] = []
        self.images: dict[str, QLabel] = {}  # by sha256: a sent image's thumbnail

    def set_files(self, entries: list[dict[str, Any]]) -> None:
        for chip in self.chips:
            self._row.removeWidget(chip)
            chip.deleteLater()
        self.chips = []
        self.images = {}
        for entry in entries:
            if is_image_entry(entry):
                self._add_image(entry)
                continue
            size = entry.get("size")
            pages = entry.get("pages")
            detail = describe_size(
                size if isinstance(size, int) else 0, pages if isinstance(pages, int) else None
            )
            name = label_text(entry["name"], lines=False, limit=NAME_MAX_CHARS)
            chip = _FileChip(f"{name}  ·  {detail}", entry, self)
            chip.setObjectName("MessageAttachment")
            chip.setToolTip(f"{_stored_place(entry)}\nClick to open it.")
            # as tall as its text beside a taller picture, not stretched to the picture's height
            self._row.addWidget(chip, 0, Qt.AlignmentFlag.AlignVCenter)
            self.chips.append(chip)
        self.setVisible(bool(entries))

    def _add_image(self, entry: dict[str, Any]) -> None:
        label = _FileChip("", entry, self)
        label.setObjectName("MessageImage")
        width, height, size = entry.get("width"), entry.get("height"), entry.get("size")
        label.setFixedSize(_box(width, height))  # its shape known now: no jump when it loads
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        detail = f"{width}×{height} · " if width and height else ""
        detail += describe_size(size if isinstance(size, int) else 0, None)
        name = label_text(entry["name"], lines=False, limit=NAME_MAX_CHARS)
        label.setToolTip(f"{name}\n{detail}\n{_stored_place(entry)}")
        label.setAccessibleName(f"Image {name}")
        self._row.addWidget(label)
        self.chips.append(label)
        sha256 = str(entry.get("sha256"))
        self.images[sha256] = label
        if not self._show_image(sha256):
            try:
                path = stored_path(sha256, str(entry.get("suffix") or ""))
            except ValueError:
                return
            if not path.exists():
                label.setText("missing")
                label.setToolTip(f"{name}: its stored copy is missing.")
                return
            tasks().submit(
                functools.partial(make_thumbnail, path, sha256),
                functools.partial(self._on_thumbnail_made, sha256),
                receiver=self,
                name=f"thumbnail {entry['name']}",
            )

    def _show_image(self, sha256: str) -> bool:
        label = self.images.get(sha256)
        pixmap = scaled_thumbnail(sha256, IMAGE_SIDE, self.devicePixelRatioF())
        if label is None or pixmap is None:
            return False
        label.setPixmap(pixmap)
        return True

    def _on_thumbnail_made(self, sha256: str, _image: QImage) -> None:
        self._show_image(sha256)


def _box(width: object, height: object) -> QSize:
    """A sent image's frame: its picture scaled into IMAGE_SIDE, with room for the border."""
    size = QSize(IMAGE_SIDE, IMAGE_SIDE)
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        size = QSize(width, height).scaled(size, Qt.AspectRatioMode.KeepAspectRatio)
        size = size.expandedTo(QSize(24, 24))  # a thin strip still shows it is a picture
    return size.grownBy(QMargins(3, 3, 3, 3))


def _stored_place(entry: dict[str, Any]) -> str:
    try:
        path = stored_path(str(entry.get("sha256")), str(entry.get("suffix") or ""))
    except ValueError:
        return str(entry.get("name"))
    return f"Kept with the chat as {path}"


def _where(source: dict[str, Any]) -> str:
    """A source's place (file, page or heading), control characters shown escaped."""
    return label_text(source.get("where") or source.get("file"), lines=False, limit=NAME_MAX_CHARS)


def _unbroken(text: str) -> str:
    """``text`` as HTML whose spaces do not break a line (short texts; a long one may)."""
    escaped = html.escape(text)
    return escaped.replace(" ", "&nbsp;") if len(text) <= 60 else escaped


class SourcesLine(QLabel):
    """ "Sources: a.pdf, page 3 · b.md, section "Tides"": each a link to its passage."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Sources")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.sources: list[dict[str, Any]] = []
        self.popup: PassagePopup | None = None
        self.linkActivated.connect(self._on_link_activated)

    def set_sources(self, sources: list[dict[str, Any]], left_out: list[str]) -> None:
        self.sources = sources
        links = [  # each wraps as a whole ("page 3 / 16" never split in two)
            f'<a href="{i}">{_unbroken(_where(s))}</a>' for i, s in enumerate(sources)
        ]
        parts = [f"Sources: {'  ·  '.join(links)}"] if links else []
        parts += [html.escape(sentence) for sentence in left_out]
        self.setText("<br>".join(parts))
        self.setVisible(bool(parts))

    @Slot(str)
    def _on_link_activated(self, link: str) -> None:
        if link.isdigit() and int(link) < len(self.sources):
            self.show_passage(int(link), QCursor.pos())

    def show_passage(self, index: int, at: QPoint) -> None:
        source = self.sources[index]
        if self.popup is None:
            self.popup = PassagePopup(self)
        self.popup.show_source(source, at)


class PassagePopup(QFrame):
    """The passage a source gave the model, under the mouse; closes on a click elsewhere."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("PassagePopup")
        self.setMaximumWidth(520)
        self.title = QLabel(self)
        self.title.setObjectName("PassageTitle")
        self.text = QLabel(self)
        self.text.setObjectName("PassageText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 10)
        layout.setSpacing(6)
        layout.addWidget(self.title)
        layout.addWidget(self.text)

    def show_source(self, source: dict[str, Any], at: QPoint) -> None:
        where = str(source.get("where") or source.get("file"))
        text = str(source.get("text") or "")
        if source.get("whole"):
            where += ": its beginning (the whole file was given)"
        text = re.sub(r"(?<!\n)\n(?!\n)", " ", text)  # a PDF's line ends, not paragraphs
        if len(text) > MAX_PASSAGE_CHARS:
            text = text[:MAX_PASSAGE_CHARS].rstrip() + "…"
        self.title.setText(label_text(where, lines=False))
        self.text.setText(text)
        self.adjustSize()
        self.move(self._place(at))
        self.show()

    def _place(self, at: QPoint) -> QPoint:
        """Below and right of ``at``; above it when there is no room below, on the screen."""
        screen = QGuiApplication.screenAt(at) or self.screen()
        area = screen.availableGeometry()
        width, height = self.width(), self.height()
        x = max(area.left(), min(at.x() + 8, area.right() - width))
        y = at.y() + 8
        if y + height > area.bottom():
            y = max(area.top(), at.y() - 8 - height)
        return QPoint(x, y)
