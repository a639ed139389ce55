"""--no-mmap and --mlock reach llama.cpp: llama-cpp-python 0.3.36's model params have no
use_mmap/use_mlock fields any more (setting them only made Python attributes llama.cpp never
saw), but a ``load_mode``. Proves the mapping, that it lands in the real C struct, and, with the
real test model, that llama.cpp maps the weights by default and reads them into its own buffer
with use_mmap=False (its log names the buffer: ``CPU_Mapped`` only when mapped)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.engine.load_settings import (
    LOAD_MODE_AUTO,
    LOAD_MODE_MLOCK,
    LOAD_MODE_MMAP_MLOCK,
    LOAD_MODE_NONE,
    load_mode,
    set_load_mode,
)
from app.engine.types import LoadParams, LoadRequest, UnloadRequest
from app.engine.worker import EngineWorker


@pytest.mark.parametrize(
    ("use_mmap", "use_mlock", "mode"),
    [
        (True, False, LOAD_MODE_AUTO),  # the default: llama.cpp maps where it can
        (False, False, LOAD_MODE_NONE),
        (False, True, LOAD_MODE_MLOCK),
        (True, True, LOAD_MODE_MMAP_MLOCK),
    ],
)
def test_mmap_and_mlock_become_llama_cpps_load_mode(
    use_mmap: bool, use_mlock: bool, mode: int
) -> None:
    import llama_cpp

    params = LoadParams(use_mmap=use_mmap, use_mlock=use_mlock)
    assert load_mode(params) == mode
    native = llama_cpp.llama_model_default_params()
    set_load_mode(native, params)
    assert native.load_mode == mode
    assert mode in (
        llama_cpp.LLAMA_LOAD_MODE_AUTO,
        llama_cpp.LLAMA_LOAD_MODE_NONE,
        llama_cpp.LLAMA_LOAD_MODE_MLOCK,
        llama_cpp.LLAMA_LOAD_MODE_MMAP_MLOCK,
    )


@pytest.mark.parametrize(("use_mmap", "mapped"), [(True, True), (False, False)])
def test_the_weights_are_mapped_only_when_asked(
    gemma_path: Path, caplog: pytest.LogCaptureFixture, use_mmap: bool, mapped: bool
) -> None:
    worker = EngineWorker()
    try:
        with caplog.at_level(logging.DEBUG, logger="llama.cpp"):
            worker.run(LoadRequest(str(gemma_path), LoadParams(n_ctx=512, use_mmap=use_mmap)))
            worker.run(UnloadRequest())
    finally:
        worker.shutdown()
    buffers = [r.getMessage() for r in caplog.records if "model buffer size" in r.getMessage()]
    assert buffers, "llama.cpp logged no model buffer"
    assert any("CPU_Mapped" in b for b in buffers) is mapped, buffers
