"""Loose ends: one home for the sampling defaults, registered settings, background work on the
task runner, damaged chat history and key errors shown to the user, private log files. No model
is loaded here."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import SETTINGS, Settings
from app.engine.types import SamplingParams
from app.ui.settings import presets

SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty")


@pytest.mark.parametrize("name", SAMPLING_FIELDS)
def test_sampling_defaults_and_the_balanced_preset_are_the_engines(name: str) -> None:
    engine = getattr(SamplingParams(), name)
    assert SETTINGS[f"sampling.{name}"].default == engine
    assert presets.PRESETS["Balanced"][name] == engine


def test_a_new_user_starts_on_the_balanced_preset(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    assert presets.preset_matching(presets.global_defaults(settings)) == "Balanced"


def test_keeping_the_sidebar_in_narrow_windows_is_a_registered_setting(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    assert settings.get("ui.sidebar_narrow") is False
    settings.set("ui.sidebar_narrow", True)
    assert Settings(tmp_path / "settings.json").get("ui.sidebar_narrow") is True
    with pytest.raises(TypeError):
        settings.set("ui.sidebar_narrow", "yes")
