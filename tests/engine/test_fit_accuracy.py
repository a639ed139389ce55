"""The memory estimate against what llama.cpp really allocates: real loads of the test model
over several contexts and KV cache types, compared with the buffer sizes llama.cpp reports
(app/engine/memory_breakdown.py). The estimate must be within 10% of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine import sizing
from app.engine.gguf import read_gguf
from app.engine.memory_breakdown import MIB, parse_line
from app.engine.types import KVCacheType, LoadParams, UnloadRequest
from app.engine.worker import EngineWorker

TOLERANCE = 0.10
LOADS: list[tuple[int, KVCacheType, int]] = [
    (1024, "f16", 4),
    (4096, "f16", 4),
    (8192, "q8_0", 4),
    (16384, "q4_0", 1),
    (4096, "f16", 8),
]


@pytest.fixture(scope="module")
def worker() -> Iterator[EngineWorker]:
    w = EngineWorker()
    yield w
    w.shutdown()


@pytest.mark.parametrize(("n_ctx", "kv", "parallel"), LOADS)
def test_the_estimate_is_within_ten_percent_of_what_llama_cpp_allocates(
    worker: EngineWorker, gemma_path: Path, n_ctx: int, kv: KVCacheType, parallel: int
) -> None:
    params = LoadParams(n_ctx=n_ctx, cache_type_k=kv, cache_type_v=kv, n_parallel=parallel)
    loaded = worker.load(str(gemma_path), params, model_id=f"fit-{n_ctx}-{kv}").result(180)
    try:
        allocated = loaded.allocated_ram + loaded.allocated_gpu
        assert allocated > 200 * MIB  # the weights at least: the log was read
        estimate = sizing.estimate(read_gguf(gemma_path), n_ctx, params).total_bytes
        error = estimate / allocated - 1
        assert abs(error) <= TOLERANCE, (
            f"estimate {estimate / MIB:.1f} MiB vs {allocated / MIB:.1f} MiB allocated at "
            f"{n_ctx} tokens, {kv} cache: {error:+.1%}"
        )
    finally:
        worker.submit(UnloadRequest(loaded.model_id)).wait(60)


def test_buffer_lines_are_read_exactly() -> None:
    assert parse_line("load_tensors:   CPU_Mapped model buffer size =   235.16 MiB") == (
        "CPU_Mapped",
        "model",
        round(235.16 * MIB),
    )
    assert parse_line("llama_context:        CPU  output buffer size =    12.00 MiB") == (
        "CPU",
        "output",
        12 * MIB,
    )
    gpu = parse_line("sched_reserve:    Vulkan0 compute buffer size =    34.56 MiB")
    assert gpu is not None and gpu[:2] == ("Vulkan0", "compute")
    # the destructor's line, other messages and overlong ones are not sizes
    assert parse_line("~llama_context: CPU compute buffer size is 19.9241 MiB, matches") is None
    assert parse_line("llama_kv_cache: size = 18.00 MiB (1024 cells)") is None
    assert parse_line("x: CPU model buffer size = 1.0 MiB" + " " * 400) is None
