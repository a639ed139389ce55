"""The fit badge of a Hub file: its remote header, cached, and the engine's verdict in a label.

Blocking (the header is fetched): call off-thread. Whether it fits is the engine's rule
(:func:`app.engine.fit.fit_for_load`) with the load settings the app loads with
(:func:`app.engine.load_settings.load_params`) and the GPUs llama.cpp lists
(:func:`app.engine.backends.gpu_memory`); only the wording is decided here. With a GPU the
label says where the model runs ("Fits on the GPU", "Fits, partly on the GPU", "Tight, CPU
only"); on a machine without one it stays "Fits" / "Tight" / "Won't fit".
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from app.config import Settings
from app.engine import fit as fitting
from app.engine.backends import gpu_memory
from app.engine.fit import FitLevel
from app.engine.fit_records import FitRecords
from app.engine.gguf import GGUFInfo
from app.engine.load_settings import load_params
from app.engine.sizing import PLACEMENT_LABELS, Placement
from app.library import hub
from app.library.hub import ModelFile

_headers: dict[tuple[str, str, str], GGUFInfo] = {}
_headers_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class FitBadge:
    level: FitLevel
    label: str  # "Fits", "Tight", "Won't fit", with where it runs when there is a GPU
    tooltip: str
    placement: Placement = "cpu"


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


def check(repo_id: str, commit: str, model: ModelFile, settings: Settings) -> FitBadge:
    gpus = gpu_memory()
    info = header(repo_id, commit, model)
    params = load_params(settings)
    result = fitting.fit_for_load(info, params, gpus=gpus)
    layers = result.offload.n_gpu_layers if result.offload is not None else 0
    measured = FitRecords().get(model.filename, model.size, params, result.n_ctx, layers)
    if measured is not None:  # this file was loaded with these settings: what it really took
        result = fitting.with_measurement(result, measured)
    where = "automatic" if result.automatic else "from Settings"
    tooltip = f"{result.message}\n\nChecked at {result.n_ctx:,} tokens of context ({where})."
    placement = result.offload.placement if result.offload else "cpu"
    label = _LABELS[result.level]
    if gpus and result.level != "wont_fit":
        on_gpu = result.level == "fits" and placement == "gpu"
        label = "Fits on the GPU" if on_gpu else f"{label}, {PLACEMENT_LABELS[placement]}"
    if result.measured:
        label += " · measured"
    return FitBadge(result.level, label, tooltip, placement)


_LABELS: dict[FitLevel, str] = {"fits": "Fits", "tight": "Tight", "wont_fit": "Won't fit"}
