"""Turning what a user typed (a path, a library name, a Hub repo) into a model file."""

from __future__ import annotations

from pathlib import Path

from app.engine.types import ModelNotFoundError


def resolve_model(name: str) -> Path:
    """A path to a .gguf wins; otherwise the name is looked up in the local library."""
    path = Path(name).expanduser()
    if path.exists() or name.endswith(".gguf") or ("/" not in name and "\\" in name):
        return path
    try:
        from app.library.local import Library
    except ImportError:  # pragma: no cover - the library is part of the app
        return path
    found = Library.default().find(name)
    if found is None:
        raise ModelNotFoundError(
            f"No model called {name!r} in the library. `ember ls` lists models; "
            f"`ember pull {name}` downloads one from the Hugging Face Hub."
        )
    return Path(found.path)
