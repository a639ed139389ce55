"""What loads really took: kept per file and settings, bounded, private, used by the badge."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine import fit, sizing
from app.engine.fit_records import MAX_RECORDS, FitRecords, Measured
from app.engine.gguf import GGUFInfo
from app.engine.types import LoadedModel, LoadParams

MB = 10**6


def _loaded(path: str, ram: int, params: LoadParams | None = None) -> LoadedModel:
    return LoadedModel(
        "m", path, 4096, 32768, 2, params or LoadParams(), None, False, 0.0, allocated_ram=ram
    )


def test_a_record_is_found_by_file_and_settings_only(tmp_path: Path) -> None:
    records = FitRecords(tmp_path / "fit.json")
    records.add(_loaded("/models/A/m.gguf", 300 * MB), 250 * MB, 310 * MB)
    got = records.get("m.gguf", 250 * MB, LoadParams(), 4096, 0)
    assert got is not None and (got.ram, got.gpu, got.estimated) == (300 * MB, 0, 310 * MB)
    assert records.get("M.GGUF", 250 * MB, LoadParams(), 4096, 0) == got  # any folder, case
    assert records.get("m.gguf", 251 * MB, LoadParams(), 4096, 0) is None  # another file
    assert records.get("m.gguf", 250 * MB, LoadParams(), 8192, 0) is None  # another context
    q8 = LoadParams(cache_type_k="q8_0", cache_type_v="q8_0")
    assert records.get("m.gguf", 250 * MB, q8, 4096, 0) is None
    assert records.get("m.gguf", 250 * MB, LoadParams(), 4096, 10) is None  # GPU layers
    if os.name == "posix":
        assert stat.S_IMODE(records.path.stat().st_mode) == 0o600


def test_records_are_bounded_and_a_damaged_file_starts_over(tmp_path: Path) -> None:
    records = FitRecords(tmp_path / "fit.json")
    for i in range(MAX_RECORDS + 20):
        records.add(_loaded(f"/m{i}.gguf", MB), MB, MB)
    assert len(json.loads(records.path.read_text())) == MAX_RECORDS
    assert records.get("m0.gguf", MB, LoadParams(), 4096, 0) is None  # the oldest went
    assert records.get(f"m{MAX_RECORDS + 19}.gguf", MB, LoadParams(), 4096, 0) is not None
    records.path.write_text("[" * 100_000)  # not ours to trust
    assert records.get("m300.gguf", MB, LoadParams(), 4096, 0) is None
    records.add(_loaded("/again.gguf", MB), MB, MB)
    assert records.get("again.gguf", MB, LoadParams(), 4096, 0) is not None
    records.add(_loaded("/nothing.gguf", 0), MB, MB)  # llama.cpp said nothing: no record
    assert records.get("nothing.gguf", MB, LoadParams(), 4096, 0) is None


@pytest.mark.parametrize(
    ("took", "level", "start"),
    [(100 * MB, "fits", "Fits (measured)"), (900 * MB, "tight", "Tight (measured)"),
     (2000 * MB, "wont_fit", "Won't fit (measured)")],
)  # fmt: skip
def test_a_measurement_decides_the_level(
    gemma_info: GGUFInfo, took: int, level: str, start: str
) -> None:
    estimated = fit.fit_check(gemma_info, 4096, available_ram=1000 * MB)
    judged = fit.with_measurement(estimated, Measured(took, 0, 320 * MB, 0.0))
    assert judged.level == level and judged.measured and judged.needed_bytes == took
    assert judged.message.startswith(start) and "(estimated 320 MB)" in judged.message


def test_a_real_load_keeps_what_it_took(gemma_path: Path, gemma_info: GGUFInfo) -> None:
    from app.engine.types import UnloadRequest
    from app.engine.worker import EngineWorker

    worker = EngineWorker()
    try:
        params = LoadParams(n_ctx=1024, n_parallel=1)
        loaded = worker.load(str(gemma_path), params).result(180)
        got = FitRecords().get(gemma_path.name, gemma_path.stat().st_size, params, 1024, 0)
        assert got is not None
        assert got.total == loaded.allocated_ram + loaded.allocated_gpu > 200 * 1024 * 1024
        estimate = sizing.estimate(gemma_info, 1024, replace(params, n_gpu_layers=0))
        assert got.estimated == estimate.total_bytes
        worker.submit(UnloadRequest(loaded.model_id)).wait(60)
    finally:
        worker.shutdown()
