"""Hostile attached files (issue 26), built here; work is counted, not timed.

- HTML of 150,000 unclosed ``<a`` (or ``<!--``) ran past 75 s: html.parser scanned from each
  ``<`` to the end. The text it may scan now adds up to a few times the page.
- A ``<meta charset>`` naming a slow codec (punycode), a non-text codec (rot13, zlib, base64)
  or one that refuses ``replace`` (idna) ran long or raised a traceback: only the web's text
  encodings may be chosen by a file (app/attachments/encodings.py); others read as UTF-8.
- A FIFO (or any non-regular file) attached as .txt blocked for good: refused before reading.
- A .docx whose document part declares an entity got it expanded into the prompt (in UTF-16,
  or after 4 KB of comment, the check missed the DTD); a billion-laughs part: refused, with
  nothing expanded.
"""

from __future__ import annotations

import encodings.punycode
import html.parser
import io
import os
import sys
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import pytest

from app.attachments.attachment import attach_file
from app.attachments.encodings import text_codec
from app.attachments.errors import CorruptFileError, UnreadableError
from app.attachments.extract import extract
from app.attachments.image import read_image


class _ScanCounter:
    """How much text html.parser's tag parsers may scan: from each ``<`` they start at to the
    next ``>`` (or the end of what it holds), added up over every call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.chars = 0
        for name in ("parse_starttag", "parse_endtag", "parse_html_declaration", "parse_pi"):
            original = getattr(html.parser.HTMLParser, name)
            monkeypatch.setattr(html.parser.HTMLParser, name, self._counting(original))

    def _counting(self, original: Any) -> Any:
        def counted(parser: html.parser.HTMLParser, i: int) -> Any:
            raw = parser.rawdata
            end = raw.find(">", i)
            self.chars += (len(raw) if end < 0 else end) - i
            return original(parser, i)

        return counted


@pytest.mark.parametrize(
    "page",
    [
        "<a" * 150_000,
        "<!--" * 150_000,
        "<a" * 150_000 + ">",
        ("<a" * 600 + ">") * 250,
        "<p>text " + "</a" * 100_000,
        "<!x" * 100_000,
        "<?" * 150_000,
    ],
)
def test_unclosed_markup_is_read_in_linear_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    counter = _ScanCounter(monkeypatch)
    path = tmp_path / "page.html"
    path.write_text(page, encoding="utf-8")
    doc = extract(path)
    assert counter.chars <= 4 * len(page), counter.chars
    assert doc.kind == "html"


def test_ordinary_markup_reads_as_before(tmp_path: Path) -> None:
    page = (
        "<html><head><title>T</title><!-- a <b>comment</b> --></head><body><h1>Tides</h1>"
        '<p>a&lt;b and <img src="data:image/png;base64,' + "A" * 100_000 + '">x</p>'
        "<pre>if a &lt; b: pass</pre><p>2 < 3 > 1</p></body></html>"
    )
    path = tmp_path / "page.html"
    path.write_text(page, encoding="utf-8")
    text = "\n".join(s.text for s in extract(path).sections)
    assert "a<b and x" in text and "if a < b: pass" in text and "2 < 3 > 1" in text
    assert "comment" not in text and "AAAA" not in text


@pytest.mark.parametrize(
    "charset",
    ["punycode", "rot13", "zlib", "base64", "hex", "bz2", "uu", "idna", "utf-7", "mbcs", "x" * 500],
)
def test_a_page_cannot_choose_a_codec_that_is_no_text_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, charset: str
) -> None:
    def never(*_args: Any) -> Any:
        raise AssertionError("punycode decoded a page")

    monkeypatch.setattr(encodings.punycode, "punycode_decode", never)
    body = "<p>caf\u00e9 " + "x" * 1_300_000 + "</p>"
    path = tmp_path / "page.html"
    path.write_bytes(f'<meta charset="{charset}">'.encode() + body.encode("utf-8"))
    doc = extract(path)
    assert doc.sections[0].text.startswith("caf\u00e9 xxx")
    assert text_codec(charset) is None


@pytest.mark.parametrize(
    ("name", "codec"),
    [("windows-1252", "cp1252"), ("Shift_JIS", "shift_jis"), ("windows-874", "cp874")],
)
def test_the_webs_text_encodings_may_be_chosen(name: str, codec: str) -> None:
    found = text_codec(name)
    assert found is not None and found.name == codec


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("name", ["notes.txt", "page.html", "picture.png"])
def test_a_fifo_is_refused_before_it_is_read(tmp_path: Path, ember_home: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    readers = (read_image,) if name.endswith(".png") else (extract, attach_file, read_image)
    for read in readers:
        with pytest.raises(UnreadableError, match="not a regular file"):
            read(fifo)
    with pytest.raises(UnreadableError, match="a folder"):
        extract(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert list((ember_home / "attachments").rglob("*.*")) == []  # no copy left behind


def test_a_fifo_on_the_command_line_is_one_line(tmp_path: Path, ember_home: Path) -> None:
    from app.cli import CliError
    from app.commands.run_images import read_images

    fifo = tmp_path / "picture.png"
    os.mkfifo(fifo)
    with pytest.raises(CliError, match="not a regular file"):
        read_images([fifo])


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx(path: Path, document: bytes) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", document)
    path.write_bytes(buffer.getvalue())
    return path


def document_xml(dtd: str, text: str, prolog: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>{prolog}{dtd}'
        f'<w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p>'
        "</w:body></w:document>"
    )


ENTITY = '<!DOCTYPE w:document [<!ENTITY secret "EXPANDED">]>'
LAUGHS = (
    '<!DOCTYPE w:document [<!ENTITY a "'
    + "ha" * 1000
    + '">'
    + "".join(
        f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "]>"
)


@pytest.mark.parametrize(
    "document",
    [
        document_xml(ENTITY, "hi &secret;").encode("utf-8"),
        document_xml(ENTITY, "hi &secret;", prolog="<!--" + "x" * 8000 + "-->").encode("utf-8"),
        document_xml(ENTITY, "hi &secret;").replace("UTF-8", "UTF-16").encode("utf-16"),
        document_xml(LAUGHS, "&h;").encode("utf-8"),
    ],
)
def test_no_entity_of_a_docx_is_expanded(tmp_path: Path, document: bytes) -> None:
    path = docx(tmp_path / "entity.docx", document)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptFileError):
            extract(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16_000_000  # the file read in one 4 MB step; nothing expanded (h: 20 GB)


def test_a_docx_without_a_dtd_reads_as_before(tmp_path: Path) -> None:
    path = docx(tmp_path / "plain.docx", document_xml("", "caf&#233; &amp; tea").encode("utf-8"))
    assert extract(path).sections[0].text == "caf\u00e9 & tea"


def test_hostile_files_write_nothing_outside_ember_home(
    tmp_path: Path, ember_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.html"
    page.write_bytes(b'<meta charset="rot13">' + b"<a" * 50_000)
    entity = docx(tmp_path / "entity.docx", document_xml(ENTITY, "&secret;").encode("utf-8"))
    attach_file(page)
    with pytest.raises(CorruptFileError):
        attach_file(entity)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entity.docx", "page.html"]
    assert str(ember_home) not in sys.path
