"""Settings: typed values in settings.json, written atomically and only when they change."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_setting_an_unchanged_value_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GUI sets values freely (every spin-box step, every chat switch): only changes
    reach the disk."""
    from app import config

    writes: list[Path] = []
    real = config.atomic_write_text

    def counting(path: Path, text: str) -> None:
        writes.append(path)
        real(path, text)

    monkeypatch.setattr(config, "atomic_write_text", counting)
    settings = config.Settings(tmp_path / "settings.json")
    settings.set("server.port", 9000)
    settings.set("server.port", 9000)
    settings.set_extra("ui.page", "models")
    settings.set_extra("ui.page", "models")
    assert len(writes) == 2
    assert config.Settings(tmp_path / "settings.json").get("server.port") == 9000
