"""The test model's file under other names: hard links (a copy on another file system), so
the gateway sees different files and loads each as a model of its own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def model_copies(source: Path, folder: Path, names: tuple[str, ...]) -> list[Path]:
    """``folder/NAME.gguf`` for each name, each the same bytes as ``source``."""
    out = []
    for name in names:
        target = folder / f"{name}.gguf"
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
        out.append(target)
    return out
