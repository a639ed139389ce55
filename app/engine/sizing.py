"""Which context a model loads with, and whether it fits in memory: the one rule.

The loader (``llamacpp.choose_n_ctx``), ``ember info`` and the Models page's fit badge all ask
here, with the same load settings, so they give the same answer. The rule: the user's context
if memory allows it (else an error naming what would fit); without one, the trained length
capped at ``DEFAULT_N_CTX`` and then by memory, and an error only when not even
``MIN_N_CTX`` tokens fit.

Light on purpose: no ``llama_cpp``, no numpy, no Qt; the GUI and the CLI import it freely.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from app.engine import gguf
from app.engine.types import LoadParams, OutOfMemoryError

# The context a model gets when the user does not choose one: enough for real conversations,
# small enough to load quickly; capped by the trained length and by free memory.
DEFAULT_N_CTX = 8192
MIN_N_CTX = 512
# Sliding-window models keep a full-size cache for their SWA layers: it costs memory, but only
# then can a follow-up turn reuse the conversation's KV cache instead of re-reading it all.
SWA_FULL = True


def available_memory() -> int:
    """Free RAM now (what the OS could give a new process without swapping)."""
    return int(psutil.virtual_memory().available)


def estimate(info: gguf.GGUFInfo, n_ctx: int, params: LoadParams) -> gguf.MemoryEstimate:
    """The memory a load with ``params`` needs at ``n_ctx`` tokens (``params.n_ctx`` is not
    read): the batch size, flash attention, KV cache types and GPU layers as the loader
    passes them to llama.cpp, and the full-size sliding-window cache it always asks for."""
    return gguf.estimate_memory(
        info,
        n_ctx,
        cache_type_k=params.cache_type_k,
        cache_type_v=params.cache_type_v,
        n_gpu_layers=params.n_gpu_layers,
        n_batch=params.n_batch,
        flash_attn=params.flash_attn,
        swa_full=SWA_FULL,
    )


def max_context(info: gguf.GGUFInfo, params: LoadParams, available: int) -> int:
    """The largest context (capped by the trained one) that fits in ``available`` bytes with
    ``params``' settings; 0 when not even 256 tokens fit."""
    return gguf.max_context_for_memory(
        info,
        available,
        cache_type_k=params.cache_type_k,
        cache_type_v=params.cache_type_v,
        n_batch=params.n_batch,
        flash_attn=params.flash_attn,
        swa_full=SWA_FULL,
    )


def trained_context(info: gguf.GGUFInfo) -> int:
    return info.context_length or DEFAULT_N_CTX


def default_context(info: gguf.GGUFInfo) -> int:
    """The automatic context before memory is considered: the trained length, at most
    ``DEFAULT_N_CTX``."""
    return min(trained_context(info), DEFAULT_N_CTX)


@dataclass(frozen=True, slots=True)
class ContextPlan:
    """What a load with some settings would do: see :func:`plan_context`."""

    n_ctx: int  # the context the load uses; when it cannot load, the one it was refused at
    automatic: bool  # no context was asked for: the default capped by memory
    trained: int
    estimate: gguf.MemoryEstimate  # at ``n_ctx``
    available_bytes: int
    max_context: int  # the largest context that fits (0: none)
    error: str | None = None  # why the load would fail with OutOfMemoryError, if it would

    @property
    def fits(self) -> bool:
        return self.error is None

    @property
    def fits_n_ctx(self) -> int | None:
        """The context to suggest instead: what fits, when that is a usable context."""
        return self.max_context if self.max_context >= MIN_N_CTX else None

    def check(self) -> int:
        """The context to load with; raises OutOfMemoryError when the load would not fit."""
        if self.error is not None:
            raise OutOfMemoryError(self.error, fits_n_ctx=self.fits_n_ctx)
        return self.n_ctx


def plan_context(info: gguf.GGUFInfo, params: LoadParams, available: int) -> ContextPlan:
    """The context a load of ``info`` with ``params`` would use given ``available`` bytes,
    the memory it needs there, the largest context that fits, and the out-of-memory error
    the load would raise (never raised here; :meth:`ContextPlan.check` raises it)."""
    trained = trained_context(info)
    fits = max_context(info, params, available)
    if params.n_ctx:
        need = estimate(info, params.n_ctx, params)
        error = None
        if need.total_bytes > available:
            hint = (
                f"try a context of {fits} tokens"
                if fits >= MIN_N_CTX
                else "the model's weights alone do not fit; close other programs or pick a "
                "smaller quantization"
            )
            error = (
                f"Not enough memory for {params.n_ctx} tokens of context: it needs "
                f"{gguf.human_bytes(need.total_bytes)}, {gguf.human_bytes(available)} is free; "
                f"{hint}."
            )
        return ContextPlan(params.n_ctx, False, trained, need, available, fits, error)
    n_ctx = min(default_context(info), fits)
    # A model trained on fewer than MIN_N_CTX tokens loads with all of them when they fit.
    if n_ctx >= min(MIN_N_CTX, trained):
        need = estimate(info, n_ctx, params)
        return ContextPlan(n_ctx, True, trained, need, available, fits)
    smallest = min(MIN_N_CTX, trained)
    need = estimate(info, smallest, params)
    error = (
        f"Not enough memory to load this model: it needs at least "
        f"{gguf.human_bytes(need.total_bytes)}, {gguf.human_bytes(available)} is free. "
        "Close other programs or pick a smaller quantization."
    )
    return ContextPlan(smallest, True, trained, need, available, fits, error)
