"""Will a model fit, and with which context: the one home of that rule.

- The memory model: what llama.cpp allocates for a model at a context (weights, KV cache,
  compute buffers), read from the GGUF header alone (:func:`estimate_memory`).
- The context a load uses (:func:`plan_load`): the user's context if memory allows it (else
  an error naming what would fit); without one, the trained length capped at ``DEFAULT_N_CTX``
  and then by memory, and an error only when not even ``MIN_N_CTX`` tokens fit.
- The verdict shown before a download or a load (:func:`fit_check`, :func:`fit_for_load`):
  fits, tight or won't fit, with the numbers.

- How many layers go to the GPU (:func:`plan_offload`): with the GPUs llama.cpp lists
  (:mod:`app.engine.backends`), as many as fit in their free memory at the chosen context, or
  what ``--gpu-layers`` / the setting asks for; "fits on the GPU", "partly on the GPU",
  "CPU only".

The loader (``llamacpp.choose_n_ctx``), ``ember info`` and the Models page's fit badge all ask
here, with the same load settings, so they give the same answer. ``available_memory`` is the one
measure of free memory they share.

Light on purpose: no ``llama_cpp``, no numpy, no Qt; the GUI and the CLI import it freely.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

import psutil

from app.engine.ggml_types import GGMLType, ggml_type
from app.engine.gguf import GGUFInfo, read_gguf
from app.engine.gguf_format import human_bytes
from app.engine.gguf_reader import GGUFError
from app.engine.speculation import draft_rows
from app.engine.types import (
    CACHED_SEQUENCES,
    DEFAULT_KV_CACHE_TYPE,
    DEFAULT_N_BATCH,
    FORCE_HINT,
    LoadParams,
    ModelTooLargeError,
)

# The context a model gets when the user does not choose one: enough for real conversations,
# small enough to load quickly; capped by the trained length and by free memory.
DEFAULT_N_CTX: Final = 8192
MIN_N_CTX: Final = 512
# Sliding-window models keep a full-size cache for their SWA layers: it costs memory, but only
# then can a follow-up turn reuse the conversation's KV cache instead of re-reading it all.
SWA_FULL: Final = True
_KV_PAD: Final = 256  # llama.cpp pads KV cache sizes to 256 cells
# What a model that does not say its trained context (a damaged or hand-made header) is taken
# to have: everywhere below, so the memory model and the context plan agree on it.
UNKNOWN_TRAINED_CONTEXT: Final = 4096


def available_memory() -> int:
    """Free RAM now (what the OS could give a new process without swapping)."""
    return int(psutil.virtual_memory().available)


# --- the memory model ------------------------------------------------------------------

# Layers attend to a sliding window in a fixed pattern, as llama.cpp's set_swa_pattern(n):
# layer il uses the window when il % n < n - 1 (Gemma 2 alternates; Gemma 3 has five local
# layers, then one global). Other architectures with a window are sized as full (conservative).
_SWA_PERIODS: Final = {"gemma2": 2, "gemma3": 6, "cohere2": 4}
# What llama.cpp's compute buffer holds besides the activations and the attention mask (its
# graph's small tensors): about 5 MiB measured on Gemma 3 270M (bench/fit_accuracy.py).
_COMPUTE_FIXED: Final = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes needed to run a model at ``n_ctx`` tokens; see :func:`estimate_memory`."""

    n_ctx: int
    weights_bytes: int
    kv_cache_bytes: int
    compute_bytes: int
    total_bytes: int
    gpu_bytes: int = 0  # the part of the weights and KV cache that lives on the GPU

    @property
    def ram_bytes(self) -> int:
        return self.total_bytes - self.gpu_bytes


def estimate_memory(
    info: GGUFInfo,
    n_ctx: int,
    *,
    cache_type_k: str = DEFAULT_KV_CACHE_TYPE,
    cache_type_v: str = DEFAULT_KV_CACHE_TYPE,
    n_gpu_layers: int = 0,
    n_batch: int = DEFAULT_N_BATCH,
    n_seq: int = 1,
    flash_attn: bool = False,
    swa_full: bool = True,
    n_outputs: int | None = None,
) -> MemoryEstimate:
    """Estimate what llama.cpp allocates to run ``info`` with an ``n_ctx``-token context.

    - weights: all tensor data. mmap'd weights are still paged into RAM while generating.
    - KV cache: per layer, cells x (kv_heads x key_length x K bytes + kv_heads x value_length
      x V bytes), with quantized cache types at their block sizes. Cells are ``n_ctx`` padded
      to 256 (``n_ctx=0`` means the trained context, as in llama.cpp). Sliding-window layers of
      architectures with a known pattern keep only ``min(cells, pad256(window + n_batch))``
      cells per sequence, as llama.cpp's ISWA cache does, unless ``swa_full``. The default
      is ``swa_full=True``, like llama.cpp's and what Ember's engine loads: only a full-size
      SWA cache lets a follow-up turn reuse the conversation's KV cache.
    - compute: 8 MiB fixed + f32 activations (n_batch x 4 x (4 x embedding + 2 x
      feed_forward)) + the f32 attention mask (n_batch x cells x 4) + without flash attention
      the f32 attention scores of the widest layer (heads x cells x n_batch x 4); ggml reuses
      compute memory between layers, so it is sized for one layer, not all. Then the output
      buffer: f32 logits for each sequence (n_vocab x n_outputs x 4), which llama.cpp reserves
      for ``n_outputs`` outputs (its sequences: Ember asks for one token's logits per
      sequence a step), not for a whole batch.
    Checked against what llama.cpp allocates (its buffer sizes, read from its log at load:
    app/engine/memory_breakdown.py) by tests/engine/test_fit_accuracy.py and
    bench/fit_accuracy.py: within 10% on the test model over contexts and KV cache types.
    - gpu: with ``n_gpu_layers`` (-1 = all), the last layers' weights and KV cache, plus the
      output layer when every layer is offloaded, as llama.cpp assigns them.
    ``n_outputs`` defaults to ``n_seq``.
    Slightly conservative by design: better to offer 8192 tokens that load than 16384 that don't.
    """
    if n_ctx < 0 or n_batch <= 0 or n_seq <= 0:
        raise ValueError("n_ctx must be >= 0, n_batch and n_seq > 0")
    n_ctx = n_ctx or trained_context(info)
    k_type, v_type = ggml_type(cache_type_k), ggml_type(cache_type_v)
    cells = _kv_cells(info, n_ctx, n_batch, n_seq, swa_full)
    layer_kv = _layer_kv_bytes(info, cells, (k_type, v_type))
    kv_bytes = sum(layer_kv)
    compute = _compute_bytes(info, cells[0], n_batch, flash_attn)
    compute += (info.vocab_size or 0) * 4 * (n_outputs or n_seq)  # the output buffer
    gpu = _gpu_bytes(info, layer_kv, n_gpu_layers)
    weights = info.tensor_data_size
    return MemoryEstimate(
        n_ctx=n_ctx,
        weights_bytes=weights,
        kv_cache_bytes=kv_bytes,
        compute_bytes=compute,
        total_bytes=weights + kv_bytes + compute,
        gpu_bytes=gpu,
    )


def max_context_for_memory(
    info: GGUFInfo,
    available_bytes: int,
    *,
    cache_type_k: str = DEFAULT_KV_CACHE_TYPE,
    cache_type_v: str = DEFAULT_KV_CACHE_TYPE,
    n_batch: int = DEFAULT_N_BATCH,
    n_seq: int = 1,
    flash_attn: bool = False,
    swa_full: bool = True,
    n_outputs: int | None = None,
) -> int:
    """The largest context (a multiple of 256) whose estimate fits in ``available_bytes``.

    Capped by the trained context, which is returned as is when it fits. 0 when not even 256
    tokens fit, e.g. when the weights alone are too big.
    """
    trained = trained_context(info)

    def fits(n_ctx: int) -> bool:
        estimate = estimate_memory(
            info,
            n_ctx,
            cache_type_k=cache_type_k,
            cache_type_v=cache_type_v,
            n_batch=n_batch,
            n_seq=n_seq,
            flash_attn=flash_attn,
            swa_full=swa_full,
            n_outputs=n_outputs,
        )
        return estimate.total_bytes <= available_bytes

    if fits(trained):
        return trained
    low, high = 0, trained // _KV_PAD  # fits(low * 256) holds (or low == 0); high does not
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid * _KV_PAD) else (low, mid)
    return low * _KV_PAD


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _swa_layers(info: GGUFInfo) -> tuple[bool, ...]:
    """Which layers keep only a sliding window of the cache; all False when not known."""
    n_layer = info.block_count or 0
    if not info.sliding_window:
        return (False,) * n_layer
    pattern = info.metadata.get(f"{info.architecture}.attention.sliding_window_pattern")
    if isinstance(pattern, list) and len(pattern) == n_layer:
        return tuple(bool(flag) for flag in pattern)
    period = _SWA_PERIODS.get(info.architecture or "")
    if period is None:
        return (False,) * n_layer
    return tuple(il % period < period - 1 for il in range(n_layer))


def _kv_cells(
    info: GGUFInfo, n_ctx: int, n_batch: int, n_seq: int, swa_full: bool
) -> tuple[int, int]:
    """Cells of the full cache and of the sliding-window cache (one window + a batch per
    sequence, as llama.cpp's ISWA cache sizes it)."""
    cells = _pad(n_ctx, _KV_PAD)
    per_seq = min(-(-cells // n_seq), _pad((info.sliding_window or 0) + n_batch, _KV_PAD))
    return cells, cells if swa_full else min(cells, n_seq * per_seq)


def _layer_kv_bytes(
    info: GGUFInfo, cells: tuple[int, int], kv_types: tuple[GGMLType, GGMLType]
) -> list[int]:
    full_cells, swa_cells = cells
    k_type, v_type = kv_types
    k_len = info.key_length or 0
    v_len = info.value_length or 0
    return [
        (swa_cells if swa else full_cells)
        * (k_type.row_bytes(heads * k_len) + v_type.row_bytes(heads * v_len))
        for heads, swa in zip(info.layer_kv_heads(), _swa_layers(info), strict=False)
    ]


def _compute_bytes(info: GGUFInfo, cells: int, n_batch: int, flash_attn: bool) -> int:
    embd = info.embedding_length or 0
    ffn = info.feed_forward_length or 4 * embd
    activations = n_batch * 4 * (4 * embd + 2 * ffn)
    mask = n_batch * cells * 4
    scores = 0 if flash_attn else (info.head_count or 0) * cells * n_batch * 4
    return _COMPUTE_FIXED + activations + mask + scores


def _layer_of(tensor_name: str) -> int | None:
    parts = tensor_name.split(".", 2)
    if len(parts) >= 2 and parts[0] == "blk" and parts[1].isdigit():
        return int(parts[1])
    return None


def _gpu_bytes(info: GGUFInfo, layer_kv: list[int], n_gpu_layers: int) -> int:
    n_layer = info.block_count or 0
    if n_gpu_layers < 0:
        n_gpu_layers = n_layer + 1
    first = n_layer - min(n_gpu_layers, n_layer)  # llama.cpp offloads the last layers first
    total = sum(layer_kv[first:])
    for tensor in info.tensors:
        layer = _layer_of(tensor.name)
        on_gpu = (
            layer >= first
            if layer is not None
            else n_gpu_layers > n_layer and tensor.name.startswith("output")
        )
        total += tensor.n_bytes if on_gpu else 0
    return total


# --- the context a load uses ----------------------------------------------------------------


def estimate(info: GGUFInfo, n_ctx: int, params: LoadParams) -> MemoryEstimate:
    """The memory a load with ``params`` needs at ``n_ctx`` tokens (``params.n_ctx`` is not
    read): the batch size, flash attention, KV cache types and GPU layers as the loader
    passes them to llama.cpp, and the full-size sliding-window cache it always asks for;
    with a draft model, its memory too (:func:`draft_estimate`)."""
    own = _own_estimate(info, n_ctx, params)
    draft = draft_estimate(params, n_ctx)
    if draft is None:
        return own
    return MemoryEstimate(
        n_ctx=own.n_ctx,
        weights_bytes=own.weights_bytes + draft.weights_bytes,
        kv_cache_bytes=own.kv_cache_bytes + draft.kv_cache_bytes,
        compute_bytes=own.compute_bytes + draft.compute_bytes,
        total_bytes=own.total_bytes + draft.total_bytes,
        gpu_bytes=own.gpu_bytes,
    )


def draft_context(n_ctx: int, params: LoadParams) -> int:
    """A draft model's context: the model's, and room for each answer's draft beyond it."""
    return n_ctx + max(1, params.n_parallel) * max(0, params.draft_max)


@functools.lru_cache(maxsize=16)
def _draft_info(path: str, size: int, mtime_ns: int) -> GGUFInfo | None:
    del size, mtime_ns  # the cache key: a changed file is read again
    try:
        return read_gguf(path)
    except GGUFError:
        return None  # the load says what is wrong with it


def draft_estimate(params: LoadParams, n_ctx: int) -> MemoryEstimate | None:
    """What ``params``' draft model needs beside the model at ``n_ctx``: its weights, a KV
    cache as long as :func:`draft_context` for ``n_parallel`` answers, its compute and logits
    buffers (app.engine.draft_model). None without a draft model or one that cannot be read."""
    if not params.draft_model or params.draft_max <= 0:
        return None
    try:
        st = os.stat(params.draft_model)
    except OSError:
        return None
    info = _draft_info(params.draft_model, st.st_size, st.st_mtime_ns)
    if info is None:
        return None
    parallel = max(1, params.n_parallel)
    return estimate_memory(
        info,
        draft_context(n_ctx or trained_context(info), params),
        cache_type_k=params.cache_type_k,
        cache_type_v=params.cache_type_v,
        n_batch=params.n_batch,
        n_seq=parallel,
        flash_attn=params.flash_attn,
        swa_full=True,
        n_outputs=parallel,
    )


def _own_estimate(info: GGUFInfo, n_ctx: int, params: LoadParams) -> MemoryEstimate:
    return estimate_memory(
        info,
        n_ctx,
        cache_type_k=params.cache_type_k,
        cache_type_v=params.cache_type_v,
        # "automatic" not yet resolved: counted all in RAM, the conservative side for RAM
        n_gpu_layers=0 if params.n_gpu_layers == AUTO_GPU_LAYERS else params.n_gpu_layers,
        n_batch=params.n_batch,
        flash_attn=params.flash_attn,
        swa_full=SWA_FULL,
        n_outputs=n_outputs(params),
    )


def n_outputs(params: LoadParams) -> int:
    """The logits rows llama.cpp reserves for a load with ``params``: one per sequence (the
    generating ones and the idle ones that keep recent prompts), and the drafted tokens one
    batch may verify (speculative decoding), as the loader asks for them."""
    parallel = max(1, params.n_parallel)
    return parallel + CACHED_SEQUENCES + draft_rows(parallel, params.draft_max)


def max_context(info: GGUFInfo, params: LoadParams, available: int) -> int:
    """The largest context (capped by the trained one) that fits in ``available`` bytes with
    ``params``' settings; 0 when not even 256 tokens fit. A draft model's memory is taken
    off first, as it needs it at the default context (a little more or less at others)."""
    draft = draft_estimate(params, default_context(info))
    return max_context_for_memory(
        info,
        available - (draft.total_bytes if draft else 0),
        cache_type_k=params.cache_type_k,
        cache_type_v=params.cache_type_v,
        n_batch=params.n_batch,
        flash_attn=params.flash_attn,
        swa_full=SWA_FULL,
        n_outputs=n_outputs(params),
    )


def trained_context(info: GGUFInfo) -> int:
    return info.context_length or UNKNOWN_TRAINED_CONTEXT


def default_context(info: GGUFInfo) -> int:
    """The automatic context before memory is considered: the trained length, at most
    ``DEFAULT_N_CTX``."""
    return min(trained_context(info), DEFAULT_N_CTX)


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """What a load with some settings would do: see :func:`plan_load`."""

    n_ctx: int  # the context the load uses; when it cannot load, the one it was refused at
    automatic: bool  # no context was asked for: the default capped by memory
    trained: int
    estimate: MemoryEstimate  # at ``n_ctx``
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

    def check(self, force: bool = False) -> int:
        """The context to load with; raises ModelTooLargeError when the load would not fit,
        unless ``force`` (then the context it was refused at)."""
        if self.error is not None and not force:
            raise ModelTooLargeError(
                self.error,
                fits_n_ctx=self.fits_n_ctx,
                needed_bytes=self.estimate.total_bytes,
                available_bytes=self.available_bytes,
            )
        return self.n_ctx


def plan_load(info: GGUFInfo, params: LoadParams, available: int) -> LoadPlan:
    """The context a load of ``info`` with ``params`` would use given ``available`` bytes,
    the memory it needs there, the largest context that fits, and the out-of-memory error
    the load would raise (never raised here; :meth:`LoadPlan.check` raises it)."""
    trained = trained_context(info)
    fits = max_context(info, params, available)
    if params.n_ctx:
        need = estimate(info, params.n_ctx, params)
        error = None
        if need.total_bytes > available:
            hint = (
                f"try a context of {fits} tokens, a smaller quantization or fewer GPU layers"
                if fits >= MIN_N_CTX
                else "the model's weights alone do not fit; close other programs, pick a "
                "smaller quantization or put fewer layers on the GPU"
            )
            error = (
                f"Not enough memory for {params.n_ctx} tokens of context: it needs "
                f"{human_bytes(need.total_bytes)}, {human_bytes(available)} is free; "
                f"{hint}. {FORCE_HINT}"
            )
        return LoadPlan(params.n_ctx, False, trained, need, available, fits, error)
    n_ctx = min(default_context(info), fits)
    # A model trained on fewer than MIN_N_CTX tokens loads with all of them when they fit.
    if n_ctx >= min(MIN_N_CTX, trained):
        need = estimate(info, n_ctx, params)
        return LoadPlan(n_ctx, True, trained, need, available, fits)
    smallest = min(MIN_N_CTX, trained)
    need = estimate(info, smallest, params)
    error = (
        f"Not enough memory to load this model: it needs at least "
        f"{human_bytes(need.total_bytes)}, {human_bytes(available)} is free. "
        f"Close other programs, pick a smaller quantization or put fewer layers on the GPU. "
        f"{FORCE_HINT}"
    )
    return LoadPlan(smallest, True, trained, need, available, fits, error)


# --- how many layers go to the GPU ----------------------------------------------------------

# ``n_gpu_layers`` meaning "as many as fit" (-1 is llama.cpp's "all", 0 "none").
AUTO_GPU_LAYERS: Final = -2
# ``LoadParams.device``: every GPU llama.cpp lists, or none; any other value names one device.
DEVICE_AUTO: Final = "auto"
DEVICE_CPU: Final = "cpu"
# Free GPU memory left to the driver, other programs and ggml's own buffers per device.
GPU_RESERVE: Final = 512 * 1024 * 1024

Placement = Literal["gpu", "partial", "cpu"]
PLACEMENT_LABELS: Final[dict[Placement, str]] = {
    "gpu": "fits on the GPU",
    "partial": "partly on the GPU",
    "cpu": "CPU only",
}


@dataclass(frozen=True, slots=True)
class GpuMemory:
    """A GPU llama.cpp can offload to (from :func:`app.engine.backends.gpu_devices`)."""

    name: str  # "Vulkan0"
    free: int
    total: int


def chosen_gpus(gpus: Sequence[GpuMemory], device: str) -> tuple[GpuMemory, ...]:
    """The GPUs a load with ``LoadParams.device`` may use: all of them ("auto"), none
    ("cpu"), or the one so named (none when it is not there)."""
    if device == DEVICE_AUTO:
        return tuple(gpus)
    return tuple(g for g in gpus if g.name == device)


@dataclass(frozen=True, slots=True)
class OffloadPlan:
    """Where a model's layers go: see :func:`plan_offload`."""

    n_gpu_layers: int  # what llama.cpp is given: 0 .. n_layer + 1 (the output layer last)
    n_layer: int
    placement: Placement
    gpu_bytes: int  # weights and KV cache on the GPU, plus its compute buffer when used
    gpu_free: int  # what the GPUs have free, less GPU_RESERVE each
    automatic: bool  # chosen by free memory, not by --gpu-layers or the setting
    devices: tuple[str, ...] = ()  # the GPUs the layers may go to
    device: str = DEVICE_AUTO  # the back-end choice (Settings → Hardware, --device)

    @property
    def label(self) -> str:
        return PLACEMENT_LABELS[self.placement]

    def describe(self) -> str:
        """One sentence for ``ember info`` and the fit badge's tooltip."""
        label = self.label[0].upper() + self.label[1:]
        chosen = "" if self.automatic else " (as set by --gpu-layers or the setting)"
        if self.device == DEVICE_CPU:
            return f"{label}: chosen in Settings → Hardware (--device cpu)."
        if not self.devices and self.device != DEVICE_AUTO:
            return (
                f"{label}: {self.device}, the device chosen in Settings → Hardware "
                "(--device), is not present."
            )
        if not self.devices:
            return f"{label}: llama.cpp found no GPU."
        where = ", ".join(self.devices)
        free = human_bytes(self.gpu_free)
        if self.placement == "cpu":
            reason = f"no layer fits in the {free} free on {where}" if self.automatic else ""
            return f"{label}{chosen}{': ' + reason if reason else ''}."
        layers = min(self.n_gpu_layers, self.n_layer)
        what = (
            f"all {self.n_layer} layers and the output"
            if self.placement == "gpu"
            else f"{layers} of {self.n_layer} layers"
        )
        return f"{label}{chosen}: {what} on {where}, {human_bytes(self.gpu_bytes)} of {free} free."


def _gpu_need(info: GGUFInfo, n_ctx: int, params: LoadParams, n_gpu_layers: int) -> int:
    if n_gpu_layers <= 0:
        return 0
    est = estimate(info, n_ctx, replace(params, n_gpu_layers=n_gpu_layers))
    return est.gpu_bytes + est.compute_bytes  # the GPU computes the offloaded layers' graph


def plan_offload(
    info: GGUFInfo, n_ctx: int, params: LoadParams, gpus: Sequence[GpuMemory]
) -> OffloadPlan:
    """How many layers llama.cpp should offload at ``n_ctx`` tokens of context.

    ``gpus`` are the GPUs llama.cpp lists; ``params.device`` narrows them (:func:`chosen_gpus`:
    "cpu" or a device that is not there leaves none). ``params.n_gpu_layers`` other than
    ``AUTO_GPU_LAYERS`` is the user's choice and is kept (-1: all). Automatic: with no GPU,
    none; else the most layers (the last ones first, as llama.cpp assigns them; all of them
    plus the output layer is "fits on the GPU") whose weights, KV cache and compute buffer fit
    in the GPUs' free memory less ``GPU_RESERVE`` each. llama.cpp splits layers over several
    GPUs by their free memory: pooled here.
    """
    gpus = chosen_gpus(gpus, params.device)
    n_layer = info.block_count or 0
    devices = tuple(g.name for g in gpus)
    free = sum(max(0, g.free - GPU_RESERVE) for g in gpus)
    every = n_layer + 1
    automatic = params.n_gpu_layers == AUTO_GPU_LAYERS
    if not automatic:
        n = every if params.n_gpu_layers < 0 else min(params.n_gpu_layers, every)
        n = n if gpus else 0  # llama.cpp keeps everything on the CPU without a GPU
    elif not gpus or _gpu_need(info, n_ctx, params, 1) > free:
        n = 0
    else:
        low, high = 1, every + 1  # low fits; high does not (or is past the end)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if _gpu_need(info, n_ctx, params, mid) <= free else (low, mid)
        n = low
    placement: Placement = "gpu" if n >= every else "partial" if n > 0 else "cpu"
    need = _gpu_need(info, n_ctx, params, n)
    return OffloadPlan(n, n_layer, placement, need, free, automatic, devices, params.device)
