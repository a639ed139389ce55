"""Will a model fit: the verdict the Models page's badge shows ("Fits", "Tight", "Won't fit")
with the numbers, from :mod:`app.engine.sizing`'s estimate of what a load allocates."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from app.engine import sizing
from app.engine.fit_records import Measured
from app.engine.gguf import GGUFInfo
from app.engine.gguf_format import human_bytes
from app.engine.sizing import MIN_N_CTX, GpuMemory, MemoryEstimate, OffloadPlan
from app.engine.types import LoadParams

TIGHT_FRACTION: Final = 0.75  # "tight" above this share of the free memory


FitLevel = Literal["fits", "tight", "wont_fit"]


@dataclass(frozen=True, slots=True)
class FitResult:
    """Whether a model at ``n_ctx`` fits this machine's free memory, with the numbers.

    ``automatic``: ``n_ctx`` is the automatic choice (no context was asked for), which a load
    shortens to what fits."""

    level: FitLevel
    needed_bytes: int
    available_bytes: int
    message: str
    estimate: MemoryEstimate
    max_context: int  # the largest context that fits in the available memory (0: none)
    automatic: bool = False
    offload: OffloadPlan | None = None  # where the layers go, when the GPUs were asked
    measured: bool = False  # needed_bytes is what a load with these settings really took

    @property
    def n_ctx(self) -> int:
        return self.estimate.n_ctx


def with_measurement(result: FitResult, measured: Measured) -> FitResult:
    """``result`` judged by what a load with the same settings really took (its record)
    instead of the estimate: the same levels, and a message that says it was measured."""
    needed, available = measured.total, result.available_bytes
    when = time.strftime("%Y-%m-%d", time.localtime(measured.when))
    took = (
        f"took {human_bytes(needed)} when it was loaded with these settings on {when} "
        f"(estimated {human_bytes(measured.estimated)})"
    )
    if needed > available:
        level: FitLevel = "wont_fit"
        text = f"Won't fit (measured): it {took}; {human_bytes(available)} is free now."
    elif needed > TIGHT_FRACTION * available:
        level = "tight"
        text = f"Tight (measured): it {took}; {human_bytes(available)} is free."
    else:
        level = "fits"
        text = f"Fits (measured): it {took}; {human_bytes(available)} is free."
    if result.offload is not None:
        text = f"{text} {result.offload.describe()}"
    return replace(result, level=level, needed_bytes=needed, message=text, measured=True)


def fit_check(
    info: GGUFInfo,
    n_ctx: int,
    available_ram: int | None = None,
    available_vram: int | None = None,
    *,
    params: LoadParams | None = None,
) -> FitResult:
    """Fits / tight (needs more than 75% of what is free) / won't fit at ``n_ctx``, and a message.

    The estimate is the loader's with ``params``' load settings (batch size, flash attention,
    KV cache types, GPU layers; defaults when None; its ``n_ctx`` is not read): against the
    same free memory, "won't fit" at ``n_ctx`` is exactly when loading with that context fails
    for lack of memory.
    ``available_ram`` defaults to free RAM now. With ``available_vram`` (Ember cannot measure it
    portably; the caller passes it when known), RAM and VRAM are pooled, as llama.cpp can split
    layers between them.
    """
    params = params or LoadParams()
    need = sizing.estimate(info, n_ctx, params)
    ram = sizing.available_memory() if available_ram is None else available_ram
    available = ram + (available_vram or 0)
    needed = need.total_bytes
    max_ctx = sizing.max_context(info, params, available)
    where = "RAM + VRAM" if available_vram else "memory"
    parts = (
        f"weights {human_bytes(need.weights_bytes)}, "
        f"context {human_bytes(need.kv_cache_bytes)} "
        f"for {need.n_ctx:,} tokens, working memory {human_bytes(need.compute_bytes)}"
    )
    if needed > available:
        level: FitLevel = "wont_fit"
        if max_ctx >= MIN_N_CTX:
            advice = f"Try {max_ctx:,} tokens of context, or a smaller quantization."
        else:
            advice = "Choose a smaller quantization or a smaller model."
        message = (
            f"Won't fit: needs about {human_bytes(needed)} ({parts}) but only "
            f"{human_bytes(available)} of {where} is free. {advice}"
        )
    elif needed > TIGHT_FRACTION * available:
        level = "tight"
        message = (
            f"Tight: needs about {human_bytes(needed)} ({parts}) of the "
            f"{human_bytes(available)} of {where} free. Close other apps or use a shorter context."
        )
    else:
        level = "fits"
        message = (
            f"Fits: needs about {human_bytes(needed)} ({parts}); "
            f"{human_bytes(available)} of {where} is free."
        )
    return FitResult(level, needed, available, message, need, max_ctx)


def fit_for_load(
    info: GGUFInfo,
    params: LoadParams,
    available_ram: int | None = None,
    gpus: Sequence[GpuMemory] | None = None,
) -> FitResult:
    """Whether a load with ``params`` fits: checked at ``params.n_ctx`` when set, else at the
    automatic context (:func:`default_context`). An automatic context that does not fit whole
    but that the loader would shorten to something usable is "tight", not "won't fit".

    With ``gpus`` (the devices llama.cpp lists; may be empty), the layers :func:`plan_offload`
    puts on them count against their memory, the rest against RAM, and the result says where
    the model runs (``offload``)."""
    automatic = not params.n_ctx
    n_ctx = params.n_ctx or sizing.default_context(info)
    offload = None if gpus is None else sizing.plan_offload(info, n_ctx, params, gpus)
    if offload is not None:
        params = replace(params, n_gpu_layers=offload.n_gpu_layers)
        vram = sizing.estimate(info, n_ctx, params).gpu_bytes if offload.n_gpu_layers else None
        result = fit_check(info, n_ctx, available_ram, vram, params=params)
        result = replace(result, offload=offload, message=f"{result.message} {offload.describe()}")
    else:
        result = fit_check(info, n_ctx, available_ram, params=params)
    if result.level != "wont_fit" or not automatic:
        return replace(result, automatic=automatic)
    plan = sizing.plan_load(info, params, result.available_bytes)
    if not plan.fits:
        return replace(result, automatic=True)
    message = (
        f"{result.message}\n\nWith the automatic context Ember would load it with "
        f"{plan.n_ctx:,} tokens instead."
    )
    return replace(result, level="tight", message=message, automatic=True)
