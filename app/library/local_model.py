"""What the local library lists and the errors it raises: :class:`LocalModel` (one runnable
model, wherever it lies), its :data:`Source`, and :class:`LibraryError` with the lookups'
subclasses. Plain data, no disk access. No Qt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.engine.gguf import GGUFInfo
from app.library.projectors import preferred_projector

# Where a model was found: Ember's own folder (downloaded or imported), another app's store
# (used in place, never written), or a folder the user added.
Source = Literal[
    "ember",
    "imported",
    "hf-cache",
    "lmstudio",
    "ollama",
    "llama.cpp",
    "jan",
    "gpt4all",
    "folder",
]

# How the app names each source (the My Models chip, Settings → Models).
SOURCE_TITLES: dict[str, str] = {
    "ember": "Downloaded",
    "imported": "Imported",
    "hf-cache": "HF cache",
    "lmstudio": "LM Studio",
    "ollama": "Ollama",
    "llama.cpp": "llama.cpp",
    "jan": "Jan",
    "gpt4all": "GPT4All",
    "folder": "Folder",
}


class LibraryError(Exception):
    """A library operation failed; the message says why and what to do."""


class NoMatchingModelError(LibraryError, LookupError):
    """Nothing in the library matches the name."""


class AmbiguousModelError(LibraryError, LookupError):
    """Several models match; ``candidates`` holds their ids."""

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


@dataclass(frozen=True, slots=True)
class LocalModel:
    """One runnable model. ``path`` is what to load (the first part of a split model).

    ``info`` is the header summary from the metadata cache: every field of GGUFInfo, but
    without the tensor list and vocabulary (``read_gguf(path)`` gives the full header).
    ``error`` says why a model cannot be used (corrupt header, missing split part).
    ``locations`` lists every path the same file was found at (``path`` first) when there
    is more than one, and ``aliases`` the ids it has at the other places (an Ollama name, a
    path), which still name it. ``app_details`` is what the other app that keeps the file says about
    it (Ollama's template, parameters and system prompt): shown, never used to run it.
    """

    id: str
    name: str
    path: Path
    size: int
    source: Source
    owned: bool
    parts: tuple[Path, ...]
    projectors: tuple[Path, ...] = ()
    repo_id: str | None = None
    filename: str = ""
    quant: str | None = None
    info: GGUFInfo | None = None
    error: str | None = None
    locations: tuple[Path, ...] = ()
    aliases: tuple[str, ...] = ()
    app_details: tuple[tuple[str, str], ...] = ()

    @property
    def mmproj(self) -> Path | None:
        """The projector to load with this model (F16 preferred), if it has one."""
        return preferred_projector(self.projectors)

    @property
    def is_split(self) -> bool:
        return len(self.parts) > 1
