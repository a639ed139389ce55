"""The offload rule (app/engine/sizing.py: plan_offload; app/engine/fit.py: fit_for_load with
GPUs), with the GPUs' numbers injected: how many layers fit in free GPU memory at the chosen
context, and what ``--gpu-layers`` / the setting override."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.config import Settings
from app.engine import sizing
from app.engine.fit import fit_for_load
from app.engine.gguf import GGUFInfo, read_gguf
from app.engine.sizing import AUTO_GPU_LAYERS, GPU_RESERVE, GpuMemory, plan_offload
from app.engine.types import LoadParams
from app.library.hub import ModelFile, RemoteFile
from app.ui.models import fit

AUTO = LoadParams(n_gpu_layers=AUTO_GPU_LAYERS)
N_CTX = 4096


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> GGUFInfo:
    return read_gguf(gemma_path)


def gpu(free: int, name: str = "Vulkan0") -> GpuMemory:
    return GpuMemory(name, free, max(free, 8 * 1024**3))


def need(info: GGUFInfo, layers: int) -> int:
    """What ``layers`` offloaded layers take on the GPU, reserve included."""
    est = sizing.estimate(info, N_CTX, LoadParams(n_gpu_layers=layers))
    return est.gpu_bytes + est.compute_bytes + GPU_RESERVE


def test_without_a_gpu_everything_stays_on_the_cpu(gemma: GGUFInfo) -> None:
    plan = plan_offload(gemma, N_CTX, AUTO, ())
    assert (plan.n_gpu_layers, plan.placement, plan.label) == (0, "cpu", "CPU only")
    assert plan.describe() == "CPU only: llama.cpp found no GPU."
    assert plan_offload(gemma, N_CTX, LoadParams(n_gpu_layers=-1), ()).n_gpu_layers == 0


def test_a_roomy_gpu_takes_every_layer_and_the_output(gemma: GGUFInfo) -> None:
    layers = gemma.block_count or 0
    assert layers == 18
    plan = plan_offload(gemma, N_CTX, AUTO, (gpu(64 * 1024**3),))
    assert plan.n_gpu_layers == layers + 1 and plan.placement == "gpu" and plan.automatic
    assert plan.label == "fits on the GPU"
    assert plan.describe().startswith("Fits on the GPU: all 18 layers and the output on Vulkan0")
    # exactly enough for everything is enough; a byte less leaves the output layer behind
    assert plan_offload(gemma, N_CTX, AUTO, (gpu(need(gemma, 19)),)).n_gpu_layers == 19
    assert plan_offload(gemma, N_CTX, AUTO, (gpu(need(gemma, 19) - 1),)).n_gpu_layers == 18


def test_a_small_gpu_takes_the_layers_that_fit(gemma: GGUFInfo) -> None:
    for layers in (1, 7, 12):
        plan = plan_offload(gemma, N_CTX, AUTO, (gpu(need(gemma, layers)),))
        assert plan.n_gpu_layers == layers and plan.placement == "partial"
        assert plan.label == "partly on the GPU"
        assert f"{layers} of 18 layers on Vulkan0" in plan.describe()
        short = plan_offload(gemma, N_CTX, AUTO, (gpu(need(gemma, layers) - 1),))
        assert short.n_gpu_layers == layers - 1
    none = plan_offload(gemma, N_CTX, AUTO, (gpu(need(gemma, 1) - 1),))
    assert none.placement == "cpu" and "no layer fits in the" in none.describe()


def test_a_longer_context_leaves_room_for_fewer_layers(gemma: GGUFInfo) -> None:
    free = (gpu(need(gemma, 12)),)
    short = plan_offload(gemma, N_CTX, AUTO, free).n_gpu_layers
    long = plan_offload(gemma, 32768, AUTO, free).n_gpu_layers
    assert short == 12 and long < short


def test_two_gpus_pool_their_free_memory(gemma: GGUFInfo) -> None:
    half = need(gemma, 12) - GPU_RESERVE
    both = (gpu(half // 2 + GPU_RESERVE, "Vulkan0"), gpu(half - half // 2 + GPU_RESERVE, "Vulkan1"))
    plan = plan_offload(gemma, N_CTX, AUTO, both)
    assert plan.n_gpu_layers == 12 and plan.devices == ("Vulkan0", "Vulkan1")


def test_gpu_layers_and_the_setting_override_the_rule(gemma: GGUFInfo) -> None:
    small = (gpu(need(gemma, 3)),)
    forced = plan_offload(gemma, N_CTX, LoadParams(n_gpu_layers=10), small)
    assert forced.n_gpu_layers == 10 and forced.placement == "partial" and not forced.automatic
    assert "(as set by --gpu-layers or the setting)" in forced.describe()
    every = plan_offload(gemma, N_CTX, LoadParams(n_gpu_layers=-1), small)
    assert every.n_gpu_layers == 19 and every.placement == "gpu"
    assert plan_offload(gemma, N_CTX, LoadParams(n_gpu_layers=500), small).n_gpu_layers == 19
    off = plan_offload(gemma, N_CTX, LoadParams(n_gpu_layers=0), (gpu(64 * 1024**3),))
    assert (
        off.placement == "cpu"
        and off.describe() == "CPU only (as set by --gpu-layers or the setting)."
    )


def test_the_fit_check_counts_offloaded_layers_against_the_gpu(gemma: GGUFInfo) -> None:
    params = dataclasses.replace(AUTO, n_ctx=N_CTX)
    full = sizing.estimate(gemma, N_CTX, LoadParams())
    on_gpu = sizing.estimate(gemma, N_CTX, LoadParams(n_gpu_layers=19))
    big_gpu = (gpu(64 * 1024**3),)
    ram = full.total_bytes - on_gpu.gpu_bytes  # what stays in RAM with every layer offloaded
    assert fit_for_load(gemma, params, ram).level == "wont_fit"  # without the GPU
    result = fit_for_load(gemma, params, ram, gpus=big_gpu)
    assert result.level != "wont_fit" and result.offload is not None
    assert result.offload.placement == "gpu"
    assert "RAM + VRAM" in result.message and "Fits on the GPU: all 18 layers" in result.message
    assert fit_for_load(gemma, params, ram - 1, gpus=big_gpu).level == "wont_fit"
    cpu = fit_for_load(gemma, params, full.total_bytes, gpus=())
    assert cpu.offload is not None and cpu.offload.placement == "cpu"
    assert cpu.message.endswith("CPU only: llama.cpp found no GPU.")


def _badge(
    info: GGUFInfo, settings: Settings, gpus: tuple[GpuMemory, ...], monkeypatch: pytest.MonkeyPatch
) -> fit.FitBadge:
    monkeypatch.setattr(fit, "header", lambda *_args: info)
    monkeypatch.setattr(fit, "gpu_memory", lambda: gpus)
    model = ModelFile("m", "Q4_K_M", (RemoteFile("m-Q4_K_M.gguf", 1, None, None),))
    return fit.check("owner/repo", "0" * 40, model, settings)


def test_the_fit_badge_says_where_the_model_runs(
    gemma: GGUFInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings()
    settings.set("load.n_ctx", N_CTX)
    settings.set("load.n_gpu_layers", AUTO_GPU_LAYERS)
    monkeypatch.setattr(sizing, "available_memory", lambda: 64 * 1024**3)
    badge = _badge(gemma, settings, (gpu(64 * 1024**3),), monkeypatch)
    assert (badge.label, badge.placement) == ("Fits on the GPU", "gpu")
    badge = _badge(gemma, settings, (gpu(need(gemma, 7)),), monkeypatch)
    assert (badge.label, badge.placement) == ("Fits, partly on the GPU", "partial")
    assert "7 of 18 layers on Vulkan0" in badge.tooltip
    badge = _badge(gemma, settings, (gpu(need(gemma, 1) - 1),), monkeypatch)
    assert (badge.label, badge.placement) == ("Fits, CPU only", "cpu")
    badge = _badge(gemma, settings, (), monkeypatch)  # no GPU: the label of a CPU-only machine
    assert (badge.label, badge.placement) == ("Fits", "cpu")
    assert "CPU only: llama.cpp found no GPU." in badge.tooltip
    settings.set("load.n_gpu_layers", 4)  # the setting wins over the rule
    badge = _badge(gemma, settings, (gpu(64 * 1024**3),), monkeypatch)
    assert badge.label == "Fits, partly on the GPU" and "4 of 18 layers" in badge.tooltip
