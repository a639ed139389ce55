"""Hybrid retrieval with the real small model's embeddings (Gemma 3 270M): jobs on the real
engine worker, vectors of the model's size in the real index, and a second GGUF loaded for
embeddings only re-embedding (another model id, another vector space). What this cannot
prove: that a 270M base model's embeddings find meaning well; the fake embedder's tests
(test_vectors.py) prove the fusion."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.attachments.context import build_context
from app.attachments.embedder import LOADED, Embedders, EngineEmbedder, GgufEmbedder
from app.attachments.errors import AttachmentCancelledError
from app.attachments.extract import extract
from app.attachments.index import ChunkIndex
from app.config import ember_home
from app.engine.fitting import estimate_tokens
from app.engine.types import LoadedModel, LoadParams
from app.engine.worker import EngineWorker
from tests.helpers import builders

GEMMA_270M_DIMS = 640  # gemma3.embedding_length


@pytest.fixture(scope="module")
def engine(gemma_path: Path) -> Iterator[tuple[EngineWorker, LoadedModel]]:
    worker = EngineWorker()
    try:
        loaded = worker.load(str(gemma_path), LoadParams(n_ctx=2048, n_parallel=1)).result(300)
        yield worker, loaded
    finally:
        worker.shutdown()


@pytest.mark.slow
def test_the_loaded_model_embeds_the_chunks_and_retrieval_finds_the_page(
    engine: tuple[EngineWorker, LoadedModel], tmp_path: Path
) -> None:
    worker, loaded = engine
    doc = extract(builders.long_pdf(tmp_path / "long.pdf", pages=8, fact_page=6))
    embedder = EngineEmbedder(worker, loaded)
    context = build_context(
        [doc], builders.QUESTION, 600, estimate_tokens, "real", embedder=embedder
    )
    assert context.retrieved == ("long.pdf",)
    assert 6 in [s.page for s in context.sources[:3]]
    assert embedder.dims == GEMMA_270M_DIMS
    with ChunkIndex("real") as index:
        chunks = index.add(doc)
        assert index.vectors.count(doc.sha256) == chunks
        assert index.vectors.model() == (embedder.model_id, GEMMA_270M_DIMS)
        # the fused ranking holds chunks the vectors brought (BM25 alone finds fewer here)
        fused = index.search(builders.QUESTION, [doc.sha256], 24, embedder=embedder)
        words = index.search(builders.QUESTION, [doc.sha256], 24)
        assert len(fused) == chunks > len(words)


@pytest.mark.slow
def test_a_cancel_while_waiting_on_the_engine_stops_the_embedding(
    engine: tuple[EngineWorker, LoadedModel], tmp_path: Path
) -> None:
    worker, loaded = engine
    doc = extract(builders.long_pdf(tmp_path / "long.pdf", pages=8, fact_page=6))
    cancel = threading.Event()
    embedder = EngineEmbedder(worker, loaded, cancel)

    def progress(done: int, total: int) -> None:
        if done >= doc.chars:  # indexed; the first batch goes to the engine next
            cancel.set()

    with pytest.raises(AttachmentCancelledError):
        build_context(
            [doc], builders.QUESTION, 600, estimate_tokens, "stop", embedder=embedder,
            progress=progress, cancel=cancel,
        )  # fmt: skip
    with ChunkIndex("stop") as index:
        assert index.vectors.count(doc.sha256) == 0  # the engine job was cancelled, not stored


@pytest.mark.slow
def test_an_embedding_gguf_of_its_own_re_embeds_and_closes(
    engine: tuple[EngineWorker, LoadedModel], gemma_path: Path, tmp_path: Path
) -> None:
    worker, loaded = engine
    doc = extract(builders.long_pdf(tmp_path / "long.pdf", pages=4, fact_page=3))
    build_context(
        [doc], builders.QUESTION, 300, estimate_tokens, "two",
        embedder=EngineEmbedder(worker, loaded),
    )  # fmt: skip
    other_file = tmp_path / "embedder.gguf"  # another file, another model id (the same weights)
    other_file.symlink_to(gemma_path)
    embedders = Embedders()  # as the app holds them: the choice read per question
    try:
        second = embedders.get(str(other_file), worker, loaded)
        assert isinstance(second, GgufEmbedder) and not second.loaded  # loaded when first used
        build_context([doc], builders.QUESTION, 300, estimate_tokens, "two", embedder=second)
        assert second.loaded
        with ChunkIndex("two") as index:
            assert index.vectors.model() == (second.model_id, GEMMA_270M_DIMS)
            assert index.vectors.count(doc.sha256) == index.add(doc)
        assert isinstance(embedders.get(LOADED, worker, loaded), EngineEmbedder)
        assert not second.loaded  # another choice frees the second model
    finally:
        embedders.close()


@pytest.mark.slow
@pytest.mark.parametrize("flag", [["--vectors"], []])
def test_ember_run_attach_uses_the_loaded_models_embeddings_with_vectors(
    engine: tuple[EngineWorker, LoadedModel],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: list[str],
) -> None:
    from app.cli import build_parser
    from app.commands import run
    from app.commands.options import sampling_params

    worker, loaded = engine
    monkeypatch.setattr("app.attachments.index.drop_index", lambda _c: True)  # keep it to look
    pdf = builders.long_pdf(tmp_path / "long.pdf", pages=12, fact_page=4)
    args = build_parser("run").parse_args(
        ["run", loaded.path, "--attach", str(pdf), *flag, builders.QUESTION, "-n", "8"]
    )
    doc = extract(pdf)
    prompt = run._with_attachments(worker, loaded, [doc], args, sampling_params(args))
    assert builders.FACT in prompt
    (index_file,) = (ember_home() / "attachments" / "index").glob("run-*.sqlite")
    with ChunkIndex(index_file.stem) as index:
        assert index.has(doc.sha256)  # retrieved, not given whole
        stored, chunks = index.vectors.count(doc.sha256), index.add(doc)
        model = index.vectors.model()
    if not flag:  # words alone, as before: embedding a long file costs a prompt read of it
        assert (stored, model) == (0, None)
    else:
        assert stored == chunks
        assert model == (EngineEmbedder(worker, loaded).model_id, GEMMA_270M_DIMS)
