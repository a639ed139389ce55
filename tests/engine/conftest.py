from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.types import LoadedModel, LoadParams
from app.engine.worker import EngineWorker


@pytest.fixture(scope="module")
def worker() -> Iterator[EngineWorker]:
    w = EngineWorker()
    yield w
    w.shutdown()


@pytest.fixture(scope="module")
def loaded(worker: EngineWorker, gemma_path: Path) -> LoadedModel:
    """The test model loaded once per module with a 4096-token context."""
    result: LoadedModel = worker.load(str(gemma_path), LoadParams(n_ctx=4096)).result(120)
    return result
