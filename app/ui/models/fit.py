"""Will a Hub file fit this machine with the user's load settings? Blocking: call off-thread.

The context checked is the one a load would use: ``load.n_ctx`` when set, else the automatic
choice (the trained length capped at the engine's default). With the automatic choice a model
whose default context does not fit still loads with a shorter one, so that case is "tight".
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from app.config import Settings
from app.engine.gguf import GGUFInfo
from app.library import hub
from app.library.hub import FitLevel, ModelFile

DEFAULT_N_CTX = 8192  # app.engine.llamacpp.DEFAULT_N_CTX (not imported: it loads numpy & co.)
MIN_N_CTX = 512

_headers: dict[tuple[str, str, str], GGUFInfo] = {}
_headers_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class FitBadge:
    level: FitLevel
    label: str  # "Fits", "Tight", "Won't fit"
    tooltip: str


def header(repo_id: str, commit: str, model: ModelFile) -> GGUFInfo:
    """The remote header of ``model`` (cached per commit); a split model's weights are all its
    parts, not just the first file's."""
    key = (repo_id, commit, model.filename)
    with _headers_lock:
        cached = _headers.get(key)
    if cached is not None:
        return cached
    info = hub.fetch_header(repo_id, model.filename, revision=commit)
    if model.is_split:
        weights = max(info.tensor_data_size, model.size - info.tensor_data_offset)
        info = dataclasses.replace(info, tensor_data_size=weights)
    with _headers_lock:
        _headers[key] = info
    return info


def context_for(info: GGUFInfo, settings: Settings) -> tuple[int, bool]:
    """(n_ctx a load would ask for, whether it is the automatic choice)."""
    chosen = settings.get("load.n_ctx")
    if chosen:
        return int(chosen), False
    return min(info.context_length or DEFAULT_N_CTX, DEFAULT_N_CTX), True


def check(repo_id: str, commit: str, model: ModelFile, settings: Settings) -> FitBadge:
    info = header(repo_id, commit, model)
    n_ctx, automatic = context_for(info, settings)
    cache = settings.get("load.cache_type") or "f16"
    result = hub.fit_check(
        info,
        n_ctx,
        cache_type_k=cache,
        cache_type_v=cache,
        n_gpu_layers=settings.get("load.n_gpu_layers"),
    )
    level = result.level
    tooltip = result.message
    if level == "wont_fit" and automatic and result.max_context >= MIN_N_CTX:
        level = "tight"
        tooltip = (
            f"{result.message}\n\nWith the automatic context Ember would load it with "
            f"{result.max_context:,} tokens instead."
        )
    where = "automatic" if automatic else "from Settings"
    tooltip += f"\n\nChecked at {n_ctx:,} tokens of context ({where})."
    label = {"fits": "Fits", "tight": "Tight", "wont_fit": "Won't fit"}[level]
    return FitBadge(level, label, tooltip)
