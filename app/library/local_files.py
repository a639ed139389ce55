"""The local library's files: repository manifests, the LocalModel record, where other apps keep
their models, and the walk that groups a folder's GGUF files into models (split parts,
projectors). Used by :mod:`app.library.local`, which re-exports the public names. No Qt.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from huggingface_hub import constants as hf_constants

from app.config import atomic_write_text
from app.engine.gguf import GGUFInfo
from app.library.projectors import preferred_projector
from app.library.quant import is_projector, split_name

log = logging.getLogger(__name__)

Source = Literal["ember", "imported", "hf-cache", "lmstudio", "folder"]
MANIFEST_NAME: Final = ".ember.json"
_manifest_lock = threading.Lock()


class LibraryError(Exception):
    """A library operation failed; the message says why and what to do."""


class NoMatchingModelError(LibraryError, LookupError):
    """Nothing in the library matches the name."""


class AmbiguousModelError(LibraryError, LookupError):
    """Several models match; ``candidates`` holds their ids."""

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


class NotOwnedError(LibraryError):
    """The model's files belong to someone else (HF cache, LM Studio, a user folder)."""


# --- manifest ------------------------------------------------------------------------------


def read_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """The manifest's file entries of a repository folder ({} when there is none)."""
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return (
        {k: v for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}
    )


def update_manifest(folder: Path, filename: str, entry: dict[str, Any] | None, **top: Any) -> None:
    """Set (or, with ``entry=None``, remove) one file's entry; written atomically."""
    with _manifest_lock:
        files = read_manifest(folder)
        if entry is None:
            files.pop(filename, None)
        else:
            files[filename] = entry
        path = folder / MANIFEST_NAME
        if not files:
            path.unlink(missing_ok=True)
            return
        data = {"version": 1, **top, "files": files}
        atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True))


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- models --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalModel:
    """One runnable model. ``path`` is what to load (the first part of a split model).

    ``info`` is the header summary from the metadata cache: every field of GGUFInfo, but
    without the tensor list and vocabulary (``read_gguf(path)`` gives the full header).
    ``error`` says why a model cannot be used (corrupt header, missing split part).
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

    @property
    def mmproj(self) -> Path | None:
        """The projector to load with this model (F16 preferred), if it has one."""
        return preferred_projector(self.projectors)

    @property
    def is_split(self) -> bool:
        return len(self.parts) > 1


def default_hf_cache_dir() -> Path:
    """huggingface_hub's cache, honouring HF_HUB_CACHE / HF_HOME as they are now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(hf_constants.HF_HUB_CACHE)


def default_lmstudio_dirs() -> tuple[Path, ...]:
    home = Path.home()
    return (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models")


@dataclass
class _Found:
    """A model found on disk before its metadata is looked up."""

    source: Source
    root: Path
    parts: list[Path]
    projectors: list[Path]
    repo_id: str | None
    rel: str  # first part, relative to its repository (or root) folder
    error: str | None = None


# --- metadata cache ------------------------------------------------------------------------

_INFO_FIELDS: Final = tuple(f.name for f in dataclasses.fields(GGUFInfo))


def _walk_gguf(root: Path) -> Iterator[tuple[Path, list[str]]]:
    """(folder, .gguf names) under ``root``; hidden folders and files are skipped."""
    for folder, dirs, files in os.walk(root, onerror=lambda e: log.debug("scan: %s", e)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        names = sorted(f for f in files if f.lower().endswith(".gguf") and not f.startswith("."))
        if names:
            yield Path(folder), names


def _group_folder(
    folder: Path, names: Iterable[str]
) -> list[tuple[list[Path], list[Path], str | None]]:
    """Models in one folder: (parts, projectors, error)."""
    projectors = [folder / n for n in names if is_projector(n)]
    singles: list[tuple[list[Path], list[Path], str | None]] = []
    splits: dict[tuple[str, int], dict[int, Path]] = {}
    for name in names:
        if is_projector(name):
            continue
        path = folder / name
        if not path.is_file():  # broken symlink
            continue
        split = split_name(name)
        if split is None:
            singles.append(([path], projectors, None))
        else:
            splits.setdefault((split.base, split.count), {})[split.index] = path
    for (_, count), found in splits.items():
        missing = [i for i in range(1, count + 1) if i not in found]
        if 1 not in found:
            continue  # without its first part a split model cannot be loaded or named
        error = None
        if missing:
            error = (
                f"Incomplete split model: part(s) {', '.join(map(str, missing))} of {count} missing"
            )
        singles.append(([found[i] for i in sorted(found)], projectors, error))
    return singles


def _copy_atomic(src: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.importing")
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _link(src: Path, target: Path) -> None:
    try:
        os.symlink(src.resolve(), target)
        return
    except (OSError, NotImplementedError) as e:
        symlink_error = e
    try:
        os.link(src, target)
    except OSError as e:
        raise LibraryError(
            f"Cannot link {src.name} into Ember's models folder "
            f"({symlink_error}; {e.strerror or e}). "
            "Import a copy instead."
        ) from e
