"""Flags shared by commands that load a model or sample from one."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import get_args

from app.cli import CliError
from app.engine.sizing import AUTO_GPU_LAYERS, DEVICE_AUTO, DEVICE_CPU
from app.engine.speculation import MAX_DRAFT_ROWS
from app.engine.types import (
    DEFAULT_CACHE_RAM_MB,
    DEFAULT_KV_CACHE_TYPE,
    DEFAULT_N_BATCH,
    DEFAULT_PARALLEL,
    KVCacheType,
    LoadParams,
    SamplingParams,
)


def add_load_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("loading")
    g.add_argument(
        "-c",
        "--ctx",
        type=int,
        default=None,
        metavar="N",
        help="context length in tokens (default: automatic, up to 8192)",
    )
    g.add_argument(
        "-t",
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="CPU threads (default: one per physical core)",
    )
    g.add_argument(
        "--gpu-layers",
        type=gpu_layers,
        default=AUTO_GPU_LAYERS,
        metavar="auto|N|-1",
        help="layers to offload to the GPU: auto (default: as many as fit in its free memory), "
        "N, -1 (all) or 0 (none)",
    )
    g.add_argument(
        "--device",
        default=DEVICE_AUTO,
        metavar="auto|cpu|NAME",
        help="where layers may be offloaded: auto (default: every GPU llama.cpp finds), cpu, "
        "or one device as `ember info --hardware` lists it (Vulkan0)",
    )
    g.add_argument(
        "--batch", type=int, default=DEFAULT_N_BATCH, metavar="N", help="prompt batch size"
    )
    g.add_argument(
        "--mmproj",
        type=Path,
        default=None,
        metavar="FILE",
        help="a vision projector (mmproj GGUF) for the model, so chats can carry images "
        "(default: the mmproj*.gguf in the model's folder, if any)",
    )
    g.add_argument(
        "--no-mmproj",
        action="store_true",
        help="load the model without the vision projector in its folder (text only)",
    )
    g.add_argument(
        "--draft-model",
        type=Path,
        default=None,
        metavar="FILE",
        help="a smaller GGUF with the model's vocabulary that drafts tokens for the model to "
        "verify (speculative decoding: the same answers, often faster)",
    )
    g.add_argument(
        "--draft-max",
        type=draft_max,
        default=LoadParams().draft_max,
        metavar="N",
        help="most tokens drafted per answer and step for speculative decoding (by prompt "
        f"lookup, a prediction or --draft-model; 0 to {MAX_DRAFT_ROWS}; default: "
        f"{LoadParams().draft_max}; 0 turns it off)",
    )
    g.add_argument(
        "--flash-attn",
        action=argparse.BooleanOptionalAction,
        default=LoadParams().flash_attn,
        help="flash attention where the backend has it (default: on)",
    )
    g.add_argument(
        "--parallel",
        type=int,
        default=DEFAULT_PARALLEL,
        metavar="N",
        help=f"answers written at the same time (default: {DEFAULT_PARALLEL})",
    )
    g.add_argument(
        "--cache-ram",
        type=int,
        default=DEFAULT_CACHE_RAM_MB,
        metavar="MIB",
        help="RAM that keeps conversations evicted from the context so they resume without "
        f"being read again (default: {DEFAULT_CACHE_RAM_MB}; 0: off)",
    )
    g.add_argument(
        "--no-mmap", action="store_true", help="read the model into RAM instead of mapping it"
    )
    g.add_argument("--mlock", action="store_true", help="lock the model in RAM")
    g.add_argument(
        "--force",
        action="store_true",
        help="load even when the estimate says the model does not fit the free memory (it may "
        "then fail, or make the computer swap); with serve, for every model loaded on demand too",
    )
    g.add_argument(
        "--kv-type",
        choices=get_args(KVCacheType),
        default=DEFAULT_KV_CACHE_TYPE,
        help="KV cache type (q8_0 halves its memory)",
    )


def gpu_layers(text: str) -> int:
    """``--gpu-layers``: "auto" (AUTO_GPU_LAYERS), -1 (all) or a count of layers."""
    if text.strip().lower() == "auto":
        return AUTO_GPU_LAYERS
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not auto, -1 or a number of layers"
        ) from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"{value} layers: give auto, -1 (all) or 0 or more")
    return value


def draft_max(text: str) -> int:
    """``--draft-max``: 0 (no speculative decoding) to :data:`MAX_DRAFT_ROWS`."""
    try:
        value = int(text)
    except ValueError:
        shown = text if len(text) <= 20 else f"{text[:20]}…"
        raise argparse.ArgumentTypeError(f"{shown!r} is not a number of tokens") from None
    if not 0 <= value <= MAX_DRAFT_ROWS:
        raise argparse.ArgumentTypeError(f"{value}: give 0 (off) to {MAX_DRAFT_ROWS} tokens")
    return value


def load_params(args: argparse.Namespace) -> LoadParams:
    """The load flags as given (``--mmproj`` or none); :func:`model_load_params` adds the
    projector the library keeps beside a model."""
    return LoadParams(
        n_ctx=args.ctx,
        n_threads=args.threads,
        n_gpu_layers=args.gpu_layers,
        n_batch=args.batch,
        flash_attn=args.flash_attn,
        use_mmap=not args.no_mmap,
        use_mlock=args.mlock,
        cache_type_k=args.kv_type,
        cache_type_v=args.kv_type,
        n_parallel=max(1, args.parallel),
        cache_ram_mb=max(0, args.cache_ram),
        mmproj=str(args.mmproj) if getattr(args, "mmproj", None) else None,
        device=_device(getattr(args, "device", DEVICE_AUTO)),
        force=bool(getattr(args, "force", False)),
        draft_max=args.draft_max,
        draft_model=_draft_model(getattr(args, "draft_model", None)),
    )


def _draft_model(path: Path | None) -> str | None:
    """``--draft-model``: a model file (its vocabulary is checked when it loads)."""
    if path is None:
        return None
    path = path.expanduser()
    if path.is_dir():
        raise CliError(f"--draft-model {path} is a folder; name a .gguf file.")
    if not path.is_file():
        raise CliError(f"--draft-model {path}: no such file.")
    return str(path.resolve())


def _device(text: str) -> str:
    """``--device``: auto and cpu in any case; a device's name as given."""
    lowered = text.strip().lower()
    return lowered if lowered in (DEVICE_AUTO, DEVICE_CPU) else text.strip()


def add_sampling_flags(p: argparse.ArgumentParser) -> None:
    d = SamplingParams()
    g = p.add_argument_group("sampling")
    g.add_argument(
        "--temp", type=float, default=d.temperature, metavar="T", help="temperature (0: greedy)"
    )
    g.add_argument("--top-p", type=float, default=d.top_p, metavar="P")
    g.add_argument("--top-k", type=int, default=d.top_k, metavar="K")
    g.add_argument("--min-p", type=float, default=d.min_p, metavar="P")
    g.add_argument("--repeat-penalty", type=float, default=d.repeat_penalty, metavar="X")
    g.add_argument("--seed", type=int, default=None, help="seed for reproducible sampling")
    g.add_argument(
        "-n",
        "--max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="stop after N tokens (default: until the context is full)",
    )
    g.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="TEXT",
        help="stop when TEXT is generated (repeatable)",
    )
    g.add_argument("--mirostat", type=int, choices=(0, 1, 2), default=0, help="mirostat mode")
    g.add_argument(
        "--grammar-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="constrain the output with a GBNF grammar",
    )
    g.add_argument(
        "--json-schema",
        type=Path,
        default=None,
        metavar="FILE",
        help="constrain the output to JSON matching this schema file",
    )


def sampling_params(args: argparse.Namespace) -> SamplingParams:
    grammar = args.grammar_file.read_text(encoding="utf-8") if args.grammar_file else None
    schema = json.loads(args.json_schema.read_text(encoding="utf-8")) if args.json_schema else None
    return SamplingParams(
        temperature=args.temp,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repeat_penalty=args.repeat_penalty,
        seed=args.seed,
        max_tokens=args.max_tokens,
        stop=tuple(args.stop),
        mirostat_mode=args.mirostat,
        grammar=grammar,
        json_schema=schema,
    )


def model_load_params(args: argparse.Namespace, model: Path | str) -> LoadParams:
    """The load flags for one model file: ``--mmproj`` when given, else the projector in the
    model's folder (a vision model loads as one), none with ``--no-mmproj``."""
    from app.library.projectors import projector_beside

    params = load_params(args)
    if getattr(args, "no_mmproj", False):
        if params.mmproj is not None:
            raise CliError("--mmproj and --no-mmproj contradict each other; give one.")
        return params
    if params.mmproj is None:
        projector = projector_beside(model)
        if projector is not None:
            params = replace(params, mmproj=str(projector))
    return params
