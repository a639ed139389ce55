"""One call for the chat: keep a file and read it (on a worker thread, never the GUI's).

``attach_file(path)`` copies the file into the store first and reads the stored copy, so
the text the model sees is the text of the file kept with the conversation, and a file the
user changes or deletes afterwards changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.attachments.document import DEFAULT_LIMITS, CancelFlag, Document, Limits, Progress
from app.attachments.errors import UnsupportedFormatError
from app.attachments.extract import extract, supported
from app.attachments.store import StoredFile, store


@dataclass(frozen=True, slots=True)
class Attachment:
    """What a chip shows (``document.name``, ``stored.size``, ``document.pages``) and what
    the chat needs to send and save (the document; the stored file's hash and path)."""

    stored: StoredFile
    document: Document


def attach_file(
    path: Path | str,
    *,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    cancel: CancelFlag | None = None,
) -> Attachment:
    """Store and read ``path``. ``progress`` gets (done, total) of the copy (bytes), then of
    the reading (bytes, pages or characters). Raises one :class:`AttachmentError`."""
    path = Path(path)
    if not supported(path):  # before copying a file that cannot be read
        raise UnsupportedFormatError(path.name, path.suffix.lower())
    stored = store(path, limits=limits, progress=progress, cancel=cancel)
    try:
        document = extract(
            stored.path, name=path.name, limits=limits, progress=progress, cancel=cancel
        )
    except BaseException:
        if stored.new:  # kept for nothing; a copy another conversation uses stays
            stored.path.unlink(missing_ok=True)
        raise
    return Attachment(stored, document)
