"""Extraction of real files built here: what comes out, and one clear error per problem."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from app.attachments import extract as extract_module
from app.attachments.document import Limits
from app.attachments.errors import (
    AttachmentCancelledError,
    AttachmentError,
    CorruptFileError,
    EncryptedPdfError,
    NoTextLayerError,
    NotTextError,
    TooLargeError,
    UnreadableError,
    UnsupportedFormatError,
)
from app.attachments.extract import extract
from tests.helpers import builders


def _one_sentence(error: AttachmentError) -> str:
    message = str(error)
    assert "\n" not in message and message.endswith(".")
    assert "; " in message  # what happened; what to do
    return message


def test_a_pdf_keeps_each_pages_number(tmp_path: Path) -> None:
    doc = extract(builders.long_pdf(tmp_path / "long.pdf"))
    assert doc.kind == "pdf" and doc.pages == 40 and doc.name == "long.pdf"
    assert [s.page for s in doc.sections] == list(range(1, 41))
    fact_pages = [s.page for s in doc.sections if "Bartholomew Quince" in s.text]
    assert fact_pages == [builders.FACT_PAGE]
    assert doc.size == (tmp_path / "long.pdf").stat().st_size and len(doc.sha256) == 64
    assert "[Page 27]" in doc.text()


def test_a_pdf_reports_progress_by_page_and_can_be_cancelled(tmp_path: Path) -> None:
    path = builders.long_pdf(tmp_path / "long.pdf")
    seen: list[tuple[int, int]] = []
    extract(path, progress=lambda done, total: seen.append((done, total)))
    assert (40, 40) in seen and (20, 40) in seen
    cancel = threading.Event()

    def stop_at_page_5(done: int, total: int) -> None:
        if total == 40 and done == 5:
            cancel.set()

    with pytest.raises(AttachmentCancelledError) as e:
        extract(path, progress=stop_at_page_5, cancel=cancel)
    _one_sentence(e.value)


def test_a_docx_keeps_its_headings(tmp_path: Path) -> None:
    doc = extract(builders.docx_with_headings(tmp_path / "notes.docx"))
    assert doc.kind == "docx"
    by_heading = {s.heading: s.text for s in doc.sections}
    assert list(by_heading) == ["Ember field notes", "Tides", "Birds"]
    assert "tide turns at noon" in by_heading["Tides"]
    assert "Puffins" in by_heading["Birds"] and "puffin | 212" in by_heading["Birds"]
    assert by_heading["Tides"].startswith("Tides\n")


def test_a_long_docx_reports_progress_and_can_be_cancelled(tmp_path: Path) -> None:
    from docx import Document as WordDocument

    word = WordDocument()
    for i in range(15000):
        word.add_paragraph(f"Paragraph number {i} of a long report about the harbour tides.")
    word.save(str(tmp_path / "long.docx"))
    seen: list[tuple[int, int]] = []
    doc = extract(tmp_path / "long.docx", progress=lambda d, t: seen.append((d, t)))
    assert "Paragraph number 14999 of" in doc.sections[-1].text
    total = seen[-1][1]
    assert seen[-1] == (total, total) and len([1 for _, t in seen if t == total]) > 2
    cancel = threading.Event()

    def stop_in_the_xml(done: int, total: int) -> None:
        if total == seen[-1][1] and done > 0:
            cancel.set()

    with pytest.raises(AttachmentCancelledError):
        extract(tmp_path / "long.docx", progress=stop_in_the_xml, cancel=cancel)


def test_html_drops_scripts_and_styles_and_keeps_headings(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><title>T</title><style>body { color: red }</style>"
        "<script>var secret = 'do not show';</script></head><body>"
        "<h1>Harbour</h1><p>The tide   turns\n at <b>noon</b>.</p>"
        "<script type='module'>alert(1)</script><h2>Birds</h2><ul><li>puffin</li>"
        "<li>gull &amp; tern</li></ul><noscript>enable js</noscript></body></html>",
        encoding="utf-8",
    )
    doc = extract(page)
    text = doc.text()
    assert "secret" not in text and "alert" not in text and "color" not in text
    assert "enable js" not in text
    assert "The tide turns at noon." in text and "gull & tern" in text
    assert [s.heading for s in doc.sections if s.heading] == ["Harbour", "Birds"]


def test_html_in_its_declared_encoding(tmp_path: Path) -> None:
    page = tmp_path / "old.htm"
    page.write_bytes(
        b'<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252">'
        b"</head><body><p>Caf\xe9 \x93quoted\x94</p></body></html>"
    )
    assert extract(page).text() == "Caf\u00e9 \u201cquoted\u201d"
    plain = tmp_path / "new.html"
    plain.write_bytes(b"<meta charset='utf-8'><p>Caf\xe9</p>")  # says UTF-8, is not
    with pytest.raises(NotTextError, match="not UTF-8"):
        extract(plain)


def test_text_markdown_and_code(tmp_path: Path) -> None:
    md = tmp_path / "notes.md"
    md.write_text("Intro line\n# First\nalpha\n```\n# not a heading\n```\n## Second\nbeta\n")
    doc = extract(md)
    assert [s.heading for s in doc.sections] == [None, "First", "Second"]
    assert "# not a heading" in doc.sections[1].text
    code = tmp_path / "x.py"
    code.write_bytes("\ufeffprint('héllo')\r\n".encode())
    assert extract(code).text() == "print('héllo')"
    for plain in ("Makefile", ".bashrc"):
        (tmp_path / plain).write_text("all: build\n")
        assert extract(tmp_path / plain).text() == "all: build"
    utf16 = tmp_path / "w.txt"
    utf16.write_text("wide text", encoding="utf-16")
    assert extract(utf16).text() == "wide text"


def test_a_short_text_file_reports_progress(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello")
    seen: list[tuple[int, int]] = []
    extract(path, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, 5) and seen[-1] == (5, 5)


def test_an_encrypted_pdf(tmp_path: Path) -> None:
    source = builders.short_pdf(tmp_path / "plain.pdf")
    path = builders.encrypted_pdf(tmp_path / "locked.pdf", source)
    with pytest.raises(EncryptedPdfError) as e:
        extract(path)
    assert "locked.pdf is protected by a password" in _one_sentence(e.value)


def test_a_pdf_restricted_only_by_an_owner_password_is_read(tmp_path: Path) -> None:
    source = builders.short_pdf(tmp_path / "plain.pdf")
    path = builders.encrypted_pdf(tmp_path / "statement.pdf", source, user_password="")
    assert "tide turns at noon" in extract(path).text()


def test_a_scan_without_a_text_layer(tmp_path: Path) -> None:
    with pytest.raises(NoTextLayerError) as e:
        extract(builders.image_only_pdf(tmp_path / "scan.pdf"))
    assert "OCR" in _one_sentence(e.value)


def test_garbage_with_a_pdf_name(tmp_path: Path) -> None:
    path = tmp_path / "junk.pdf"
    path.write_bytes(builders.pdf_bytes_garbage())
    with pytest.raises(CorruptFileError) as e:
        extract(path)
    assert "junk.pdf could not be read as a PDF" in _one_sentence(e.value)
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    with pytest.raises(CorruptFileError):
        extract(empty)


def test_a_truncated_pdf_is_a_clear_error_never_a_traceback(tmp_path: Path) -> None:
    whole = builders.long_pdf(tmp_path / "long.pdf", pages=5, fact_page=2).read_bytes()
    for cut in (len(whole) // 3, len(whole) // 2, len(whole) - 40):
        path = tmp_path / f"cut{cut}.pdf"
        path.write_bytes(whole[:cut])
        try:
            extract(path)  # pypdf may recover what is there: that is fine too
        except AttachmentError as e:
            _one_sentence(e)


def test_damaged_pdfs_and_docx_files_give_our_errors_and_print_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Random bytes changed in real files: whatever pypdf, zipfile or the XML parser raise
    becomes one AttachmentError (or the text that could be read), and nothing reaches the
    terminal (pypdf logs what it finds odd)."""
    rng = random.Random(11)
    originals = {
        ".pdf": builders.long_pdf(tmp_path / "a.pdf", pages=3, fact_page=2).read_bytes(),
        ".docx": builders.docx_with_headings(tmp_path / "a.docx").read_bytes(),
    }
    capfd.readouterr()
    outcomes: set[str] = set()
    for i in range(300):
        suffix = (".pdf", ".docx")[i % 2]
        damaged = bytearray(originals[suffix])
        for _ in range(rng.randint(1, 20)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path = tmp_path / f"damaged{i}{suffix}"
        path.write_bytes(bytes(damaged))
        try:
            extract(path)
            outcomes.add("read")
        except AttachmentError as e:
            _one_sentence(e)
            outcomes.add(type(e).__name__)
    assert {"read", "CorruptFileError"} <= outcomes
    assert capfd.readouterr() == ("", "")
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("pypdf")]


def test_garbage_with_a_docx_name(tmp_path: Path) -> None:
    path = tmp_path / "junk.docx"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CorruptFileError) as e:
        extract(path)
    _one_sentence(e.value)


def test_binary_data_with_a_txt_name(tmp_path: Path) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(builders.png_bytes())
    with pytest.raises(NotTextError) as e:
        extract(path)
    assert "blob.txt holds binary data" in _one_sentence(e.value)
    latin = tmp_path / "old.txt"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(NotTextError, match="not UTF-8"):
        extract(latin)


def test_a_format_ember_does_not_read(tmp_path: Path) -> None:
    for name in ("picture.png", "sheet.xlsx", "old.doc", "archive.tar.gz"):
        path = tmp_path / name
        path.write_bytes(b"x")
        with pytest.raises(UnsupportedFormatError) as e:
            extract(path)
        _one_sentence(e.value)


def test_a_file_over_the_byte_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with path.open("wb") as f:  # sparse: nothing is written, the size is still 200 MB
        f.truncate(200_000_000)
    seen: list[tuple[int, int]] = []
    with pytest.raises(TooLargeError) as e:
        extract(path, progress=lambda d, t: seen.append((d, t)))
    assert "huge.txt is too large (200 MB" in _one_sentence(e.value)
    assert seen == []  # refused before reading anything


def test_text_over_the_character_limit_is_refused(tmp_path: Path) -> None:
    limits = Limits(max_chars=1000)
    path = tmp_path / "long.txt"
    path.write_text("word " * 1000)
    with pytest.raises(TooLargeError, match="1,000 characters"):
        extract(path, limits=limits)
    pdf = builders.long_pdf(tmp_path / "long.pdf", pages=5, fact_page=2)
    with pytest.raises(TooLargeError):
        extract(pdf, limits=limits)
    with pytest.raises(TooLargeError, match="3 pages"):
        extract(pdf, limits=Limits(max_pages=3))
    docx = builders.docx_with_headings(tmp_path / "n.docx")
    with pytest.raises(TooLargeError):
        extract(docx, limits=Limits(max_chars=50))
    with pytest.raises(TooLargeError):
        extract(docx, limits=Limits(max_xml_bytes=100))


def test_a_docx_zip_bomb_is_refused_by_its_real_size(tmp_path: Path) -> None:
    """A part whose header claims a small size but inflates past the limit."""
    import zipfile

    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", b"<w:document>" + b" " * 5_000_000 + b"</w:document>")
    with pytest.raises(TooLargeError):
        extract(path, limits=Limits(max_xml_bytes=1_000_000))


def test_a_missing_file_and_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UnreadableError) as e:
        extract(tmp_path / "nope.txt")
    _one_sentence(e.value)
    (tmp_path / "dir.txt").mkdir()
    with pytest.raises(UnreadableError):
        extract(tmp_path / "dir.txt")


@pytest.mark.parametrize("step", [1, 2, 3, 4, 7])
def test_crlf_becomes_lf_wherever_the_read_steps_split_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    """The text is decoded (and its line ends normalized) a step at a time, so a "\\r\\n" may
    straddle two steps; a lone "\\r" stays."""
    monkeypatch.setattr(extract_module, "READ_STEP", step)
    path = tmp_path / "notes.txt"
    path.write_bytes("one\r\ntwo\r\n\r\nthrée\rfour\r\n€\r".encode())
    assert extract(path).sections[0].text == "one\ntwo\n\nthrée\rfour\n€\r"
