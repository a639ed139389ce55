"""Bringing a GGUF file into Ember's models folder: ``@imported/<name>/``, as a copy or a
link to the original (all parts of a split model, and an optional projector), each recorded
in the folder's manifest. What "Import" in the app and :meth:`Library.import_file` do. No Qt.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Literal

from app.engine.gguf import read_gguf
from app.library.gguf_folders import IMPORTED_DIR
from app.library.local_model import LibraryError
from app.library.manifest import now_iso, update_manifest
from app.library.quant import model_stem, split_name


def import_files(
    models_dir: Path,
    path: Path | str,
    mode: Literal["copy", "link"] = "copy",
    projector: Path | str | None = None,
) -> Path:
    """Copy or link ``path`` (all its parts, if split) and ``projector`` into
    ``models_dir/@imported/<name>/``; returns where the first part now is. A link is a
    symlink, or a hard link where symlinks are not allowed (Windows without admin)."""
    if mode not in ("copy", "link"):
        raise ValueError("mode must be 'copy' or 'link'")
    src = Path(path).expanduser()
    if not src.is_file():
        raise LibraryError(f"There is no file at {src}.")
    if not src.name.lower().endswith(".gguf"):
        raise LibraryError(f"{src.name} is not a .gguf file; Ember imports GGUF models.")
    read_gguf(src)  # a clear GGUFError now beats a broken entry later
    sources = parts_of(src)
    if projector is not None:
        sources.append(Path(projector).expanduser())
    dest_dir = models_dir / IMPORTED_DIR / model_stem(src.name)
    existing = [
        dest_dir / s.name
        for s in sources
        if (dest_dir / s.name).exists() or (dest_dir / s.name).is_symlink()
    ]
    if existing:
        raise LibraryError(
            f"{src.name} is already imported ({existing[0]}); delete it first to import it again."
        )
    dest_dir.mkdir(parents=True, exist_ok=True)
    done: list[Path] = []
    try:
        for s in sources:
            target = dest_dir / s.name
            if mode == "copy":
                _copy_atomic(s, target)
            else:
                _link(s, target)
            done.append(target)
            entry = {"imported_from": str(s.resolve()), "mode": mode, "imported_at": now_iso()}
            update_manifest(dest_dir, s.name, entry)
    except BaseException:
        for target in done:
            target.unlink(missing_ok=True)
            update_manifest(dest_dir, target.name, None)
        with contextlib.suppress(OSError):
            dest_dir.rmdir()
        raise
    return dest_dir / sources[0].name


def parts_of(src: Path) -> list[Path]:
    """Every part of the split model ``src`` belongs to (``[src]`` when it is not split)."""
    split = split_name(src.name)
    if split is None:
        return [src]
    parts = []
    for i in range(1, split.count + 1):
        part = src.with_name(f"{split.base}-{i:05d}-of-{split.count:05d}.gguf")
        if not part.is_file():
            raise LibraryError(f"{src.name} is part of a split model, but {part.name} is missing.")
        parts.append(part)
    return parts


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
