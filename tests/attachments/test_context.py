"""Whole or retrieved: real files, the real SQLite FTS5 index in EMBER_HOME."""

from __future__ import annotations

import itertools
import os
import random
import sqlite3
import threading
from pathlib import Path

import pytest

from app.attachments.chunks import CHUNK_CHARS, chunk_document, split_text
from app.attachments.context import WHOLE_SHARE, build_context
from app.attachments.errors import AttachmentCancelledError
from app.attachments.extract import extract
from app.attachments.index import ChunkIndex, drop_index, index_path, query_terms
from app.engine.fitting import estimate_tokens
from tests.helpers import builders


def test_a_fact_deep_in_a_long_pdf_is_retrieved_with_its_page(tmp_path: Path) -> None:
    doc = extract(builders.long_pdf(tmp_path / "long.pdf"))
    assert estimate_tokens(doc.text()) > 10_000  # far more than the room below
    context = build_context([doc], builders.QUESTION, 2000, estimate_tokens, "c1")
    assert context.retrieved == ("long.pdf",)
    assert builders.FACT_PAGE in [s.page for s in context.sources[:3]]
    assert all(s.file == "long.pdf" and not s.whole for s in context.sources)
    assert f'<excerpt file="long.pdf" page="{builders.FACT_PAGE}">' in context.text
    assert "Bartholomew Quince" in context.text
    assert estimate_tokens(context.text) <= 2000
    prompt = context.prompt(builders.QUESTION)
    assert prompt.startswith(context.text) and prompt.endswith(builders.QUESTION)
    assert index_path("c1").is_file()


def test_a_short_pdf_goes_in_whole_with_its_name_and_pages(tmp_path: Path) -> None:
    doc = extract(builders.short_pdf(tmp_path / "short.pdf"))
    context = build_context([doc, doc], "When does the tide turn?", 2000, estimate_tokens, "c2")
    assert context.retrieved == ()
    assert [(s.file, s.whole) for s in context.sources] == [("short.pdf", True)]
    assert '<file name="short.pdf" pages="2">' in context.text
    assert "[Page 2]\nThe second page says the tide turns at noon." in context.text
    assert not index_path("c2").exists()  # nothing to index


def test_a_document_that_would_fill_most_of_the_room_is_retrieved(tmp_path: Path) -> None:
    """'Fits comfortably': whole only within WHOLE_SHARE of the room, so the question's
    answer keeps some room for passages of other files and the chat around it."""
    path = tmp_path / "notes.txt"
    path.write_text(builders.filler(random.Random(5), 60) + " " + builders.FACT)
    doc = extract(path)
    tokens = estimate_tokens(doc.text())
    fits = build_context(
        [doc], builders.QUESTION, int(tokens / WHOLE_SHARE) + 80, estimate_tokens, "c9"
    )
    assert fits.sources[0].whole
    tight = build_context([doc], builders.QUESTION, int(tokens * 1.1), estimate_tokens, "c9")
    assert tight.retrieved == ("notes.txt",) and not tight.sources[0].whole
    assert "Bartholomew Quince" in tight.sources[0].text
    assert estimate_tokens(tight.text) <= int(tokens * 1.1)


def test_small_documents_go_whole_and_a_long_one_is_retrieved(tmp_path: Path) -> None:
    small = extract(builders.short_pdf(tmp_path / "short.pdf"))
    long = extract(builders.long_pdf(tmp_path / "long.pdf"))
    context = build_context([long, small], builders.QUESTION, 3000, estimate_tokens, "c3")
    assert context.sources[0].file == "short.pdf" and context.sources[0].whole
    assert context.retrieved == ("long.pdf",)
    assert builders.FACT_PAGE in [s.page for s in context.sources[1:4]]
    assert estimate_tokens(context.text) <= 3000


def test_a_docx_chunk_keeps_its_heading(tmp_path: Path) -> None:
    doc = extract(builders.docx_with_headings(tmp_path / "notes.docx"))
    context = build_context([doc], "Where do puffins nest?", 120, estimate_tokens, "c4")
    assert context.retrieved == ("notes.docx",)
    assert context.sources[0].heading == "Birds"
    assert context.sources[0].where == 'notes.docx, section "Birds"'
    assert '<excerpt file="notes.docx" section="Birds">' in context.text


def test_no_room_gives_nothing_and_says_what_was_left_out(tmp_path: Path) -> None:
    doc = extract(builders.long_pdf(tmp_path / "long.pdf", pages=3, fact_page=2))
    context = build_context([doc], builders.QUESTION, 10, estimate_tokens, "c8")
    assert context.retrieved == ("long.pdf",) and context.sources == ()
    assert context.text == "" and context.prompt("hi") == "hi"
    assert build_context([], "hi", 100, estimate_tokens, "c8").prompt("hi") == "hi"


def test_nothing_matching_gives_the_beginning(tmp_path: Path) -> None:
    doc = extract(builders.long_pdf(tmp_path / "long.pdf"))
    context = build_context([doc], "???", 1000, estimate_tokens, "c5")
    assert context.sources and context.sources[0].page == 1


def test_the_query_is_words_only(tmp_path: Path) -> None:
    assert query_terms('NEAR("xy" OR *) -yz: the AND a') == ['"near"', '"xy"', '"yz"']
    doc = extract(builders.long_pdf(tmp_path / "long.pdf", pages=3, fact_page=2))
    with ChunkIndex("c6") as index:
        index.add(doc)
        for question in ('"', "NEAR(", "a* OR", "^lighthouse", "cat's -tail"):
            index.search(question, [doc.sha256], 5)  # no FTS5 syntax error
        assert index.search("lighthouses cats", [doc.sha256], 3)[0].page == 2  # stems


def test_chunks_stay_within_their_page_and_overlap() -> None:
    text = " ".join(f"word{i}." for i in range(3000))
    pieces = list(split_text(text))
    assert all(len(p) <= CHUNK_CHARS for p in pieces) and len(pieces) > 10
    for a, b in itertools.pairwise(pieces):
        assert b.split()[0] in a  # each piece starts inside the one before
    assert pieces[0].startswith("word0.") and pieces[-1].endswith("word2999.")
    assert list(split_text("short")) == ["short"] and list(split_text("   ")) == []


def test_pdf_chunks_keep_pages(tmp_path: Path) -> None:
    doc = extract(builders.long_pdf(tmp_path / "long.pdf", pages=4, fact_page=2))
    chunks = list(chunk_document(doc, size=300, overlap=50))
    for chunk in chunks:
        page_text = next(s.text for s in doc.sections if s.page == chunk.page)
        assert chunk.text in page_text  # never across a page boundary
    assert [c.seq for c in chunks] == list(range(len(chunks)))


def test_indexing_is_once_per_conversation_and_a_cancel_leaves_nothing(tmp_path: Path) -> None:
    doc = extract(builders.long_pdf(tmp_path / "long.pdf", pages=3, fact_page=2))
    cancel = threading.Event()
    cancel.set()
    with ChunkIndex("c7") as index:
        with pytest.raises(AttachmentCancelledError):
            index.add(doc, cancel=cancel)
        assert not index.has(doc.sha256)
        count = index.add(doc)
        assert count > 0 and index.has(doc.sha256) and index.add(doc) == count
    rows = sqlite3.connect(index_path("c7")).execute("SELECT count(*) FROM chunks").fetchone()
    assert rows == (count,)
    if os.name == "posix":
        assert index_path("c7").stat().st_mode & 0o077 == 0
    assert drop_index("c7") and not index_path("c7").exists() and not drop_index("c7")
    for bad in ("../x", "a/b", "", "x" * 65):
        with pytest.raises(ValueError):
            index_path(bad)


@pytest.mark.slow
def test_a_50_mb_text_file_is_indexed_with_progress_and_cancel(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    line = builders.filler(random.Random(1), 400) + "\n"
    with path.open("w") as f:
        while f.tell() < 50 * 1024 * 1024:
            f.write(line)
        f.write(builders.FACT + "\n")
    extracted: list[int] = []
    doc = extract(path, progress=lambda done, total: extracted.append(done))
    assert extracted[-1] == path.stat().st_size and len(extracted) > 10
    cancel = threading.Event()

    def stop_halfway(done: int, total: int) -> None:
        if done > total // 2:
            cancel.set()

    with pytest.raises(AttachmentCancelledError):
        build_context(
            [doc],
            builders.QUESTION,
            2000,
            estimate_tokens,
            "big",
            progress=stop_halfway,
            cancel=cancel,
        )
    with ChunkIndex("big") as index:
        assert not index.has(doc.sha256)
    indexed: list[tuple[int, int]] = []
    context = build_context(
        [doc],
        builders.QUESTION,
        2000,
        estimate_tokens,
        "big",
        progress=lambda d, t: indexed.append((d, t)),
    )
    assert indexed[-1] == (doc.chars, doc.chars) and len(indexed) > 20
    assert "Bartholomew Quince" in context.sources[0].text
