"""Automatic offload wired into loading (app/engine/llamacpp.py): the back-ends are loaded before
llama.cpp starts, the automatic layer count is resolved with the GPUs llama.cpp lists, a GPU
that fails mid-load falls back to the CPU with one sentence, and the back-end choice
(``LoadParams.device``) narrows where layers go.

The real test model loads on the real CPU path; the GPUs and the GPU's failure are the only
fakes (this machine has none): ``llamacpp.gpu_memory`` lists one, and the weights or the
context fail to load whenever llama.cpp is given GPU layers, as a broken driver would.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.engine import backends, llamacpp, sizing
from app.engine.llamacpp import LlamaCppModel, gpu_fallback_notice
from app.engine.sizing import AUTO_GPU_LAYERS, GpuMemory
from app.engine.types import (
    ChatRequest,
    EngineError,
    Failed,
    Finished,
    LoadedModel,
    LoadParams,
    SamplingParams,
)
from app.engine.worker import EngineWorker

BIG_GPU = (GpuMemory("Vulkan0", 64 * 1024**3, 64 * 1024**3),)
GEMMA_EVERY = 19  # 18 layers and the output layer
PARAMS = LoadParams(n_ctx=512, n_parallel=1)


@pytest.fixture
def worker() -> Iterator[EngineWorker]:
    w = EngineWorker()
    yield w
    w.shutdown()


def _gpus(monkeypatch: pytest.MonkeyPatch, gpus: tuple[GpuMemory, ...]) -> None:
    monkeypatch.setattr(llamacpp, "gpu_memory", lambda: gpus)


def _failing_on_gpu(monkeypatch: pytest.MonkeyPatch, method: str) -> list[int]:
    """``LlamaCppModel.<method>`` raises as llama.cpp does when the GPU fails, whenever the
    load has GPU layers; returns the layer counts it was called with."""
    original: Callable[..., Any] = getattr(LlamaCppModel, method)
    calls: list[int] = []

    def failing(self: LlamaCppModel, *args: Any) -> Any:
        calls.append(self.n_gpu_layers)
        if self.n_gpu_layers > 0:
            raise EngineError("llama.cpp could not allocate the model's buffers on Vulkan0.")
        return original(self, *args)

    monkeypatch.setattr(LlamaCppModel, method, failing)
    return calls


def _answer(worker: EngineWorker) -> str:
    request = ChatRequest(
        [{"role": "user", "content": "Say hi"}], SamplingParams(temperature=0, max_tokens=4)
    )
    final = worker.submit(request).wait(120)
    assert isinstance(final, Finished), final
    return str(final.result)


def test_automatic_is_the_default_everywhere() -> None:
    from app.config import SETTINGS

    assert LoadParams().n_gpu_layers == AUTO_GPU_LAYERS == -2
    assert SETTINGS["load.n_gpu_layers"].default == AUTO_GPU_LAYERS
    assert LoadParams().device == SETTINGS["load.device"].default == "auto"


def test_back_ends_are_loaded_before_llama_cpp_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    monkeypatch.setattr(llamacpp, "_backend_started", [])
    monkeypatch.setattr(backends, "load", lambda *a: order.append("load"))

    class Native:
        def llama_backend_init(self) -> None:
            order.append("init")

    llamacpp._init_backend(Native())
    llamacpp._init_backend(Native())  # once per process
    assert order == ["load", "init"]


def test_a_failure_to_load_the_back_ends_is_logged_not_fatal(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(llamacpp, "_backend_started", [])

    def broken(*_args: Any) -> None:
        raise backends.BackendError("libggml.so has no ggml_backend_load_all_from_path")

    monkeypatch.setattr(backends, "load", broken)
    started: list[bool] = []

    class Native:
        def llama_backend_init(self) -> None:
            started.append(True)

    with caplog.at_level(logging.WARNING, logger="app.engine.llamacpp"):
        llamacpp._init_backend(Native())
    assert started == [True]
    assert "back-ends could not be loaded: libggml.so has no" in caplog.text


def test_without_a_gpu_automatic_loads_on_the_cpu(
    worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpus(monkeypatch, ())
    loaded = worker.load(str(gemma_path), PARAMS).result(120)
    assert isinstance(loaded, LoadedModel)
    assert loaded.params.n_gpu_layers == AUTO_GPU_LAYERS  # what was asked ...
    assert (loaded.n_gpu_layers, loaded.gpu_devices, loaded.placement) == (0, (), "cpu")  # ... done
    assert loaded.notice is None
    assert _answer(worker)


def test_automatic_resolves_to_the_layers_that_fit_on_the_gpus_listed(
    worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a GPU listed (faked: this machine has none, so llama.cpp computes on the CPU what
    it was told to offload), the count given to llama.cpp is plan_offload's, not -2."""
    _gpus(monkeypatch, BIG_GPU)
    given: list[int] = []
    original = LlamaCppModel._load_weights

    def spy(self: LlamaCppModel, *args: Any) -> Any:
        given.append(self.n_gpu_layers)
        return original(self, *args)

    monkeypatch.setattr(LlamaCppModel, "_load_weights", spy)
    loaded = worker.load(str(gemma_path), PARAMS).result(120)
    assert given == [GEMMA_EVERY]
    assert (loaded.n_gpu_layers, loaded.gpu_devices, loaded.placement) == (
        GEMMA_EVERY,
        ("Vulkan0",),
        "gpu",
    )
    assert loaded.notice is None


def test_a_gpu_that_fails_loading_the_weights_falls_back_to_the_cpu(
    worker: EngineWorker,
    gemma_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _gpus(monkeypatch, BIG_GPU)
    calls = _failing_on_gpu(monkeypatch, "_load_weights")
    with caplog.at_level(logging.INFO, logger="app.engine.llamacpp"):
        loaded = worker.load(str(gemma_path), PARAMS).result(120)
    assert calls == [GEMMA_EVERY, 0]  # tried on the GPU, then again with 0 GPU layers
    assert loaded.notice == (
        f"Loading {gemma_path.name} on the GPU (Vulkan0) failed, so it runs on the CPU instead."
    )
    assert (loaded.n_gpu_layers, loaded.gpu_devices, loaded.placement) == (0, (), "cpu")
    assert "could not allocate the model's buffers on Vulkan0" in caplog.text  # the cause
    assert _answer(worker)  # the CPU copy answers


def test_a_gpu_that_fails_making_the_context_falls_back_to_the_cpu(
    worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpus(monkeypatch, BIG_GPU)
    calls = _failing_on_gpu(monkeypatch, "_new_context")
    loaded = worker.load(str(gemma_path), PARAMS).result(120)
    assert calls == [GEMMA_EVERY, 0]
    assert loaded.notice == gpu_fallback_notice(("Vulkan0",), gemma_path.name)
    assert loaded.n_gpu_layers == 0
    assert _answer(worker)


def test_a_cpu_load_that_fails_is_not_retried(
    worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpus(monkeypatch, ())
    calls: list[int] = []

    def always_failing(self: LlamaCppModel, *args: Any) -> Any:
        calls.append(self.n_gpu_layers)
        raise EngineError("llama.cpp could not load the model.")

    monkeypatch.setattr(LlamaCppModel, "_load_weights", always_failing)
    final = worker.load(str(gemma_path), PARAMS).wait(120)
    assert isinstance(final, Failed) and "could not load" in str(final.error)
    assert calls == [0]  # nothing on a GPU: the error is the answer, no second try


def test_a_cancelled_load_is_not_retried_on_the_cpu(
    gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load stopped through the progress callback fails in llama.cpp like a broken GPU
    would; it must stay cancelled, not start again on the CPU."""
    _gpus(monkeypatch, BIG_GPU)
    calls = _failing_on_gpu(monkeypatch, "_new_context")
    with pytest.raises(EngineError):
        LlamaCppModel(str(gemma_path), PARAMS, progress=lambda _fraction: False)
    assert calls == []  # llama.cpp stopped reading the weights: no context, no retry


def test_cpu_only_gives_no_layers_and_no_gpu(
    worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpus(monkeypatch, BIG_GPU)
    lists: list[Any] = []
    original = LlamaCppModel._device_list

    def spy(self: LlamaCppModel) -> Any:
        devices = original(self)
        lists.append(None if devices is None else [devices[0], devices[1]])
        return devices

    monkeypatch.setattr(LlamaCppModel, "_device_list", spy)
    params = LoadParams(n_ctx=512, n_parallel=1, n_gpu_layers=-1, device="cpu")
    loaded = worker.load(str(gemma_path), params).result(120)
    assert (loaded.n_gpu_layers, loaded.placement) == (0, "cpu")
    assert lists == [[None, None]]  # an empty device list: llama.cpp touches no GPU


def test_one_device_chosen_is_the_only_one_given_to_llama_cpp(
    worker: EngineWorker, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two = (*BIG_GPU, GpuMemory("Vulkan1", 64 * 1024**3, 64 * 1024**3))
    _gpus(monkeypatch, two)
    handles = {"Vulkan0": 0x1000, "Vulkan1": 0x2000}
    monkeypatch.setattr(backends, "device_handle", lambda name, *a: handles.get(name))
    seen: list[Any] = []

    def fake_weights(self: LlamaCppModel, native: Any, params: LoadParams, progress: Any) -> Any:
        devices = self._device_list()
        seen.append((self.n_gpu_layers, [devices[0], devices[1]]))
        raise EngineError("stop here: the fake device handle must not reach llama.cpp")

    monkeypatch.setattr(LlamaCppModel, "_load_weights", fake_weights)
    params = LoadParams(n_ctx=512, n_parallel=1, device="Vulkan1")
    final = worker.load(str(gemma_path), params).wait(120)
    assert isinstance(final, Failed)
    # Vulkan1 alone, then the fall-back with no device at all
    assert seen == [(GEMMA_EVERY, [0x2000, None]), (0, [None, None])]


def test_the_device_list_is_what_llama_cpp_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The list given as ``llama_model_params.devices`` is NULL-terminated pointers."""
    array = (ctypes.c_void_p * 2)(0x2000, None)
    pointer = ctypes.cast(array, ctypes.c_void_p).value
    assert pointer is not None
    read = ctypes.cast(pointer, ctypes.POINTER(ctypes.c_void_p))
    assert (read[0], read[1]) == (0x2000, None)


@pytest.fixture
def gemma_info(gemma_path: Path) -> Any:
    from app.engine.gguf import read_gguf

    return read_gguf(gemma_path)


def test_the_back_end_choice_narrows_the_gpus(gemma_info: Any) -> None:
    two = (*BIG_GPU, GpuMemory("Vulkan1", 64 * 1024**3, 64 * 1024**3))
    auto = sizing.plan_offload(gemma_info, 512, LoadParams(), two)
    assert auto.devices == ("Vulkan0", "Vulkan1") and auto.placement == "gpu"
    one = sizing.plan_offload(gemma_info, 512, LoadParams(device="Vulkan1"), two)
    assert one.devices == ("Vulkan1",) and one.n_gpu_layers == GEMMA_EVERY
    cpu = sizing.plan_offload(gemma_info, 512, LoadParams(n_gpu_layers=-1, device="cpu"), two)
    assert (cpu.n_gpu_layers, cpu.placement) == (0, "cpu")
    assert cpu.describe() == "CPU only: chosen in Settings → Hardware (--device cpu)."
    gone = sizing.plan_offload(gemma_info, 512, LoadParams(device="CUDA0"), two)
    assert (gone.n_gpu_layers, gone.devices) == (0, ())
    assert "CUDA0, the device chosen in Settings → Hardware (--device), is not present" in (
        gone.describe()
    )


def test_a_settings_file_without_the_key_gets_automatic_an_explicit_choice_stays(
    tmp_path: Path,
) -> None:
    """settings.json holds what a person set: an older file without ``load.n_gpu_layers`` gets
    the new default, one that says 0 (chosen when 0 was the default too) keeps it."""
    import json

    from app.config import Settings

    untouched = tmp_path / "untouched.json"
    untouched.write_text(json.dumps({"version": 1, "load.n_ctx": 4096}))
    assert Settings(untouched).get("load.n_gpu_layers") == AUTO_GPU_LAYERS
    chosen = tmp_path / "chosen.json"
    chosen.write_text(json.dumps({"version": 1, "load.n_gpu_layers": 0}))
    assert Settings(chosen).get("load.n_gpu_layers") == 0
    assert json.loads(chosen.read_text())["load.n_gpu_layers"] == 0  # not rewritten


def test_a_load_read_again_after_a_failed_gpu_reports_its_progress_from_the_start() -> None:
    """After a GPU fails mid-load the weights are read again on the CPU: the progress the app
    shows starts again from 0 instead of staying where the failed try stopped."""
    from app.engine.types import LoadProgress, LoadRequest
    from tests.helpers.scripted_model import ScriptedModel

    def two_tries(request: LoadRequest, progress: Any) -> ScriptedModel:
        for fraction in (0.2, 0.5, 0.7):  # the GPU try, which fails here
            progress(fraction)
        for fraction in (0.0, 0.3, 0.6, 1.0):  # the CPU try
            progress(fraction)
        return ScriptedModel(request)

    worker = EngineWorker(model_factory=two_tries)
    try:
        events: list[Any] = []
        worker.submit(LoadRequest("m.gguf", LoadParams()), events.append).wait(30)
    finally:
        worker.shutdown()
    fractions = [e.fraction for e in events if isinstance(e, LoadProgress)]
    assert fractions == [0.2, 0.5, 0.7, 0.0, 0.3, 0.6, 1.0]
