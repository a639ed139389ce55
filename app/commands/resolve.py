"""Turning what a user typed (a path, a library name, a Hub repo) into a model file."""

from __future__ import annotations

import re
from pathlib import Path

from app.library.local import Library
from app.library.local_model import LibraryError
from app.library.user_library import default_library

# owner/repo, optionally :QUANT or :FILENAME — the shape `ember pull` accepts.
HUB_SPEC = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(:[^:/\\]+)?$")


def looks_like_hub_spec(name: str) -> bool:
    return bool(HUB_SPEC.match(name)) and not Path(name).expanduser().exists()


def resolve_model(name: str, library: Library | None = None) -> Path:
    """A path to a file wins; otherwise the name is looked up in the local library.

    Raises the library's NoMatchingModelError (with an ``ember pull`` hint) or
    AmbiguousModelError (naming the candidates)."""
    path = Path(name).expanduser()
    if path.exists() or (name.endswith(".gguf") and not looks_like_hub_spec(name)):
        return path
    lib = library or default_library()
    lib.scan()
    model = lib.find(name)
    if model.error:
        raise LibraryError(f"{model.name} cannot be used: {model.error}")
    return model.path


__all__ = ["looks_like_hub_spec", "resolve_model"]
