"""A long document in pieces for retrieval: ~400 tokens each, overlapping, each keeping its
page or heading.

A chunk never crosses a section, so never a PDF page boundary: a passage that runs over a
page break is two chunks, each citing its own page. Sizes are in characters (about four to a
token in prose, the cautious estimate 3.2 makes 1,600 characters 500 tokens at most): counting
tokens with the model's tokenizer for a 50 MB file would hold the engine for minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from app.attachments.document import Document

CHUNK_CHARS = 1600
OVERLAP_CHARS = 200
# A break (paragraph, line, sentence, word) is looked for in the last part of a chunk.
BREAK_FROM = 0.6


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    page: int | None
    heading: str | None
    seq: int  # reading order within its document


def chunk_document(
    doc: Document, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS
) -> Iterator[Chunk]:
    seq = 0
    for section in doc.sections:
        for piece in split_text(section.text, size, overlap):
            yield Chunk(piece, section.page, section.heading, seq)
            seq += 1


def split_text(text: str, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> Iterator[str]:
    """Pieces of at most ``size`` characters, ending at the best break near the end and each
    starting ``overlap`` characters before the previous one ended (at a word's start)."""
    start, n = 0, len(text)
    while start < n:
        end = start + size
        if end >= n:
            piece = text[start:].strip()
            if piece:
                yield piece
            return
        end = _break(text, start + int(size * BREAK_FROM), end)
        piece = text[start:end].strip()
        if piece:
            yield piece
        next_start = max(end - overlap, start + 1)
        space = text.find(" ", next_start, end)
        start = space + 1 if space != -1 else next_start


def _break(text: str, lo: int, hi: int) -> int:
    for mark in ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " "):
        at = text.rfind(mark, lo, hi)
        if at != -1:
            return at + len(mark)
    return hi
