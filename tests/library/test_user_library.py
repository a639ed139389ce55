"""The library the app and the commands share: Ember's models plus the folders in Settings."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from app.library.user_library import default_library
from tests.helpers.gguf_writer import gguf_bytes


def test_a_folder_added_in_settings_is_listed(tmp_path: Path) -> None:
    folder = tmp_path / "my-models"
    folder.mkdir()
    (folder / "mine-Q8_0.gguf").write_bytes(gguf_bytes(quant="Q8_0", name="mine"))
    settings = Settings()
    assert default_library(settings).extra_dirs == []
    settings.set("library.extra_dirs", [str(folder)])
    library = default_library(settings)
    assert library.extra_dirs == [folder]
    assert [m.path for m in library.scan()] == [folder / "mine-Q8_0.gguf"]
    assert default_library().extra_dirs == [folder]  # the saved settings, by default
