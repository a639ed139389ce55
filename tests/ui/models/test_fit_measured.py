"""The Discover page's fit badge says "measured" once the file was loaded with the same
settings, and judges by what that load took (app/engine/fit_records.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings
from app.engine import sizing
from app.engine.fit_records import FitRecords
from app.engine.gguf import GGUFInfo
from app.engine.load_settings import load_params
from app.engine.types import LoadedModel
from app.library.hub import ModelFile, RemoteFile
from app.ui.models import fit as badge

MB = 10**6


def test_the_badge_says_measured_after_the_file_was_loaded(
    gemma_info: GGUFInfo, gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings()
    size = gemma_path.stat().st_size
    hub_file = ModelFile(
        gemma_path.stem, "Q4_K_M", (RemoteFile(gemma_path.name, size, None, None),)
    )
    monkeypatch.setattr(badge, "header", lambda *_args: gemma_info)
    monkeypatch.setattr(badge, "gpu_memory", lambda: ())
    before = badge.check("owner/repo", "abc", hub_file, settings)
    assert "measured" not in before.label
    params = load_params(settings)
    n_ctx = sizing.default_context(gemma_info)
    loaded = LoadedModel(
        "m", str(gemma_path), n_ctx, 32768, 2, params, None, False, 0.0, allocated_ram=321 * MB
    )
    FitRecords().add(loaded, hub_file.size, 300 * MB)
    after = badge.check("owner/repo", "abc", hub_file, settings)
    assert after.label == "Fits · measured"
    assert after.tooltip.startswith("Fits (measured): it took 321 MB when it was loaded")
