"""Ollama's response shapes: model entries (tags, ps, show), answer lines, durations.

Durations are nanoseconds, times RFC 3339 in UTC, as Ollama reports them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Any

from app.engine import gguf
from app.engine.reasoning import reasoning_format
from app.engine.residency import Resident
from app.engine.types import Finished, LoadedModel
from app.server.catalog import CatalogModel

# Ember keeps a model loaded until another needs its place: Ollama says "for good" this way.
LOADED_FOR_GOOD = "2318-11-26T00:00:00Z"
NS = 1_000_000_000


def iso(timestamp: float | None = None) -> str:
    when = datetime.now(UTC) if timestamp is None else datetime.fromtimestamp(timestamp, UTC)
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def line(obj: dict[str, Any]) -> bytes:
    """One NDJSON line."""
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def ns(seconds: float) -> int:
    return max(0, round(seconds * NS))


@functools.lru_cache(maxsize=64)
def _header(path: str, _size: int, _mtime_ns: int) -> gguf.GGUFInfo | None:
    try:
        return gguf.read_gguf(path)
    except (OSError, gguf.GGUFError):
        return None


def header(path: str) -> gguf.GGUFInfo | None:
    """A model's GGUF header (cached by path, size and mtime); None if it cannot be read.
    Reads the disk: call it off the event loop."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _header(path, st.st_size, st.st_mtime_ns)


def digest(entry: CatalogModel) -> str:
    """A stable identity (Ollama's is its manifest's sha256; hashing gigabytes is not cheap)."""
    key = f"{entry.id}\0{entry.size_bytes}\0{entry.created}"
    return hashlib.sha256(key.encode()).hexdigest()


def details(entry: CatalogModel, info: gguf.GGUFInfo | None) -> dict[str, Any]:
    family = (info.architecture if info else None) or ""
    size_label = (info.size_label if info else None) or _parameter_size(info)
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family,
        "families": [family] if family else None,
        "parameter_size": size_label,
        "quantization_level": entry.quant or (info.quantization if info else "") or "",
    }


def _parameter_size(info: gguf.GGUFInfo | None) -> str:
    count = info.parameter_count if info else 0
    if not count:
        return ""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f}{unit}".replace(".0", "")
    return str(count)


def tag_entry(name: str, entry: CatalogModel, info: gguf.GGUFInfo | None) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": iso(entry.created or None),
        "size": entry.size_bytes,
        "digest": digest(entry),
        "details": details(entry, info),
    }


def ps_entry(
    name: str, entry: CatalogModel, resident: Resident, info: gguf.GGUFInfo | None
) -> dict[str, Any]:
    """One loaded model as Ollama's ``/api/ps`` lists it: ``size`` is the memory it holds
    (weights, KV cache, buffers), ``expires_at`` when its time-to-live runs out."""
    loaded = resident.model
    size = resident.memory_bytes or entry.size_bytes
    vram = loaded.allocated_gpu if loaded.allocated_gpu > 0 else size_vram(size, loaded, info)
    expires = resident.expires_at
    return {
        "name": name,
        "model": name,
        "size": size,
        "digest": digest(entry),
        "details": details(entry, info),
        "expires_at": LOADED_FOR_GOOD if expires is None else iso(expires),
        "size_vram": vram,
        "context_length": loaded.n_ctx,
    }


def size_vram(size: int, loaded: LoadedModel, info: gguf.GGUFInfo | None) -> int:
    """The model's bytes on the GPU, as Ollama's ``size_vram``: by the layers llama.cpp was
    given (automatic resolved, 0 after a fall-back to the CPU), not by the setting (-2, -1).
    Layers and the output layer are taken as equal shares of the file."""
    layers = loaded.n_gpu_layers
    if layers <= 0:
        return 0
    every = (info.block_count or 0) + 1 if info is not None else 0
    if every <= 1 or layers >= every:
        return size
    return size * layers // every


def capabilities(info: gguf.GGUFInfo | None, embedding_only: bool) -> list[str]:
    if embedding_only:
        return ["embedding"]
    caps = ["completion", "tools"]
    if info is not None and info.has_fim:
        caps.append("insert")
    if info is not None and reasoning_format(info.chat_template) is not None:
        caps.append("thinking")  # a template with a known thinking format (<think>, harmony…)
    return caps


def model_info(info: gguf.GGUFInfo | None, verbose: bool) -> dict[str, Any]:
    """The header's metadata; long arrays (the vocabulary) only when ``verbose``, as Ollama."""
    if info is None:
        return {}
    out: dict[str, Any] = {}
    for key, value in info.metadata.items():
        if key == "tokenizer.chat_template":
            continue  # it is the show answer's "template"
        if isinstance(value, list | tuple):
            out[key] = list(value) if verbose and len(value) <= 1_000_000 else None
        elif isinstance(value, str | int | float | bool) or value is None:
            out[key] = value
        else:  # an array the header reader did not load (the vocabulary)
            out[key] = None
    out["general.parameter_count"] = info.parameter_count
    return out


def show(
    name: str,
    entry: CatalogModel,
    info: gguf.GGUFInfo | None,
    loaded: LoadedModel | None,
    *,
    embedding_only: bool,
    verbose: bool,
) -> dict[str, Any]:
    n_ctx = loaded.n_ctx if loaded else (info.context_length if info else None)
    parameters = f"num_ctx {n_ctx}" if n_ctx else ""
    template = (loaded.chat_template if loaded else None) or (info.chat_template if info else "")
    license_ = info.metadata.get("general.license") if info else None
    return {
        "license": license_ if isinstance(license_, str) else "",
        "modelfile": f"# Modelfile of {name}, served by Ember\nFROM {name}\n",
        "parameters": parameters,
        "template": template or "",
        "details": details(entry, info),
        "model_info": model_info(info, verbose),
        "capabilities": capabilities(info, embedding_only),
        "modified_at": iso(entry.created or None),
    }


def done_fields(
    final: Finished, reason: str, started: float, load_seconds: float, now: float
) -> dict[str, Any]:
    """The counts and durations of a final line (``started``/``now``: perf_counter seconds)."""
    return {
        "done": True,
        "done_reason": reason,
        "total_duration": ns(now - started),
        "load_duration": ns(load_seconds),
        "prompt_eval_count": final.usage.prompt_tokens,
        "prompt_eval_duration": ns(final.timings.prompt_seconds),
        "eval_count": final.usage.completion_tokens,
        "eval_duration": ns(final.timings.generation_seconds),
    }
