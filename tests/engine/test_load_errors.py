"""Every load error is clear, typed, and leaves the worker serving the next job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import llamacpp
from app.engine.types import (
    CompletionRequest,
    Failed,
    Finished,
    LoadParams,
    ModelNotFoundError,
    ModelTooLargeError,
    NotGGUFError,
    OutOfMemoryError,
    SamplingParams,
    TruncatedModelError,
)
from app.engine.worker import EngineWorker


@pytest.fixture
def fresh_worker() -> Iterator[EngineWorker]:
    w = EngineWorker()
    yield w
    w.shutdown()


def _load_error(worker: EngineWorker, path: Path, params: LoadParams | None = None) -> Exception:
    final = worker.load(str(path), params).wait(120)
    assert isinstance(final, Failed), final
    return final.error


def _still_serves(worker: EngineWorker, gemma_path: Path) -> None:
    worker.load(str(gemma_path), LoadParams(n_ctx=1024)).result(120)
    final = worker.submit(CompletionRequest("Hi", SamplingParams(max_tokens=2))).wait(60)
    assert isinstance(final, Finished)


def test_missing_file(fresh_worker: EngineWorker, tmp_path: Path, gemma_path: Path) -> None:
    err = _load_error(fresh_worker, tmp_path / "nope.gguf")
    assert isinstance(err, ModelNotFoundError)
    assert "No model file at" in str(err)
    _still_serves(fresh_worker, gemma_path)


def test_not_a_gguf(fresh_worker: EngineWorker, tmp_path: Path, gemma_path: Path) -> None:
    bogus = tmp_path / "notes.gguf"
    bogus.write_text("just some text, definitely not weights\n" * 100)
    err = _load_error(fresh_worker, bogus)
    assert isinstance(err, NotGGUFError)
    assert "not a GGUF" in str(err)
    _still_serves(fresh_worker, gemma_path)


def test_truncated_gguf(fresh_worker: EngineWorker, tmp_path: Path, gemma_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with gemma_path.open("rb") as src:
        cut.write_bytes(src.read(20_000_000))
    err = _load_error(fresh_worker, cut)
    assert isinstance(err, TruncatedModelError)
    assert "incomplete" in str(err)
    _still_serves(fresh_worker, gemma_path)


def test_context_that_does_not_fit_says_what_would(
    fresh_worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 700 MB free: the weights and a modest context fit, a 32k context does not.
    monkeypatch.setattr(llamacpp, "available_memory", lambda: 700_000_000)
    err = _load_error(fresh_worker, gemma_path, LoadParams(n_ctx=32768))
    assert isinstance(err, OutOfMemoryError)
    assert err.fits_n_ctx is not None and 512 <= err.fits_n_ctx < 32768
    assert f"try a context of {err.fits_n_ctx} tokens" in str(err)
    # the automatic context shrinks to what fits instead of failing
    info = fresh_worker.load(str(gemma_path)).result(120)
    assert info.n_ctx <= err.fits_n_ctx


def test_weights_alone_do_not_fit(
    fresh_worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llamacpp, "available_memory", lambda: 100_000_000)
    err = _load_error(fresh_worker, gemma_path)
    assert isinstance(err, OutOfMemoryError)
    assert "smaller quantization" in str(err)
    assert isinstance(err, ModelTooLargeError) and err.code == "model_too_large"
    assert err.available_bytes == 100_000_000 and err.needed_bytes > err.available_bytes
    # the one override, named as each way to load calls it
    for override in ("Load anyway", "--force", '"force": true'):
        assert override in str(err)


def test_force_loads_what_the_estimate_refuses(
    fresh_worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Load anyway: the estimate is a guess; the person (or --force) may overrule it."""
    monkeypatch.setattr(llamacpp, "available_memory", lambda: 100_000_000)
    loaded = fresh_worker.load(str(gemma_path), LoadParams(n_ctx=1024, force=True)).result(120)
    assert loaded.n_ctx == 1024
    final = fresh_worker.submit(CompletionRequest("Hi", SamplingParams(max_tokens=2))).wait(60)
    assert isinstance(final, Finished)
