"""The store: files copied into EMBER_HOME by hash, once, atomically, whatever their name."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from app.attachments.attachment import attach_file
from app.attachments.document import Limits
from app.attachments.errors import (
    AttachmentCancelledError,
    CorruptFileError,
    TooLargeError,
    UnreadableError,
    UnsupportedFormatError,
)
from app.attachments.store import attachments_dir, remove_stored, store, stored_path
from tests.helpers import builders


def test_a_file_is_stored_under_its_hash(tmp_path: Path, ember_home: Path) -> None:
    source = tmp_path / "Report Final.PDF"
    source.write_bytes(b"%PDF-1.4 not checked here")
    stored = store(source)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert stored.sha256 == digest and stored.size == source.stat().st_size
    assert stored.name == "Report Final.PDF"
    assert stored.path == ember_home / "attachments" / digest[:2] / f"{digest}.pdf"
    assert stored.path.read_bytes() == source.read_bytes()
    assert stored_path(digest, ".PDF") == stored.path
    if os.name == "posix":
        assert stored.path.stat().st_mode & 0o077 == 0
        assert attachments_dir().stat().st_mode & 0o077 == 0


def test_the_same_content_is_stored_once(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "other name.txt"
    a.write_text("same words")
    b.write_text("same words")
    first, second = store(a), store(b)
    assert first.path == second.path and second.name == "other name.txt"
    assert first.new and not second.new
    files = [p for p in attachments_dir().rglob("*") if p.is_file()]
    assert files == [first.path]  # no temp file left behind either


def test_a_hostile_name_never_becomes_a_path(tmp_path: Path) -> None:
    folder = tmp_path / "deep" / "er"
    folder.mkdir(parents=True)
    source = folder / "..%2F..%2Fx.sh;rm -rf"
    source.write_text("echo hi")
    stored = store(source)
    assert stored.path.parent.parent == attachments_dir()
    assert stored.path.name == stored.sha256  # the odd suffix is dropped
    dotted = tmp_path / "..."
    dotted.write_text("dots")
    assert store(dotted).path.parent.parent == attachments_dir()
    with pytest.raises(ValueError):
        stored_path("../../etc/passwd")


def test_limits_progress_cancel_and_errors(tmp_path: Path) -> None:
    source = tmp_path / "big.txt"
    source.write_bytes(b"x" * (3 * 1024 * 1024 + 5))
    seen: list[tuple[int, int]] = []
    store(source, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (source.stat().st_size, source.stat().st_size) and len(seen) == 4
    with pytest.raises(TooLargeError):
        store(source, limits=Limits(max_bytes=1024))
    cancel = threading.Event()
    cancel.set()
    other = tmp_path / "other.txt"
    other.write_bytes(b"y" * 10)
    with pytest.raises(AttachmentCancelledError):
        store(other, cancel=cancel)
    with pytest.raises(UnreadableError):
        store(tmp_path / "missing.txt")
    assert [p.name for p in attachments_dir().rglob("*") if p.is_file()] == [
        f"{hashlib.sha256(source.read_bytes()).hexdigest()}.txt"
    ]  # failed copies leave nothing


def test_remove_stored(tmp_path: Path) -> None:
    source = tmp_path / "a.md"
    source.write_text("# hi")
    stored = store(source)
    assert remove_stored(stored.sha256, ".md") and not stored.path.exists()
    assert not remove_stored(stored.sha256, ".md")


def test_attach_file_keeps_the_file_and_reads_the_kept_copy(tmp_path: Path) -> None:
    source = builders.short_pdf(tmp_path / "Short Notes.PDF")
    attachment = attach_file(source)
    assert attachment.stored.new and attachment.stored.path.suffix == ".pdf"
    assert attachment.document.name == "Short Notes.PDF" and attachment.document.pages == 2
    assert attachment.document.sha256 == attachment.stored.sha256
    source.unlink()  # the conversation keeps its copy
    assert attachment.stored.path.is_file()
    again = builders.short_pdf(tmp_path / "again.pdf")
    assert not attach_file(again).stored.new


def test_attach_file_keeps_nothing_it_cannot_read(tmp_path: Path) -> None:
    garbage = tmp_path / "junk.pdf"
    garbage.write_bytes(builders.pdf_bytes_garbage())
    with pytest.raises(CorruptFileError, match=r"junk\.pdf could not be read"):
        attach_file(garbage)
    picture = tmp_path / "photo.png"
    picture.write_bytes(builders.png_bytes())
    with pytest.raises(UnsupportedFormatError):
        attach_file(picture)
    assert not [p for p in attachments_dir().rglob("*") if p.is_file()]
