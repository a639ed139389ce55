"""Will a Hub file fit this machine with the user's load settings? Blocking: call off-thread.

The check uses the load settings the app loads with (context, batch size, flash attention, KV
cache type) and the engine's own rule (:mod:`app.engine.sizing`). The context checked is
``load.n_ctx`` when set, else the automatic choice (the trained length capped at the engine's
default). With the automatic choice a model whose default context does not fit still loads with
a shorter one, so that case is "tight".
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from app.config import Settings
from app.engine import sizing
from app.engine.gguf import GGUFInfo
from app.library import hub
from app.library.hub import FitLevel, ModelFile
from app.ui.engine_session import load_params

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
    chosen = load_params(settings).n_ctx
    if chosen:
        return chosen, False
    return sizing.default_context(info), True


def check(repo_id: str, commit: str, model: ModelFile, settings: Settings) -> FitBadge:
    info = header(repo_id, commit, model)
    params = load_params(settings)
    n_ctx, automatic = context_for(info, settings)
    result = hub.fit_check(info, n_ctx, params=params)
    level = result.level
    tooltip = result.message
    if level == "wont_fit" and automatic:
        plan = sizing.plan_context(info, params, result.available_bytes)
        if plan.fits:
            level = "tight"
            tooltip = (
                f"{result.message}\n\nWith the automatic context Ember would load it with "
                f"{plan.n_ctx:,} tokens instead."
            )
    where = "automatic" if automatic else "from Settings"
    tooltip += f"\n\nChecked at {n_ctx:,} tokens of context ({where})."
    label = {"fits": "Fits", "tight": "Tight", "wont_fit": "Won't fit"}[level]
    return FitBadge(level, label, tooltip)
