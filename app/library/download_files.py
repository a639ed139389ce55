"""A download's files on disk: checksums, free space, and installing verified files.

A file is hashed while it arrives (:class:`Hashing`: the Hub's LFS sha256, or git's blob sha1
for small files) and compared with the Hub's before it may become a model. Installing moves it
atomically to ``models/<owner>/<repo>/<filename>`` and records it in that folder's
``.ember.json``; a partial, failed or unverified file never appears in ``models/``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from app.engine.gguf_format import human_bytes
from app.library.download_state import (
    DownloadError,
    InsufficientSpaceError,
    Job,
    Part,
    StateFiles,
)
from app.library.hub import (
    RemoteFile,
    RepoIndex,
    group_gguf_files,
    safe_repo_path,
    validate_repo_id,
)
from app.library.manifest import now_iso, update_manifest
from app.library.quant import split_name

_CHUNK_REHASH: Final = 8 * 1024 * 1024
_DISK_RESERVE: Final = 16 * 1024 * 1024


class Hashing:
    """The running checksum of a part: sha256 for LFS files, git's blob sha1 otherwise."""

    def __init__(self, part: Part) -> None:
        self.kind = "sha256" if part.sha256 else "git-sha1"
        self.expected = part.sha256 or part.blob_id
        self.size = part.size
        self.reset()

    def reset(self) -> None:
        if self.kind == "sha256":
            self.h = hashlib.sha256()
        else:
            self.h = hashlib.sha1(b"blob %d\0" % self.size, usedforsecurity=False)
        self.count = 0

    def update(self, data: bytes) -> None:
        self.h.update(data)
        self.count += len(data)

    def matches(self) -> bool:
        return self.expected is not None and self.h.hexdigest() == self.expected.lower()


def rehash(path: Path, hashing: Hashing, check: Callable[[], None]) -> None:
    """Hash the bytes already on disk (hashlib state cannot be saved across runs); ``check``
    runs between chunks and raises to stop."""
    hashing.reset()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK_REHASH):
            check()
            hashing.update(chunk)


def target_path(models_dir: Path, repo_id: str, filename: str) -> Path:
    """``models/<owner>/<repo>/<filename>``, proven to be inside ``models/``."""
    validate_repo_id(repo_id)
    rel = safe_repo_path(filename)
    root = models_dir.resolve()
    target = root.joinpath(*repo_id.split("/"), *rel.parts)
    if not target.resolve().is_relative_to(root):
        raise DownloadError(f"Refusing to write {filename}: it would land outside {root}.")
    return target


def parts_for(job: Job, index: RepoIndex, files: StateFiles) -> list[Part]:
    """The parts of ``job`` in the repository ``index``: the files it asked for, or a split
    model's whole group. A part whose size and checksum are unchanged keeps what has arrived
    (and its ETag); a changed one starts again."""
    names = list(job.request)
    missing = [n for n in names if n not in index.files]
    if missing:
        raise DownloadError(f"{job.repo_id} has no file {missing[0]}.")
    if job.expand and split_name(names[0]) is not None:
        models, _ = group_gguf_files(list(index.files.values()))
        group = next((m for m in models if names[0] in m.filenames), None)
        if group is not None:
            if not group.is_complete:
                raise DownloadError(
                    f"{names[0]} is part of a split model whose other parts are missing on the Hub."
                )
            names = list(group.filenames)
    old = {p.filename: p for p in job.parts}
    parts = []
    for name in names:
        safe_repo_path(name)
        remote = index.files[name]
        part = Part(remote.filename, remote.size, remote.sha256, remote.blob_id)
        previous = old.get(name)
        if previous and (previous.sha256, previous.size) == (part.sha256, part.size):
            part.etag, part.verified = previous.etag, previous.verified
        else:
            files.part_path(job, part).unlink(missing_ok=True)
        files.measure(job, part)
        parts.append(part)
    return parts


def verified_on_disk(
    parts: Sequence[Part | RemoteFile], targets: list[Path], manifest: dict[str, dict[str, Any]]
) -> bool:
    """Whether every part is already at its target with the size and checksum the Hub has
    now (as recorded in the repository's ``manifest`` when it was installed)."""
    if not targets:
        return False
    for part, target in zip(parts, targets, strict=True):
        entry = manifest.get(part.filename, {})
        try:
            size = target.stat().st_size
        except OSError:
            return False
        expected = part.sha256 or part.blob_id
        if size != part.size or not expected or entry.get("sha256") != expected:
            return False
    return True


def check_space(downloads_dir: Path, models_dir: Path, job: Job) -> None:
    """Raise :class:`InsufficientSpaceError` unless what is left of ``job`` fits on the disk
    (and, when ``models/`` is on another disk, the whole model fits there too)."""
    remaining = sum(p.size - p.done for p in job.parts if not p.verified)
    total = sum(p.size for p in job.parts)
    downloads_dir.mkdir(parents=True, exist_ok=True)
    models_dir.mkdir(parents=True, exist_ok=True)
    checks = [(downloads_dir, remaining)]
    if os.stat(downloads_dir).st_dev != os.stat(models_dir).st_dev:
        checks.append((models_dir, total))  # moved across disks: a copy
    name = job.parts[0].filename if job.parts else job.repo_id
    for folder, needed in checks:
        free = shutil.disk_usage(folder).free
        if needed + _DISK_RESERVE > free:
            raise InsufficientSpaceError(
                f"Not enough disk space for {name}: it needs {human_bytes(needed)} more but "
                "only "
                f"{human_bytes(free)} is free on {folder}. Free some space, then press Retry."
            )


def install(files: StateFiles, models_dir: Path, job: Job, targets: list[Path]) -> None:
    """Move every verified part of ``job`` into ``models/`` and record it in the manifest."""
    repo_dir = models_dir.joinpath(*job.repo_id.split("/"))
    for part, target in zip(job.parts, targets, strict=True):
        source = files.part_path(job, part)
        if source.exists() or not target.exists():  # else: moved before an interruption
            target.parent.mkdir(parents=True, exist_ok=True)
            move_into_place(source, target)
        entry = {
            "revision": job.revision,
            "commit": job.commit,
            "sha256": part.sha256 or part.blob_id,
            "size": part.size,
            "downloaded_at": now_iso(),
        }
        update_manifest(repo_dir, part.filename, entry, repo_id=job.repo_id)


def move_into_place(source: Path, target: Path) -> None:
    """Rename atomically; across disks, copy to a hidden temp name first, then rename."""
    with source.open("rb") as f:
        os.fsync(f.fileno())
    try:
        os.replace(source, target)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    tmp = target.with_name(f".{target.name}.ember-tmp")
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    source.unlink(missing_ok=True)
