"""An HTML page's text with the standard library's ``html.parser``: scripts, styles and
other non-text elements are dropped, block elements end lines, and h1..h6 start sections
that keep their heading.

``html.parser`` scans from a ``<`` to the end of the text for a tag, comment or declaration
that never ends, and then again from the next ``<``: 150,000 unclosed ``<a`` ran for more than
75 s. :func:`bounded_markup` first takes each such ``<`` as the text it is, in one pass, so
the parser's work is linear in the page.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from app.attachments.document import Job, Section
from app.attachments.encodings import text_codec
from app.attachments.errors import NotTextError

SKIPPED = frozenset({"script", "style", "template", "noscript", "svg", "math", "iframe", "object"})
_BLOCK_NAMES = (
    "p div br li ul ol tr table section article header footer nav aside main blockquote"
    " pre dd dt dl figure figcaption form hr h1 h2 h3 h4 h5 h6 title td th"
)
BLOCKS = frozenset(_BLOCK_NAMES.split())
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_SPACES = re.compile(r"\s+")  # outside <pre>, a line break in the source is a space


class _TextParser(HTMLParser):
    def __init__(self, job: Job) -> None:
        super().__init__(convert_charrefs=True)
        self.job = job
        self.sections: list[Section] = []
        self.heading: str | None = None
        self.parts: list[str] = []
        self.skipping: list[str] = []
        self.in_heading: list[str] | None = None
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED:
            self.skipping.append(tag)
        elif not self.skipping:
            if tag in HEADINGS:
                self.in_heading = []
            if tag == "pre":
                self.pre += 1
            if tag in BLOCKS:
                self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in BLOCKS and not self.skipping:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self.skipping:
            if tag == self.skipping[-1]:
                self.skipping.pop()
            return
        if tag == "pre" and self.pre:
            self.pre -= 1
        if tag in HEADINGS and self.in_heading is not None:
            title = " ".join("".join(self.in_heading).split())
            self.in_heading = None
            if title:
                self.end_section()
                self.heading, self.parts = title, [title, "\n"]
        elif tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        self.job.add_chars(len(data))
        if self.in_heading is not None:
            self.in_heading.append(data)
        else:
            self.parts.append(data if self.pre else _SPACES.sub(" ", data))

    def close_section_text(self) -> str:
        lines = (line.strip() for line in "".join(self.parts).split("\n"))
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()

    def end_section(self) -> None:
        text = self.close_section_text()
        if text:
            self.sections.append(Section(text, heading=self.heading))
        self.parts = []


STEP = 1024 * 1024
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def decode_html(data: bytes, job: Job) -> str:
    """UTF-8, or the encoding the page declares in its ``<meta>`` (a page saved by an older
    site may be windows-1252 or Shift_JIS)."""
    from app.attachments.extract import decode_text

    declared = _CHARSET.search(data[:4096])
    # only a text encoding of the web may be chosen by the file (app/attachments/encodings.py)
    codec = text_codec(declared.group(1).decode("ascii")) if declared is not None else None
    if codec is None or codec.name == "utf-8":
        return decode_text(data, job)
    if b"\x00" in data and "16" not in codec.name and "32" not in codec.name:
        raise NotTextError(job.name)
    text = codec.decode(data, "replace")[0]
    job.add_chars(len(text))
    return text.replace("\r\n", "\n")


MAX_TAG_CHARS = 64 * 1024  # longer (an inline image's data: URL) is dropped, not parsed
MAX_NESTED_TAG_CHARS = 1024  # a "tag" with another "<" in it, and longer, is text


def bounded_markup(text: str) -> str:
    """``text`` with every ``<`` that ``html.parser`` would scan far for nothing made text
    (``&lt;``): one with no ``>`` after it, and one whose ``>`` is far and comes after another
    ``<``. Comments are dropped, tags longer than MAX_TAG_CHARS too. One pass: each search
    starts where the previous one ended, or stops at the next ``<``."""
    out: list[str] = []
    at, gt, close, end = 0, -1, -1, len(text)
    while (lt := text.find("<", at)) >= 0:
        out.append(text[at:lt])
        if text.startswith("<!--", lt):
            if close < lt + 4:  # the next "-->" (or none: ``end``), as ``gt`` below
                close = text.find("-->", lt + 4)
                close = end if close < 0 else close
            if close < end:
                at = close + 3  # the comment is left out
                continue
            out.append("&lt;")
            at = lt + 1
            continue
        if gt < lt:  # the next ">" (or none: ``end``), found once for every "<" before it
            gt = text.find(">", lt)
            gt = end if gt < 0 else gt
        inner = text.find("<", lt + 1, gt)
        if gt == end or (inner >= 0 and gt - lt > MAX_NESTED_TAG_CHARS):
            out.append("&lt;")
            at = lt + 1
        elif inner < 0 and gt - lt > MAX_TAG_CHARS:
            out.append(" ")
            at = gt + 1
        else:
            out.append(text[lt : gt + 1])
            at = gt + 1
    out.append(text[at:])
    return "".join(out)


def html_sections(text: str, job: Job) -> tuple[Section, ...]:
    text = bounded_markup(text)
    parser = _TextParser(job)
    for start in range(0, len(text), STEP):
        parser.feed(text[start : start + STEP])
        job.step(min(start + STEP, len(text)), len(text))
    parser.close()
    parser.end_section()
    return tuple(parser.sections)
