"""A .docx file's text with the standard library: ``zipfile`` + ``xml.etree`` on
word/document.xml (paragraphs and tables, in order) and word/styles.xml (which paragraph
styles are headings: "heading 1".."heading 9" and "Title", by style name, so a Word in any
language is understood).

The XML part is bounded before it is read (its uncompressed size, which a zip bomb lies
about, is read through a bounded read), and no entity of a part is ever expanded: a part with
a DTD or an entity declaration anywhere is refused (a .docx never has one; the parser would
expand them, an amplifying one to gigabytes, before any limit applies), and so is a part that
is not UTF-8 (Word writes no other; in UTF-16, a "<!DOCTYPE" hid from the search for it).
"""

from __future__ import annotations

import io
import re
import zipfile
from xml.etree import ElementTree as ET

from app.attachments.document import Job, Section
from app.attachments.errors import AttachmentError, CorruptFileError, TooLargeError
from app.engine.gguf_format import human_bytes, mib_text

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
FEED = 1_000_000  # XML bytes parsed between progress reports and cancel checks
_HEADING_NAME = re.compile(r"^(heading \d|title)$", re.IGNORECASE)


def docx_sections(data: bytes, job: Job) -> tuple[Section, ...]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            document = _part(zf, "word/document.xml", job)
            if document is None:
                raise CorruptFileError(job.name, "a .docx document")
            styles = _part(zf, "word/styles.xml", job)
        headings = _heading_styles(styles) if styles is not None else set()
        return _sections(document, headings, job)
    except AttachmentError:
        raise
    except Exception as e:  # BadZipFile, ParseError, a bad compression method, …
        raise CorruptFileError(job.name, "a .docx document") from e


def _part(zf: zipfile.ZipFile, name: str, job: Job) -> bytes | None:
    try:
        info = zf.getinfo(name)
    except KeyError:
        return None
    limit = job.limits.max_xml_bytes
    if info.file_size > limit:
        raise TooLargeError(job.name, f"{human_bytes(info.file_size)} of text", mib_text(limit))
    with zf.open(info) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLargeError(job.name, f"over {mib_text(limit)} of text", mib_text(limit))
    if b"\x00" in data or b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise CorruptFileError(job.name, "a .docx document")
    return data


def _heading_styles(styles_xml: bytes) -> set[str]:
    """The style ids whose names say heading ("Heading1" in English Word, other ids elsewhere)."""
    ids = set()
    for style in ET.fromstring(styles_xml).iter(f"{W}style"):
        name = style.find(f"{W}name")
        style_id = style.get(f"{W}styleId")
        if name is not None and style_id and _HEADING_NAME.match(name.get(f"{W}val", "")):
            ids.add(style_id)
    return ids


def _paragraph_text(p: ET.Element) -> str:
    out: list[str] = []
    for el in p.iter():
        if el.tag == f"{W}t" and el.text:
            out.append(el.text)
        elif el.tag == f"{W}tab":
            out.append("\t")
        elif el.tag in (f"{W}br", f"{W}cr"):
            out.append("\n")
    return "".join(out).strip()


def _style(p: ET.Element) -> str:
    style = p.find(f"{W}pPr/{W}pStyle")
    return style.get(f"{W}val", "") if style is not None else ""


def _sections(xml: bytes, headings: set[str], job: Job) -> tuple[Section, ...]:
    """Stream the document: each paragraph or table of the body is read when it ends and
    then dropped, so memory holds the text, not the whole XML tree."""
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    sections: list[Section] = []
    heading: str | None = None
    lines: list[str] = []
    depth = 0
    body: ET.Element | None = None

    def close() -> None:
        if any(line.strip() for line in lines):
            sections.append(Section("\n".join(lines).strip(), heading=heading))

    for start in range(0, len(xml), FEED):
        job.step(start, len(xml))
        parser.feed(xml[start : start + FEED])
        for item in parser.read_events():
            event, el = item[0], item[-1]
            if not isinstance(el, ET.Element):
                continue
            if event == "start":
                depth += 1
                if depth == 2 and el.tag == f"{W}body":
                    body = el
                continue
            depth -= 1
            if depth != 2 or body is None:
                continue
            if el.tag == f"{W}p":
                text = _paragraph_text(el)
                if text and _style(el) in headings:
                    close()
                    heading, lines = text, []
                rows = [text] if text else []
            elif el.tag == f"{W}tbl":
                rows = [_row_text(row) for row in el.iter(f"{W}tr")]
            else:
                rows = []
            for row_text in rows:
                job.add_chars(len(row_text))
                lines.append(row_text)
            body.remove(el)
    parser.close()
    job.step(len(xml), len(xml))
    close()
    return tuple(sections)


def _row_text(row: ET.Element) -> str:
    return " | ".join(
        " ".join(_paragraph_text(p) for p in cell.iter(f"{W}p")) for cell in row.iter(f"{W}tc")
    )
