"""A PDF's text through pypdf, page by page (each section keeps its page number).

Anything pypdf raises on a damaged or hostile file becomes :class:`CorruptFileError`, never a
traceback. pypdf bounds decompression itself (``pypdf.filters``' output limits); the page
count and the extracted characters are bounded here, and the cancel flag is checked between
pages.
"""

from __future__ import annotations

import io
import logging

from app.attachments.document import Job, Section
from app.attachments.errors import (
    AttachmentError,
    CorruptFileError,
    EncryptedPdfError,
    NoTextLayerError,
    TooLargeError,
)

# A page with fewer visible characters than this on average is no text layer: a scan may
# carry a page number or a stamp as text.
MIN_CHARS_PER_PAGE = 16


def pdf_sections(data: bytes, job: Job) -> tuple[tuple[Section, ...], int]:
    """The non-empty pages as sections, and the page count."""
    try:
        return _sections(data, job)
    except AttachmentError:
        raise
    except Exception as e:  # pypdf raises many kinds on a bad file (and RecursionError)
        raise CorruptFileError(job.name, "a PDF") from e


def _sections(data: bytes, job: Job) -> tuple[tuple[Section, ...], int]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    _quiet_pypdf()
    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        try:  # an owner password alone leaves the text readable with the empty user password
            opened = reader.decrypt("")
        except DependencyError as e:  # AES without the cryptography package
            raise EncryptedPdfError(job.name) from e
        if not opened:
            raise EncryptedPdfError(job.name)
    count = len(reader.pages)
    if count > job.limits.max_pages:
        raise TooLargeError(job.name, f"{count:,} pages", f"{job.limits.max_pages:,} pages")
    sections: list[Section] = []
    visible = 0
    job.step(0, count)
    for number, page in enumerate(reader.pages, start=1):
        text = (page.extract_text() or "").strip()
        job.add_chars(len(text))
        visible += sum(1 for c in text if not c.isspace())
        if text:
            sections.append(Section(text, page=number))
        job.step(number, count)
    if visible < MIN_CHARS_PER_PAGE * max(count, 1) and visible < 200:
        raise NoTextLayerError(job.name)
    return tuple(sections), count


def _quiet_pypdf() -> None:
    """pypdf logs a warning or an error for every oddity of a damaged file (with no handler
    set, Python prints them on stderr, in the middle of ``ember run``'s output); the user
    sees our one sentence instead, or nothing when the text came out."""
    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
