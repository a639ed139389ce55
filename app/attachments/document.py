"""The shapes extraction produces, the limits it keeps, and the progress/cancel hooks.

A :class:`Document` is what Ember read out of one file: its sections keep the page (PDF) or
the heading (.docx, HTML, Markdown) they came from, so a retrieved chunk can cite it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from app.attachments.errors import AttachmentCancelledError, TooLargeError
from app.engine.gguf_format import MIB

Progress = Callable[[int, int], None]
"""Called with (done, total) as a long job advances (bytes, pages or characters)."""


class CancelFlag(Protocol):
    """Anything with ``is_set()`` (a :class:`threading.Event`): set it to stop the job."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Limits:
    """What a file may cost, so a hostile file cannot eat the memory: its size on disk, the
    text read out of it, a PDF's pages and a .docx's uncompressed document part."""

    max_bytes: int = 128 * MIB
    max_chars: int = 64_000_000
    max_pages: int = 5000
    max_xml_bytes: int = 64 * MIB


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Section:
    """A run of text from one place in the file."""

    text: str
    page: int | None = None  # 1-based, for PDFs
    heading: str | None = None  # the heading the text sits under (its first line)

    @property
    def where(self) -> str:
        """'page 27', 'section "Results"' or '' (for citations)."""
        if self.page is not None:
            return f"page {self.page}"
        if self.heading:
            return f'section "{self.heading}"'
        return ""


@dataclass(frozen=True, slots=True)
class Document:
    """One file's text. ``name`` is the user's file name, for display only: it never becomes
    a path. ``sha256`` is the file's bytes' hash (the index and the store key on it)."""

    name: str
    size: int
    sha256: str
    kind: str  # "text", "markdown", "pdf", "docx", "html"
    sections: tuple[Section, ...]
    pages: int | None = None

    @property
    def chars(self) -> int:
        return sum(len(s.text) for s in self.sections)

    def text(self) -> str:
        """The whole text; a PDF's pages are marked so the model can cite them."""
        parts = []
        for s in self.sections:
            if s.page is not None:
                parts.append(f"[Page {s.page}]\n{s.text}")
            else:
                parts.append(s.text)
        return "\n\n".join(p.strip() for p in parts if p.strip())


@dataclass(slots=True)
class Job:
    """One extraction's bookkeeping: the name for messages, the limits, and its hooks."""

    name: str
    limits: Limits = DEFAULT_LIMITS
    progress: Progress | None = None
    cancel: CancelFlag | None = None
    chars: int = field(default=0)

    def step(self, done: int, total: int) -> None:
        """Report progress, and stop here if the job was cancelled."""
        if self.cancel is not None and self.cancel.is_set():
            raise AttachmentCancelledError(self.name)
        if self.progress is not None:
            self.progress(done, total)

    def add_chars(self, n: int) -> None:
        self.chars += n
        if self.chars > self.limits.max_chars:
            raise TooLargeError(
                self.name,
                "more text than that",
                f"{self.limits.max_chars:,} characters of text",
            )
