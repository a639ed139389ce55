"""The API and offloading: Ollama's ``size_vram`` counts the layers llama.cpp was given (the
automatic count resolved, not the setting's -2), and a load where the CPU took over from a
failed GPU is logged with its one sentence."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.engine.gguf import GGUFInfo, read_gguf
from app.engine.residency import Resident
from app.engine.sizing import AUTO_GPU_LAYERS
from app.engine.types import LoadedModel, LoadParams
from app.engine.worker import EngineWorker
from app.server.catalog import CatalogModel
from app.server.gateway import Gateway
from app.server.ollama.shapes import ps_entry, size_vram
from tests.helpers.gpu import failing_gpu

SIZE = 253_000_000


def _loaded(n_gpu_layers: int, asked: int = AUTO_GPU_LAYERS) -> LoadedModel:
    return LoadedModel(
        model_id="gemma",
        path="/m/gemma.gguf",
        n_ctx=2048,
        n_ctx_train=32768,
        n_threads=2,
        params=LoadParams(n_gpu_layers=asked),
        chat_template=None,
        has_fim=False,
        load_seconds=0.1,
        n_gpu_layers=n_gpu_layers,
    )


def _resident(loaded: LoadedModel) -> Resident:
    # memory 0: llama.cpp did not say and there is no file to estimate from: the file's size
    return Resident(loaded, 0, busy=False, ttl=None, expires_at=None, jit=False)


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> GGUFInfo:
    return read_gguf(gemma_path)


def test_size_vram_counts_the_layers_llama_cpp_was_given(gemma: GGUFInfo) -> None:
    entry = CatalogModel("gemma", "/m/gemma.gguf", size_bytes=SIZE)
    # automatic, resolved to none (no GPU, or nothing fit): nothing in VRAM, though -2 != 0
    assert ps_entry("gemma", entry, _resident(_loaded(0)), gemma)["size_vram"] == 0
    all_layers = ps_entry("gemma", entry, _resident(_loaded(19)), gemma)
    assert all_layers["size_vram"] == all_layers["size"] == SIZE  # all + output
    assert size_vram(SIZE, _loaded(19, asked=-1), gemma) == SIZE
    assert size_vram(SIZE, _loaded(0, asked=-1), gemma) == 0  # "all" asked, the CPU took over
    assert size_vram(SIZE, _loaded(9), gemma) == SIZE * 9 // 19
    assert size_vram(SIZE, _loaded(5), None) == SIZE  # no header: the model is on the GPU


def test_the_api_logs_that_the_cpu_took_over(
    idle_worker: EngineWorker,
    gemma_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing_gpu(monkeypatch)
    gateway = Gateway(idle_worker, load_params=LoadParams(n_ctx=512, n_parallel=1))
    with caplog.at_level(logging.WARNING, logger="app.server.gateway"):
        loaded = gateway.load(str(gemma_path), "gemma").wait(120)
    assert loaded.n_gpu_layers == 0 and loaded.notice
    gateway_lines = [r.getMessage() for r in caplog.records if r.name == "app.server.gateway"]
    assert gateway_lines == [f"gemma: {loaded.notice}"]
