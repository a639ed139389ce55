"""Files attached in the composer before they are sent: each is copied into EMBER_HOME and read
on a worker thread (``tasks()``, the "disk" lane), with its progress, a cancel when its chip is
removed, and its problem in one sentence.

``AttachmentTray`` (GUI thread) holds them for the open composer; the chat controller takes the
ready ones when the message is sent (``take_ready``) and records them in the user message's
metadata (``metadata_entry``). Documents just read are kept in a small cache by their hash, so
the first answer does not read them again (``cached_document``).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import QObject, Signal, Slot

from app.attachments.document import Document
from app.attachments.errors import AttachmentError, UnsupportedFormatError
from app.attachments.extract import extract, supported
from app.attachments.store import StoredFile, safe_suffix, store, stored_path
from app.engine.gguf_format import human_bytes
from app.ui.relay import Relay
from app.ui.task_runner import CancelToken, Task, tasks

State = Literal["reading", "ready", "error"]
COPY_SHARE = 0.3  # of the progress bar: copying into the store; the rest is reading
CACHED_DOCUMENTS = 8
CACHED_CHARS = 16_000_000  # of text kept in memory at most (a document may hold 64 million)


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

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def pages(self) -> int | None:
        return self.document.pages if self.document is not None else None


def describe_size(size: int, pages: int | None) -> str:
    """'12 KB · 40 pages' (what a chip shows under its name)."""
    text = human_bytes(size)
    if pages:
        text += f" · {pages} page{'s' if pages != 1 else ''}"
    return text


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
    ``file_updated(int key)`` its progress or state changed.
    """

    files_changed = Signal()
    file_updated = Signal(int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._files: dict[int, PendingFile] = {}
        self._next_key = 1
        self._progress = Relay(self._on_progress, self)

    # -- queries --------------------------------------------------------------------------

    @property
    def files(self) -> list[PendingFile]:
        return list(self._files.values())

    def file(self, key: int) -> PendingFile | None:
        return self._files.get(key)

    @property
    def reading(self) -> list[PendingFile]:
        return [f for f in self._files.values() if f.state == "reading"]

    # -- changes --------------------------------------------------------------------------

    def add_paths(self, paths: list[Path]) -> list[int]:
        """Start reading these files (one already here is not added twice); their keys."""
        known = {f.path for f in self._files.values()}
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
            pending = PendingFile(self._next_key, path, size)
            self._next_key += 1
            self._files[pending.key] = pending
            keys.append(pending.key)
            pending.task = tasks().submit(
                functools.partial(_read, path, self._progress, pending.key, pending.cancel),
                functools.partial(self._on_read, pending.key),
                functools.partial(self._on_failed, pending.key),
                receiver=self,
                token=pending.cancel,
                name=f"attach {path.name}",
            )
        if keys:
            self.files_changed.emit()
        return keys

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
        entries = [
            metadata_entry(f.stored, f.document)
            for f in self._files.values()
            if f.state == "ready" and f.stored is not None and f.document is not None
        ]
        self.clear()
        return entries

    def clear(self) -> None:
        if not self._files:
            return
        for pending in self._files.values():
            self._stop(pending)
        self._files.clear()
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

    def _on_read(self, key: int, result: tuple[StoredFile, Document]) -> None:
        pending = self._files.get(key)
        if pending is None:
            return
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
