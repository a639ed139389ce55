"""``extract(path) -> Document``: the text of an attached file.

Formats: plain text, Markdown and code (UTF-8; UTF-16 with a byte-order mark), PDF through
``pypdf``, ``.docx`` and HTML through the standard library (``zipfile`` + ``xml.etree`` for
word/document.xml, ``html.parser`` for HTML). Why these converters: pypdf is pure Python and
well kept (no compiled code to bundle, decompression limits of its own); .docx and HTML need
only a small, well-known part of each format, and the standard library reads it without lxml
(not in the bundle) or a converter that pulls in many more parsers than Ember reads, so the
code that sees a hostile file stays small.

The file is read once, bounded by :class:`Limits` (bytes on disk, extracted characters, PDF
pages, a .docx's uncompressed XML), and hashed on the way. Long work reports progress and
checks the cancel flag between steps; every problem is one :class:`AttachmentError`.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
from pathlib import Path

from app.attachments.document import (
    DEFAULT_LIMITS,
    CancelFlag,
    Document,
    Job,
    Limits,
    Progress,
    Section,
)
from app.attachments.errors import (
    NotTextError,
    TooLargeError,
    UnreadableError,
    UnsupportedFormatError,
)
from app.attachments.opening import open_regular
from app.engine.gguf_format import MIB, human_bytes, mib_text


def _words(names: str) -> frozenset[str]:
    return frozenset(names.split())


MARKDOWN = frozenset({".md", ".markdown", ".mdown", ".mkd"})
HTML = frozenset({".html", ".htm", ".xhtml"})
TEXT = _words(
    ".txt .text .rst .adoc .org .tex .bib .csv .tsv .log .json .jsonl .yaml .yml .toml .ini"
    " .cfg .conf .xml .svg .env .properties .diff .patch .srt .vtt"
    # code
    " .py .pyi .ipynb .js .mjs .cjs .ts .tsx .jsx .c .h .cc .cpp .cxx .hpp .hh .m .mm .java"
    " .kt .kts .scala .go .rs .rb .php .pl .pm .lua .r .jl .swift .cs .fs .vb .hs .ml .ex"
    " .exs .erl .clj .dart .zig .nim .sh .bash .zsh .fish .ps1 .bat .cmd .sql .css .scss"
    " .sass .less .vue .svelte .gradle .cmake .mk .dockerfile .proto .graphql .tf .nix"
)
IMAGES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff"})
READ_STEP = 4 * MIB  # bytes read (and decoded) between progress reports and cancel checks


def supported(path: Path) -> bool:
    """Whether Ember reads this kind of file, by its name (a name without a suffix, such as
    Makefile or .bashrc, is read as text); the content may still be wrong."""
    suffix = path.suffix.lower()
    return suffix in TEXT | MARKDOWN | HTML | {".pdf", ".docx"} or suffix == ""


def extract(
    path: Path | str,
    *,
    name: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    cancel: CancelFlag | None = None,
) -> Document:
    """Read ``path``'s text. ``name`` is shown in messages (default: the file's name)."""
    path = Path(path)
    job = Job(name or path.name, limits, progress, cancel)
    suffix = path.suffix.lower()
    if not supported(path):
        raise UnsupportedFormatError(job.name, suffix)
    data = _read(path, job)
    digest = hashlib.sha256(data).hexdigest()
    if suffix == ".pdf":
        from app.attachments.pdf import pdf_sections

        sections, pages = pdf_sections(data, job)
        return Document(job.name, len(data), digest, "pdf", sections, pages)
    if suffix == ".docx":
        from app.attachments.docx_reader import docx_sections

        return Document(job.name, len(data), digest, "docx", docx_sections(data, job))
    if suffix in HTML:
        from app.attachments.html_reader import decode_html, html_sections

        text = decode_html(data, job)
        return Document(job.name, len(data), digest, "html", html_sections(text, job))
    text = decode_text(data, job)
    if suffix in MARKDOWN:
        return Document(job.name, len(data), digest, "markdown", markdown_sections(text))
    return Document(job.name, len(data), digest, "text", (Section(text),))


def _read(path: Path, job: Job) -> bytes:
    """The file's bytes, refusing a file over the limit before reading it (and one that grows
    past it while being read)."""
    limit = job.limits.max_bytes
    try:
        with open_regular(path) as f:  # a FIFO or a device is refused before it is read
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise TooLargeError(job.name, human_bytes(size), mib_text(limit))
            parts: list[bytes] = []
            done = 0
            job.step(0, size)
            while chunk := f.read(min(READ_STEP, limit + 1 - done)):
                parts.append(chunk)
                done += len(chunk)
                if done > limit:
                    raise TooLargeError(job.name, f"over {human_bytes(limit)}", human_bytes(limit))
                job.step(done, max(size, done))
    except OSError as e:
        raise UnreadableError(job.name, e.strerror or type(e).__name__) from e
    return b"".join(parts)


def decode_text(data: bytes, job: Job) -> str:
    """UTF-8 (a BOM is dropped), or UTF-16 with its BOM; binary data is refused. Decoded in
    steps so a large file reports progress and can be cancelled."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
        if b"\x00" in data:
            raise NotTextError(job.name)
    decoder = codecs.getincrementaldecoder(encoding)()
    parts: list[str] = []
    held = ""  # a part's final "\r", which may start a "\r\n" the next part ends
    try:
        for start in range(0, len(data), READ_STEP):
            end = start + READ_STEP
            part = held + decoder.decode(data[start:end], final=end >= len(data))
            # per part, not once over the whole text: one str.replace over 50 MB holds the
            # GIL long enough for the window to stutter while a big file is read
            held = "\r" if part.endswith("\r") else ""
            parts.append(part[: len(part) - len(held)].replace("\r\n", "\n"))
            job.add_chars(len(parts[-1]))
            job.step(min(end, len(data)), len(data))
        parts.append(held + decoder.decode(b"", final=True))
    except UnicodeDecodeError as e:
        raise NotTextError(
            job.name, "text that is not UTF-8" if e.start > 0 else "binary data"
        ) from e
    if encoding == "utf-16" and any("\x00" in part for part in parts):
        raise NotTextError(job.name)
    return "".join(parts)


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_sections(text: str) -> tuple[Section, ...]:
    """Split at ATX headings (``# Title``) outside code fences; each part keeps its heading."""
    sections: list[Section] = []
    heading: str | None = None
    lines: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            if "\n".join(lines).strip():
                sections.append(Section("\n".join(lines).strip(), heading=heading))
            heading, lines = match.group(2), [line]
        else:
            lines.append(line)
    if "\n".join(lines).strip() or not sections:
        sections.append(Section("\n".join(lines).strip(), heading=heading))
    return tuple(sections)
