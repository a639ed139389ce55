"""Files attached in the composer before they are sent: each is copied into EMBER_HOME and read
on a worker thread (``tasks()``, the "disk" lane), with its progress, a cancel when its chip is
removed, and its problem in one sentence.

``AttachmentTray`` (GUI thread) holds them for the open composer; the chat controller takes the
ready ones when the message is sent (``take_ready``) and records them in the user message's
metadata (``metadata_entry``). Like a draft's text, files not sent belong to the chat they were
attached in (``show_chat``): another chat shows its own, and coming back shows them again
(still being read meanwhile); kept for the session, not across a restart. Documents just read
are kept in a small cache by their hash, so the first answer does not read them again
(``cached_document``).

Images (PNG, JPEG; a picture pasted from the clipboard too) are stored the same way and
checked as the engine checks them (``app.attachments.image``); a small thumbnail is made on
the worker thread (a ``QImage``, never a ``QPixmap``, off the GUI thread) and kept by hash for
the chips of sent messages (``thumbnail``). ``image_refusal`` is the sentence that says the
chat's model cannot read images (set by the chat controller; empty when it can).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import QObject, QSize, Qt, Signal, Slot
from PySide6.QtGui import QImage, QImageReader

from app.attachments.document import Document
from app.attachments.errors import AttachmentError, UnsupportedFormatError
from app.attachments.extract import extract, supported
from app.attachments.image import ImageFile, image_entry, is_image_name, read_image
from app.attachments.store import StoredFile, safe_suffix, store, store_bytes, stored_path
from app.engine.gguf_format import human_bytes
from app.ui.relay import Relay
from app.ui.task_runner import CancelToken, Task, tasks

State = Literal["reading", "ready", "error"]
COPY_SHARE = 0.3  # of the progress bar: copying into the store; the rest is reading
CACHED_DOCUMENTS = 8
CACHED_CHARS = 16_000_000  # of text kept in memory at most (a document may hold 64 million)
THUMBNAIL_SIDE = 192  # pixels, the longer side (shown at half that at most: sharp on HiDPI)
CACHED_THUMBNAILS = 64
PASTED_NAME = "Pasted image {}.png"


class StopFlag(CancelToken):
    """A task's cancel token that the attachments core can poll (it asks ``is_set()``): the
    task runner's shutdown then stops a long reading or indexing at its next step too."""

    __slots__ = ()

    def is_set(self) -> bool:
        return self.cancelled

    def set(self) -> None:
        self.cancel()


@dataclass(slots=True)
class PendingFile:
    """One chip: a file being read, read (``document``), or refused (``error``)."""

    key: int
    path: Path
    size: int
    state: State = "reading"
    progress: float = 0.0  # 0..1 while reading
    error: str = ""
    stored: StoredFile | None = None
    document: Document | None = None
    cancel: StopFlag = field(default_factory=StopFlag)
    task: Task | None = None
    image: ImageFile | None = None  # once read, for an image
    data: bytes | None = None  # an image pasted from the clipboard (it has no file)
    chat: str | None = None  # the conversation it was attached in (None: a new chat)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def is_image(self) -> bool:
        return is_image_name(self.path)

    @property
    def pages(self) -> int | None:
        return self.document.pages if self.document is not None else None


def describe_size(size: int, pages: int | None) -> str:
    """'12 KB · 40 pages' (what a chip shows under its name)."""
    text = human_bytes(size)
    if pages:
        text += f" · {pages} page{'s' if pages != 1 else ''}"
    return text


def describe_image(size: int, image: ImageFile | None) -> str:
    """'1024×768 · 180 KB' (what an image's chip shows under its name)."""
    return f"{image.pixels} · {human_bytes(size)}" if image is not None else human_bytes(size)


def metadata_entry(stored: StoredFile, document: Document) -> dict[str, Any]:
    """What a user message records of one attachment (enough to find the stored copy)."""
    return {
        "name": document.name,
        "size": stored.size,
        "sha256": stored.sha256,
        "suffix": safe_suffix(Path(document.name).suffix),
        "kind": document.kind,
        "pages": document.pages,
    }


# -- the documents cache (worker threads and the GUI thread) ------------------------------

_cache: OrderedDict[str, Document] = OrderedDict()
_cache_lock = threading.Lock()


def remember_document(document: Document) -> None:
    """Keep the newest documents read, within CACHED_DOCUMENTS and CACHED_CHARS (the newest
    one always: the answer about to be written needs it)."""
    with _cache_lock:
        _cache[document.sha256] = document
        _cache.move_to_end(document.sha256)
        total = sum(d.chars for d in _cache.values())
        while len(_cache) > 1 and (len(_cache) > CACHED_DOCUMENTS or total > CACHED_CHARS):
            _, oldest = _cache.popitem(last=False)
            total -= oldest.chars


def cached_document(entry: dict[str, Any]) -> Document:
    """The document of a recorded attachment: from the cache, or read again from its stored
    copy (a worker thread: it may take seconds). Raises ``AttachmentError`` or ``ValueError``."""
    sha256 = str(entry.get("sha256", ""))
    with _cache_lock:
        document = _cache.get(sha256)
    if document is not None:
        return document
    path = stored_path(sha256, str(entry.get("suffix") or ""))
    document = extract(path, name=str(entry.get("name") or path.name))
    remember_document(document)
    return document


# -- thumbnails (worker threads make them, the GUI thread shows them) ------------------------

_thumbnails: OrderedDict[str, QImage] = OrderedDict()
_thumbnails_lock = threading.Lock()
_KEEP_ASPECT = Qt.AspectRatioMode.KeepAspectRatio


def make_thumbnail(path: Path, sha256: str) -> QImage:
    """A small copy of a stored image, scaled while decoding (a worker thread), kept by hash."""
    reader = QImageReader(str(path))
    size = reader.size()
    if size.isValid() and max(size.width(), size.height()) > THUMBNAIL_SIDE:
        reader.setScaledSize(size.scaled(QSize(THUMBNAIL_SIDE, THUMBNAIL_SIDE), _KEEP_ASPECT))
    image = reader.read()
    with _thumbnails_lock:
        _thumbnails[sha256] = image
        _thumbnails.move_to_end(sha256)
        while len(_thumbnails) > CACHED_THUMBNAILS:
            _thumbnails.popitem(last=False)
    return image


def forget_thumbnails() -> None:
    """Drop the kept thumbnails (as a restart does)."""
    with _thumbnails_lock:
        _thumbnails.clear()


def thumbnail(sha256: str) -> QImage | None:
    """The thumbnail made for this image, if it is still kept."""
    with _thumbnails_lock:
        return _thumbnails.get(sha256)


def _read_image(
    path: Path, data: bytes | None, cancel: StopFlag
) -> tuple[StoredFile, ImageFile, QImage]:
    """Store then check one image (a worker thread)."""
    stored = store_bytes(data, path.name) if data is not None else store(path, cancel=cancel)
    try:
        image, _ = read_image(stored.path, path.name)
    except BaseException:
        if stored.new:
            stored.path.unlink(missing_ok=True)
        raise
    return stored, image, make_thumbnail(stored.path, stored.sha256)


def _read(path: Path, report: Relay, key: int, cancel: StopFlag) -> tuple[Any, Any]:
    """Copy then read one file (a worker thread; it holds only the relay, never the tray)."""

    def copying(done: int, total: int) -> None:
        report.send((key, COPY_SHARE * done / total if total else 0.0))

    def reading(done: int, total: int) -> None:
        report.send((key, COPY_SHARE + (1 - COPY_SHARE) * done / total if total else COPY_SHARE))

    if not supported(path):  # before copying a file that cannot be read
        raise UnsupportedFormatError(path.name, path.suffix.lower())
    stored = store(path, progress=copying, cancel=cancel)
    try:
        document = extract(stored.path, name=path.name, progress=reading, cancel=cancel)
    except BaseException:
        if stored.new:  # kept for nothing (a copy another chat uses stays), as attach_file does
            stored.path.unlink(missing_ok=True)
        raise
    remember_document(document)
    return stored, document


class AttachmentTray(QObject):
    """The composer's attachments (GUI thread).

    Signals: ``files_changed()`` a file was added or removed (or all were taken);
    ``file_updated(int key)`` its progress or state changed; ``image_refusal_changed(str)``.
    """

    files_changed = Signal()
    file_updated = Signal(int)
    image_refusal_changed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._files: dict[int, PendingFile] = {}  # of every chat
        self._chat: str | None = None  # the chat whose files are on show (None: a new chat)
        self._next_key = 1
        self._pasted = 0
        self._image_refusal = ""
        self._progress = Relay(self._on_progress, self)

    # -- queries --------------------------------------------------------------------------

    @property
    def files(self) -> list[PendingFile]:
        """The open chat's files."""
        return [f for f in self._files.values() if f.chat == self._chat]

    def file(self, key: int) -> PendingFile | None:
        found = self._files.get(key)
        return found if found is not None and found.chat == self._chat else None

    @property
    def reading(self) -> list[PendingFile]:
        return [f for f in self.files if f.state == "reading"]

    # -- changes --------------------------------------------------------------------------

    @property
    def images(self) -> list[PendingFile]:
        return [f for f in self.files if f.is_image]

    @property
    def image_refusal(self) -> str:
        """Why the chat's model cannot take the attached images ('' when it can)."""
        return self._image_refusal

    def set_image_refusal(self, text: str) -> None:
        if text != self._image_refusal:
            self._image_refusal = text
            self.image_refusal_changed.emit(text)

    def show_chat(self, chat: str | None) -> None:
        """``chat`` is open (None: a new chat): its files are on show, the others wait."""
        if chat != self._chat:
            self._chat = chat
            self.files_changed.emit()

    def adopt(self, chat: str) -> None:
        """The new chat on show became the conversation ``chat``: its files go with it."""
        for pending in self.files:
            pending.chat = chat
        self._chat = chat

    def add_image_data(self, data: bytes) -> int:
        """Attach an image that has no file (pasted from the clipboard, as PNG); its key."""
        self._pasted += 1
        pending = PendingFile(self._next_key, Path(PASTED_NAME.format(self._pasted)), len(data))
        pending.data, pending.chat = data, self._chat
        self._start(pending)
        self.files_changed.emit()
        return pending.key

    def add_paths(self, paths: list[Path]) -> list[int]:
        """Start reading these files (one already here is not added twice); their keys."""
        known = {f.path for f in self.files}
        keys: list[int] = []
        for given in paths:
            path = Path(given)
            if path in known or path.is_dir():
                continue
            known.add(path)
            try:
                size = path.stat().st_size
            except OSError:
                size = 0
            pending = PendingFile(self._next_key, path, size, chat=self._chat)
            keys.append(pending.key)
            self._start(pending)
        if keys:
            self.files_changed.emit()
        return keys

    def _start(self, pending: PendingFile) -> None:
        self._next_key = max(self._next_key, pending.key + 1)
        self._files[pending.key] = pending
        path = pending.path
        work: Callable[[], tuple[Any, ...]]
        if pending.is_image:
            work = functools.partial(_read_image, path, pending.data, pending.cancel)
        else:
            work = functools.partial(_read, path, self._progress, pending.key, pending.cancel)
        pending.task = tasks().submit(
            work,
            functools.partial(self._on_read, pending.key),
            functools.partial(self._on_failed, pending.key),
            receiver=self,
            token=pending.cancel,
            name=f"attach {path.name}",
        )

    def remove(self, key: int) -> None:
        """Take a file away; one still being read stops being read."""
        pending = self._files.pop(key, None)
        if pending is None:
            return
        self._stop(pending)
        self.files_changed.emit()

    def take_ready(self) -> list[dict[str, Any]]:
        """The read files' metadata entries, for the message being sent; the tray empties
        (files with an error are left out, as their chips said)."""
        entries: list[dict[str, Any]] = []
        for f in self.files:
            if f.state != "ready" or f.stored is None:
                continue
            if f.image is not None:
                entries.append(image_entry(f.image, f.path.suffix))
            elif f.document is not None:
                entries.append(metadata_entry(f.stored, f.document))
        self.clear()
        return entries

    def clear(self) -> None:
        """The open chat's files go."""
        shown = self.files
        if not shown:
            return
        for pending in shown:
            self._stop(pending)
            del self._files[pending.key]
        self.files_changed.emit()

    def _stop(self, pending: PendingFile) -> None:
        pending.cancel.set()
        if pending.task is not None and not pending.task.settled:
            pending.task.cancel()
        pending.task = None

    # -- the worker's answers (GUI thread) ------------------------------------------------

    @Slot(object)
    def _on_progress(self, update: tuple[int, float]) -> None:
        key, fraction = update
        pending = self._files.get(key)
        if pending is None or pending.state != "reading":
            return
        # Forward only, a percent at a time (reading a text file reports its bytes, then its
        # decoding: the chip's number never goes back).
        if int(fraction * 100) > int(pending.progress * 100):
            pending.progress = fraction
            self.file_updated.emit(key)

    def _on_read(self, key: int, result: tuple[Any, ...]) -> None:
        pending = self._files.get(key)
        if pending is None:
            return
        if pending.is_image:
            pending.stored, pending.image, _ = result
            pending.data = None  # stored now
        else:
            pending.stored, pending.document = result
        pending.size = pending.stored.size
        pending.state, pending.progress, pending.task = "ready", 1.0, None
        self.file_updated.emit(key)

    def _on_failed(self, key: int, error: BaseException) -> None:
        pending = self._files.get(key)
        if pending is None:
            return
        if isinstance(error, AttachmentError):
            pending.error = str(error)
        else:  # a bug, not the file: still one sentence on the chip
            pending.error = f"{pending.name} could not be read ({type(error).__name__}: {error})."
        pending.state, pending.task = "error", None
        self.file_updated.emit(key)
