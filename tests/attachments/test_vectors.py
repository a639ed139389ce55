"""Hybrid retrieval with a deterministic fake embedder: BM25 and vectors fused, vectors kept
per chunk in the real SQLite index, a different model re-embedding. The real model's
embeddings are tested in test_vectors_engine.py."""

from __future__ import annotations

import hashlib
import random
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from app.attachments import vectors
from app.attachments.context import build_context
from app.attachments.document import Document, Section
from app.attachments.embedder import (
    AUTO,
    LOADED,
    OFF,
    Embedders,
    GgufEmbedder,
    embedding_choice,
)
from app.attachments.errors import AttachmentCancelledError
from app.attachments.extract import extract
from app.attachments.index import ChunkIndex, index_path
from app.attachments.vectors import RRF_K, fuse
from app.engine.fitting import estimate_tokens
from app.engine.types import EngineError
from tests.helpers import builders

# Words of one meaning share a dimension (weighing CONCEPT_WEIGHT: what a text is about);
# every other word hashes into one of the rest. None of these are in builders.filler's words.
CONCEPTS = (
    ("animal", "tabby", "mouser", "cat", "feline"),
    ("protects", "keeps", "guards"),
    ("harbour", "quay", "dock", "pier"),
    ("grain", "silo", "corn"),
    ("rodents", "mice", "vermin"),
)
OTHER_DIMS = 32
CONCEPT_WEIGHT = 6.0
QUESTION = "Which animal protects the harbour's grain?"
MEANING = "A tabby mouser keeps rodents off the quay silo at night."  # no word of QUESTION
MEANING_PAGE = 17


class FakeEmbedder:
    """Bag of concepts: texts sharing meanings (not words) are close. Counts what it embeds."""

    def __init__(self, model_id: str = "fake-a", max_tokens: int = 8192) -> None:
        self.model_id = model_id
        self.dims = len(CONCEPTS) + OTHER_DIMS
        self.max_tokens = max_tokens
        self.texts: list[str] = []
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts.extend(texts)
        return [self._vector(t) for t in texts]

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(self.dims)
        for word in re.findall(r"\w+", text.lower()):
            dim = next((i for i, c in enumerate(CONCEPTS) if word in c), None)
            if dim is not None:
                v[dim] += CONCEPT_WEIGHT
            else:
                digest = hashlib.sha256(word.encode()).digest()
                v[len(CONCEPTS) + digest[0] % OTHER_DIMS] += 1
        return [float(x) for x in v / (np.linalg.norm(v) or 1)]


class FailingEmbedder(FakeEmbedder):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EngineError("This model cannot make embeddings.")


def meaning_document(pages: int = 40) -> Document:
    """Pages of filler; two pages share a word with QUESTION (not its meaning), and page
    MEANING_PAGE says what QUESTION asks in other words."""
    rng = random.Random(3)
    sections = []
    for page in range(1, pages + 1):
        extra = {
            5: "The harbour pilot retired last winter.",
            30: "Grain prices rose at the autumn fair.",
            MEANING_PAGE: MEANING,
        }.get(page, "")
        text = f"{builders.filler(rng, 5)} {extra} {builders.filler(rng, 5)}"
        sections.append(Section(text, page=page))
    text = "".join(s.text for s in sections)
    sha = hashlib.sha256(text.encode()).hexdigest()
    return Document("almanac.pdf", len(text), sha, "pdf", tuple(sections), pages=pages)


def test_rrf_sums_reciprocal_ranks_with_the_documented_constant() -> None:
    a, b, c = ("x", 0), ("x", 1), ("x", 2)
    fused = dict(fuse([[a, b], [c, a]]))
    assert fused[a] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert fused[b] == pytest.approx(1 / (RRF_K + 2))
    assert fused[c] == pytest.approx(1 / (RRF_K + 1))
    assert [key for key, _ in fuse([[a, b], [c, a]])] == [a, c, b]  # a tie keeps BM25's order
    assert RRF_K == 60


def test_a_chunk_found_only_by_meaning_ranks_in_the_top_three() -> None:
    doc = meaning_document()
    words_only = build_context([doc], QUESTION, 2000, estimate_tokens, "words")
    assert words_only.retrieved == ("almanac.pdf",)
    assert words_only.sources and MEANING_PAGE not in [s.page for s in words_only.sources]

    embedder = FakeEmbedder()
    hybrid = build_context([doc], QUESTION, 2000, estimate_tokens, "hybrid", embedder=embedder)
    assert MEANING_PAGE in [s.page for s in hybrid.sources[:3]]
    assert MEANING in hybrid.text
    # the pages BM25 found are still there: fused, not replaced
    assert {5, 30} <= {s.page for s in hybrid.sources}


def test_the_long_pdf_fact_stays_in_the_top_three_with_vectors(tmp_path: Path) -> None:
    doc = extract(builders.long_pdf(tmp_path / "long.pdf"))
    context = build_context(
        [doc], builders.QUESTION, 2000, estimate_tokens, "c1", embedder=FakeEmbedder()
    )
    assert builders.FACT_PAGE in [s.page for s in context.sources[:3]]


def test_each_chunk_is_embedded_once_and_stored_with_its_model() -> None:
    doc = meaning_document(pages=6)
    embedder = FakeEmbedder()
    build_context([doc], QUESTION, 300, estimate_tokens, "once", embedder=embedder)
    with ChunkIndex("once") as index:
        chunks = index.add(doc)
        assert index.vectors.count(doc.sha256) == chunks
        assert index.vectors.model() == ("fake-a", embedder.dims)
    assert len(embedder.texts) == chunks + 1  # every chunk, then the question
    db = sqlite3.connect(index_path("once"))
    blob = db.execute("SELECT vector FROM vectors LIMIT 1").fetchone()[0]
    assert len(blob) == 4 * embedder.dims  # float32, sqlite-vec's layout

    embedder.texts.clear()
    build_context([doc], "Which dock?", 300, estimate_tokens, "once", embedder=embedder)
    assert embedder.texts == ["Which dock?"]  # stored vectors are reused


def test_a_different_embedding_model_re_embeds_instead_of_mixing() -> None:
    doc = meaning_document(pages=6)
    build_context([doc], QUESTION, 300, estimate_tokens, "swap", embedder=FakeEmbedder())
    other = FakeEmbedder("fake-b")
    build_context([doc], QUESTION, 300, estimate_tokens, "swap", embedder=other)
    with ChunkIndex("swap") as index:
        chunks = index.add(doc)
        assert index.vectors.model() == ("fake-b", other.dims)
        assert index.vectors.count(doc.sha256) == chunks
    assert len(other.texts) == chunks + 1


def test_embedding_goes_in_batches_within_the_input_limit_and_a_cancel_keeps_them() -> None:
    doc = meaning_document(pages=40)
    cancel = threading.Event()
    embedder = FakeEmbedder(max_tokens=100)
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if embedder.calls == 1:  # seen before the next batch, after the one in flight
            cancel.set()

    with pytest.raises(AttachmentCancelledError):
        build_context(
            [doc], QUESTION, 2000, estimate_tokens, "cut", embedder=embedder,
            progress=progress, cancel=cancel,
        )  # fmt: skip
    assert all(len(t) <= 100 for t in embedder.texts)
    assert len(embedder.texts) == 2 * vectors.EMBED_BATCH
    assert seen[-1][1] == 2 * doc.chars  # indexed, then embedded
    with ChunkIndex("cut") as index:
        assert index.vectors.count(doc.sha256) == 2 * vectors.EMBED_BATCH
        chunks = index.add(doc)
    again = FakeEmbedder(max_tokens=100)
    build_context([doc], QUESTION, 2000, estimate_tokens, "cut", embedder=again)
    assert len(again.texts) == chunks - 2 * vectors.EMBED_BATCH + 1


def test_a_failing_embedder_leaves_bm25_as_it_was() -> None:
    doc = meaning_document()
    plain = build_context([doc], QUESTION, 2000, estimate_tokens, "p")
    failed = build_context([doc], QUESTION, 2000, estimate_tokens, "f", embedder=FailingEmbedder())
    assert failed.sources == plain.sources


def test_a_document_with_too_many_chunks_stays_bm25_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors, "MAX_VECTOR_CHUNKS", 10)
    monkeypatch.setattr("app.attachments.index.MAX_VECTOR_CHUNKS", 10)
    doc = meaning_document()
    embedder = FakeEmbedder()
    plain = build_context([doc], QUESTION, 2000, estimate_tokens, "p")
    big = build_context([doc], QUESTION, 2000, estimate_tokens, "big", embedder=embedder)
    assert big.sources == plain.sources
    assert embedder.calls == 0


def test_the_embedding_choice_names_the_embedder(tmp_path: Path) -> None:
    from app.config import Settings

    settings = Settings(tmp_path / "settings.json")
    assert embedding_choice(settings) == AUTO  # the default: an embedding GGUF, if any
    settings.set("attachments.embedding_model", OFF)
    assert embedding_choice(settings) == OFF
    embedders = Embedders()
    assert embedders.get(OFF, None, None) is None
    assert embedders.get(AUTO, None, None) is None  # no library to find one in: BM25 alone
    assert embedders.get(LOADED, None, None) is None  # no local model loaded: BM25 alone
    gguf = embedders.get("/models/embed.gguf", None, None)
    assert isinstance(gguf, GgufEmbedder) and not gguf.loaded  # nothing loads until used
    assert gguf.model_id == "embed.gguf@/models/embed.gguf"
    embedders.close()


def test_the_chat_chooses_a_questions_passages_with_the_embedder_it_is_given() -> None:
    from app.chats.models import Message
    from app.ui.chat.attached_prompt import prepare_prompt
    from app.ui.chat.attaching import remember_document

    doc = meaning_document()
    remember_document(doc)  # as the chat keeps a file it read when it was attached
    entry = {"name": doc.name, "size": doc.size, "sha256": doc.sha256, "suffix": ".pdf"}
    entry |= {"kind": "pdf", "pages": doc.pages}
    question = Message(
        "q", "chat", None, "user", QUESTION, "complete", 0.0, {"attachments": [entry]}
    )

    def pages(prompt_sources: list[dict[str, object]]) -> list[object]:
        return [s["page"] for s in prompt_sources[:3]]

    assert MEANING_PAGE not in pages(prepare_prompt([question], 2500, "chat").sources)
    hybrid = prepare_prompt([question], 2500, "chat", embedder=FakeEmbedder())
    assert MEANING_PAGE in pages(hybrid.sources)
    assert MEANING in hybrid.contents["q"]
