"""Which model files are the same file reached by two paths: a download and the same GGUF
opened from another folder, a copy in LM Studio's folder, a hard link.

Two files are the same when they have the same size and the same content fingerprint: a
SHA-256 over the size and three 1 MiB samples (the start, which holds the header and the
metadata, the middle and the end). Only files whose sizes match are read, so a list of models
of different sizes reads nothing; files that are one on disk (a symlink, a hard link) are
known without reading. No Qt.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

SAMPLE = 1 << 20


def fingerprint(path: Path, size: int) -> str | None:
    """The file's content fingerprint (see the module docstring); None if it cannot be read."""
    digest = hashlib.sha256(str(size).encode())
    try:
        with path.open("rb") as f:
            for offset in sorted({0, max(0, size // 2 - SAMPLE // 2), max(0, size - SAMPLE)}):
                f.seek(offset)
                digest.update(f.read(SAMPLE))
    except OSError:
        return None
    return digest.hexdigest()


def group_same(
    files: Sequence[tuple[Path, int]],
    fingerprint: Callable[[Path, int], str | None] = fingerprint,
    hints: Sequence[Hashable] | None = None,
) -> list[list[int]]:
    """``files`` as (path, size) grouped into the same file: lists of indexes into ``files``,
    in the order of each group's first file. ``fingerprint`` may be a cached one; ``hints``
    (one per file), what is known already to tell files apart (their headers): files with
    different hints are never read."""
    keys: list[object] = []
    by_size: dict[Hashable, list[int]] = {}
    sizes = [(size, hints[i]) if hints else size for i, (_path, size) in enumerate(files)]
    for index, size in enumerate(sizes):
        by_size.setdefault(size, []).append(index)
    for index, (path, _size) in enumerate(files):
        if len(by_size[sizes[index]]) == 1:
            keys.append(("only", index))
            continue
        try:
            stat = os.stat(path)
            inode: object = ("inode", stat.st_dev, stat.st_ino)
        except OSError:
            keys.append(("unreadable", index))
            continue
        keys.append(inode)
    # Same size, different inodes: compare their content.
    for indexes in (ix for ix in by_size.values() if len(ix) > 1):
        firsts: dict[object, int] = {}
        for index in indexes:
            firsts.setdefault(keys[index], index)
        if len(firsts) > 1:
            for key, index in firsts.items():
                if isinstance(key, tuple) and key[0] == "inode":
                    found = fingerprint(files[index][0], files[index][1])
                    content = ("content", files[index][1], found) if found else key
                    for other in indexes:
                        if keys[other] == key:
                            keys[other] = content
    groups: dict[object, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return list(groups.values())
