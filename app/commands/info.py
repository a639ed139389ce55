"""``ember info MODEL``: what a model file is and how much memory it needs, without loading it."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from app.cli import COMMANDS
from app.commands.resolve import resolve_model
from app.engine import gguf
from app.engine.llamacpp import DEFAULT_N_CTX, available_memory, inspect_model_file


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "info",
        help=COMMANDS["info"],
        description="Read a model's metadata from its header (without loading it) and estimate "
        "the memory it needs.",
    )
    p.add_argument("model", metavar="MODEL", help="a .gguf path or a model in the library")
    p.add_argument(
        "-c",
        "--ctx",
        type=int,
        default=None,
        metavar="N",
        help="context length for the memory estimate (default: what `run` would use)",
    )
    p.add_argument("--kv-type", default="f16", help="KV cache type for the estimate")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = resolve_model(args.model)
    info = inspect_model_file(str(path))
    n_ctx = args.ctx or min(info.context_length or DEFAULT_N_CTX, DEFAULT_N_CTX)
    est = gguf.estimate_memory(info, n_ctx, cache_type_k=args.kv_type, cache_type_v=args.kv_type)
    free = available_memory()
    if args.json:
        meta = {k: v for k, v in asdict(info).items() if k != "metadata"}
        print(
            json.dumps(
                {"file": str(path), "info": meta, "memory": asdict(est), "available_bytes": free},
                default=str,
                indent=2,
            )
        )
        return 0
    rows = [("File", str(path)), *gguf.format_info(info)]
    rows += [
        (f"Memory at {n_ctx} ctx", gguf.human_bytes(est.total_bytes)),
        ("  weights", gguf.human_bytes(est.weights_bytes)),
        (f"  KV cache ({args.kv_type})", gguf.human_bytes(est.kv_cache_bytes)),
        ("  compute", gguf.human_bytes(est.compute_bytes)),
        ("Free memory", gguf.human_bytes(free)),
        ("Fits", "yes" if est.total_bytes <= free else "no — try a smaller --ctx or quantization"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0
