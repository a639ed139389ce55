from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.types import LoadedModel, LoadParams
from app.engine.worker import EngineWorker


@pytest.fixture(scope="module")
def loaded(worker: EngineWorker, gemma_path: Path) -> LoadedModel:
    """The test model loaded once per module with a 4096-token context, without flash
    attention: these tests compare answers across batches and cache states token for token,
    and the CPU flash-attention kernel (F16 sums in the order of the cache's cells) makes them
    drift apart sooner than the plain kernel does (bench/flash_attn.py says why it is the
    default all the same). The app, API and CLI tests load with the defaults."""
    params = LoadParams(n_ctx=4096, flash_attn=False)
    result: LoadedModel = worker.load(str(gemma_path), params).result(120)
    return result
