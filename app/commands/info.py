"""``ember info MODEL``: what a model file is, how much memory it needs and where its layers
would run, without loading it. ``ember info --hardware``: the CPU, the CPU variant llama.cpp
picked, each device with its memory and back-end, and llama.cpp's system info; with
``--watch``, then RAM, swap, CPU and GPU memory in use (Ember's share too) every second, as
the Hardware page's graphs show them (app/engine/monitor.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from typing import Any

from app.cli import COMMANDS, CliError
from app.commands.options import add_load_flags, load_params
from app.commands.resolve import resolve_model
from app.engine import backends, gguf_format, sizing
from app.engine.model_file import inspect_model_file
from app.engine.sizing import available_memory
from app.safe_text import terminal_text


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "info",
        help=COMMANDS["info"],
        description="Read a model's metadata from its header (without loading it) and estimate "
        "the memory it needs. The loading flags are `ember run`'s: the context and estimate "
        "shown are the ones `ember run` would use with the same flags.",
    )
    p.add_argument(
        "model", metavar="MODEL", nargs="?", help="a .gguf path or a model in the library"
    )
    p.add_argument(
        "--hardware",
        action="store_true",
        help="show the CPU, the GPUs and the llama.cpp back-ends that drive them",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="with --hardware: then show RAM, swap, CPU and GPU memory in use (Ember's share "
        "too), refreshed every --interval seconds until Ctrl+C",
    )
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="--watch's refresh"
    )
    p.add_argument(
        "--samples", type=int, default=0, metavar="N", help="--watch: stop after N (0: never)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    add_load_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.watch and not args.hardware:
        raise CliError("--watch goes with --hardware: ember info --hardware --watch")
    if args.hardware:
        if args.model:
            raise CliError("give either MODEL or --hardware, not both")
        code = show_hardware(args.json)
        if args.watch:
            if not 0.05 <= args.interval <= 3600:
                raise CliError("--interval: give between 0.05 and 3600 seconds")
            watch(args.interval, args.samples, args.json)
        return code
    if not args.model:
        raise CliError("give a MODEL (a .gguf path or a model in the library), or --hardware")
    path = resolve_model(args.model)
    info = inspect_model_file(str(path))
    params = load_params(args)
    free = available_memory()
    plan = sizing.plan_load(info, params, free)  # the rule `ember run` loads by
    est = plan.estimate
    offload = sizing.plan_offload(info, plan.n_ctx, params, backends.gpu_memory())
    if args.json:
        meta = {k: v for k, v in asdict(info).items() if k != "metadata"}
        result = {
            "file": str(path),
            "info": meta,
            "n_ctx": plan.n_ctx,
            "automatic_ctx": plan.automatic,
            "max_ctx": plan.max_context,
            "fits": plan.fits,
            "error": plan.error,
            "memory": asdict(est),
            "available_bytes": free,
            "offload": {**asdict(offload), "label": offload.label},
        }
        print(json.dumps(result, default=str, indent=2))
        return 0
    where = "automatic" if plan.automatic else "--ctx"
    if plan.automatic and plan.fits and plan.n_ctx < sizing.default_context(info):
        where += f", shortened from {sizing.default_context(info)} to fit free memory"
    elif not plan.automatic and plan.n_ctx > plan.trained:
        where += f", more than the trained {plan.trained}"
    rows = [("File", str(path)), *gguf_format.format_info(info)]
    rows += [
        ("Context", f"{plan.n_ctx} tokens ({where})"),
        (f"Memory at {plan.n_ctx} ctx", gguf_format.human_bytes(est.total_bytes)),
        ("  weights", gguf_format.human_bytes(est.weights_bytes)),
        (f"  KV cache ({params.cache_type_k})", gguf_format.human_bytes(est.kv_cache_bytes)),
        ("  compute", gguf_format.human_bytes(est.compute_bytes)),
        ("Free memory", gguf_format.human_bytes(free)),
        ("Largest context that fits", f"{plan.max_context} tokens" if plan.max_context else "none"),
        ("Fits", "yes" if plan.fits else f"no — {plan.error}"),
        ("Runs on", offload.describe()),
    ]
    _print_rows(rows)
    return 0


def _print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {terminal_text(value)}")  # values come from the model file


def show_hardware(as_json: bool) -> int:
    """``ember info --hardware``; a llama.cpp whose back-ends cannot be read is one error."""
    try:
        hw = backends.hardware()
    except backends.BackendError as e:
        raise CliError(str(e)) from e
    if as_json:
        data = {**asdict(hw), "gpus": [d.name for d in hw.gpus]}
        print(json.dumps(data, indent=2))
        return 0
    _print_rows(backends.describe(hw))
    return 0


def watch(interval: float, samples: int, as_json: bool) -> None:
    """Print the machine's use every ``interval`` seconds (``samples`` times, or until
    Ctrl+C). On a terminal each refresh replaces the last; piped, they follow each other."""
    from dataclasses import asdict as as_dict

    from app.engine.monitor import Sampler, describe

    sampler = Sampler()
    sampler.sample()  # CPU shares are over the time between two samples
    clear = sys.stdout.isatty() and not as_json
    shown = 0
    try:
        while samples <= 0 or shown < samples:
            time.sleep(interval)
            sample = sampler.sample()
            shown += 1
            if as_json:
                print(json.dumps(as_dict(sample)), flush=True)
                continue
            if clear:
                print("\x1b[H\x1b[2J", end="")
            else:
                print()
            _print_rows(describe(sample))
            sys.stdout.flush()
    except KeyboardInterrupt:
        print()
