"""Which vision projector (``mmproj*.gguf``) goes with a model file. No Qt.

The library attaches every projector in a model's folder to the models in that folder
(:mod:`app.library.local`); loading a model picks one of them, F16 first. The app, ``ember run``
and ``ember serve`` load a model with its projector through :func:`projector_beside`, so a
model the library shows as "Vision" is loaded as one without a flag.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from app.library.quant import is_projector, parse_quant

log = logging.getLogger(__name__)

VISION_TAG: Final = "Vision"  # how the model picker and My Models mark a model with one

# The projector quantizations to prefer, best first: a projector is small, precision is cheap.
PROJECTOR_PREFERENCE: Final = ("F16", "BF16", "Q8_0", "F32")


def preferred_projector(projectors: Sequence[Path]) -> Path | None:
    """The projector to load from several (F16 preferred), or None when there is none."""
    if not projectors:
        return None

    def rank(p: Path) -> tuple[int, str]:
        quant = parse_quant(p.name)
        return (PROJECTOR_PREFERENCE.index(quant) if quant in PROJECTOR_PREFERENCE else 99, p.name)

    return min(projectors, key=rank)


def projector_beside(model: Path | str) -> Path | None:
    """The projector the library attaches to ``model``: one in its folder (an Ollama blob's:
    the one its manifest names), or None. Reads one folder listing (the link's folder, not
    its target's: the library groups by that)."""
    path = Path(model).expanduser()
    if is_projector(path.name):
        return None
    if path.parent.name == "blobs":  # Ollama's store: the manifest names the projector
        from app.library.ollama_store import projector_for_blob

        return projector_for_blob(path)
    try:
        found = [
            entry
            for entry in path.parent.iterdir()
            if is_projector(entry.name)
            and entry.name.lower().endswith(".gguf")
            and not entry.name.startswith(".")
            and entry.is_file()
        ]
    except OSError as e:  # an unreadable folder: load the model as text-only
        log.debug("no projector lookup in %s: %s", path.parent, e)
        return None
    return preferred_projector(found)
