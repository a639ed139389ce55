"""A GPU for tests on a machine without one: llama.cpp is told it has an 8 GiB Vulkan0, and
optionally that GPU fails while the model loads (the load with GPU layers raises, the CPU
load that follows is the real one)."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine import llamacpp
from app.engine.llamacpp import LlamaCppModel
from app.engine.sizing import GpuMemory
from app.engine.types import EngineError

GIB = 1024**3
GPU = (GpuMemory("Vulkan0", 8 * GIB, 8 * GIB),)
GPU_FAILURE = "llama.cpp could not allocate the model's buffers on Vulkan0."


def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp lists one Vulkan GPU with 8 GiB free."""
    monkeypatch.setattr(llamacpp, "gpu_memory", lambda: GPU)


def failing_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake GPU, which fails every load that puts layers on it."""
    fake_gpu(monkeypatch)
    original = LlamaCppModel._load_weights

    def failing_on_gpu(self: LlamaCppModel, *args: Any) -> Any:
        if self.n_gpu_layers > 0:
            raise EngineError(GPU_FAILURE)
        return original(self, *args)

    monkeypatch.setattr(LlamaCppModel, "_load_weights", failing_on_gpu)
