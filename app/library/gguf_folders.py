"""Where the GGUF models in a folder are: the walk that finds ``.gguf`` files and groups a
folder's files into models (split parts, vision projectors), and the folder layouts the
library reads in place: Ember's models folder, the Hugging Face cache, LM Studio's
``publisher/repo/`` tree and a plain folder. Each finder yields :class:`Found` records; the
library reads their headers and names them. Reads only. No Qt.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from app.library.local_model import Source
from app.library.quant import is_projector, split_name

log = logging.getLogger(__name__)

IMPORTED_DIR: Final = "@imported"  # '@' cannot appear in a Hub owner name, so no clash
_REPO_PART_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class Found:
    """A model found on disk before its metadata is looked up.

    ``rel`` is the first part's path relative to its repository (or root) folder; ``name``,
    when set, is the name its app gives it (an Ollama ``name:tag``) instead of the file's."""

    source: Source
    root: Path
    parts: list[Path]
    projectors: list[Path]
    repo_id: str | None
    rel: str
    error: str | None = None
    name: str | None = None
    details: tuple[tuple[str, str], ...] = field(default=())


def walk_gguf(root: Path) -> Iterator[tuple[Path, list[str]]]:
    """(folder, .gguf names) under ``root``; hidden folders and files are skipped."""
    for folder, dirs, files in os.walk(root, onerror=lambda e: log.debug("scan: %s", e)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        names = sorted(f for f in files if f.lower().endswith(".gguf") and not f.startswith("."))
        if names:
            yield Path(folder), names


def group_folder(
    folder: Path, names: Iterable[str]
) -> list[tuple[list[Path], list[Path], str | None]]:
    """Models in one folder: (parts, projectors, error)."""
    names = list(names)
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


def find_ember(root: Path) -> Iterator[Found]:
    """Ember's models folder: ``<owner>/<repo>/`` from downloads, ``@imported/<name>/``."""
    for folder, names in walk_gguf(root):
        rel_folder = folder.relative_to(root).parts
        imported = bool(rel_folder) and rel_folder[0] == IMPORTED_DIR
        repo_id = None
        if (
            not imported
            and len(rel_folder) >= 2
            and all(_REPO_PART_RE.match(p) for p in rel_folder[:2])
        ):
            repo_id = "/".join(rel_folder[:2])
        base = root / Path(*rel_folder[:2]) if len(rel_folder) >= 2 else root
        for parts, projectors, error in group_folder(folder, names):
            rel = parts[0].relative_to(base).as_posix()
            source: Source = "imported" if imported else "ember"
            yield Found(source, root, parts, projectors, repo_id, rel, error)


def find_hf_cache(root: Path, source: Source = "hf-cache") -> Iterator[Found]:
    """A Hugging Face cache: ``models--owner--repo/snapshots/<commit>/`` (``main`` first)."""
    try:
        repos = sorted(p for p in root.iterdir() if p.name.startswith("models--") and p.is_dir())
    except OSError:
        return
    for repo_dir in repos:
        repo_id = repo_dir.name.removeprefix("models--").replace("--", "/", 1)
        snapshots = repo_dir / "snapshots"
        try:
            main = (repo_dir / "refs" / "main").read_text(encoding="utf-8").strip()
        except OSError:
            main = ""
        try:
            commits = sorted(
                (p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.name != main
            )
        except OSError:
            continue
        for snapshot in commits:
            for folder, names in walk_gguf(snapshot):
                for parts, projectors, error in group_folder(folder, names):
                    rel = parts[0].relative_to(snapshot).as_posix()
                    yield Found(source, root, parts, projectors, repo_id, rel, error)


def find_two_level(root: Path, source: Source) -> Iterator[Found]:
    """LM Studio: ``<root>/<publisher>/<repo>/<file>.gguf``."""
    for folder, names in walk_gguf(root):
        rel_folder = folder.relative_to(root).parts
        repo_id = "/".join(rel_folder[:2]) if len(rel_folder) >= 2 else None
        base = root / Path(*rel_folder[:2]) if len(rel_folder) >= 2 else root
        for parts, projectors, error in group_folder(folder, names):
            rel = parts[0].relative_to(base).as_posix()
            yield Found(source, root, parts, projectors, repo_id, rel, error)


def find_plain(root: Path, source: Source) -> Iterator[Found]:
    """Any folder: every model under it, named by its file."""
    for folder, names in walk_gguf(root):
        for parts, projectors, error in group_folder(folder, names):
            rel = parts[0].relative_to(root).as_posix()
            yield Found(source, root, parts, projectors, None, rel, error)


def found_for_file(candidate: Path) -> Found:
    """The model a file path names (with the split parts and projectors in its folder)."""
    real = candidate.resolve()
    found = Found("folder", candidate.parent, [candidate], [], None, candidate.name)
    for parts, projectors, error in group_folder(
        candidate.parent, [p.name for p in candidate.parent.iterdir()]
    ):
        if any(p.resolve() == real for p in parts):
            found = Found("folder", candidate.parent, parts, projectors, None, parts[0].name, error)
    return found
