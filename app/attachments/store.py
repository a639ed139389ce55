"""Attached files copied into EMBER_HOME, once per content.

``attachments/<sha256[:2]>/<sha256><suffix>`` under ``paths().home``: the same file attached
to ten conversations is stored once, and the user's file name never becomes part of a path
(a file named ``../../x`` is stored by its hash; only a plain short suffix is kept, so the
file still opens in its program). The copy is written to a temp file in the attachments
folder, hashed on the way, flushed and renamed into place: a crash leaves no half file
under a hash name.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from app.attachments.document import DEFAULT_LIMITS, CancelFlag, Job, Limits, Progress
from app.attachments.errors import AttachmentCancelledError, TooLargeError, UnreadableError
from app.attachments.opening import open_regular
from app.config import paths, private_dir
from app.engine.gguf_format import human_bytes

COPY_STEP = 1024 * 1024
_SAFE_SUFFIX = re.compile(r"^\.[a-z0-9]{1,10}$")


def attachments_dir() -> Path:
    """EMBER_HOME's attachments folder (re-read each call, as ``paths()`` is)."""
    return paths().home / "attachments"


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A file in the store. ``name`` is the user's file name, for display only."""

    path: Path
    sha256: str
    size: int
    name: str
    new: bool = True  # False when the same content was stored already


def stored_path(sha256: str, suffix: str = "") -> Path:
    """Where a file with this hash lives (``suffix`` as :func:`safe_suffix` made it)."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ValueError("not a sha256 hex digest")
    return attachments_dir() / sha256[:2] / f"{sha256}{safe_suffix(suffix)}"


def safe_suffix(suffix: str) -> str:
    """``suffix`` in lower case if it is a plain short one (``.pdf``), else ''."""
    suffix = suffix.lower()
    return suffix if _SAFE_SUFFIX.match(suffix) else ""


def store(
    path: Path | str,
    *,
    limits: Limits = DEFAULT_LIMITS,
    progress: Progress | None = None,
    cancel: CancelFlag | None = None,
) -> StoredFile:
    """Copy ``path`` into the store (or find it there already) and say where it is."""
    path = Path(path)
    job = Job(path.name, limits, progress, cancel)
    folder = private_dir(attachments_dir())
    fd, tmp = tempfile.mkstemp(prefix=".incoming.", suffix=".tmp", dir=folder)
    try:
        digest, size = _copy(path, fd, job)
        target = stored_path(digest, Path(path.name).suffix)
        new = not target.exists()
        if not new:
            os.unlink(tmp)  # the same content is stored already
        else:
            private_dir(target.parent)
            os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return StoredFile(target, digest, size, path.name, new)


def store_bytes(data: bytes, name: str) -> StoredFile:
    """Store bytes that have no file of their own (an image pasted from the clipboard) the way
    :func:`store` stores a file; ``name`` gives the suffix and the display name."""
    folder = private_dir(attachments_dir())
    digest = hashlib.sha256(data).hexdigest()
    target = stored_path(digest, Path(name).suffix)
    if target.exists():
        return StoredFile(target, digest, len(data), name, new=False)
    fd, tmp = tempfile.mkstemp(prefix=".incoming.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        private_dir(target.parent)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return StoredFile(target, digest, len(data), name)


def _copy(source: Path, fd: int, job: Job) -> tuple[str, int]:
    digest = hashlib.sha256()
    limit = job.limits.max_bytes
    with os.fdopen(fd, "wb") as out:
        try:
            with open_regular(source) as f:  # a FIFO or a device is refused before it is read
                total = os.fstat(f.fileno()).st_size
                if total > limit:
                    raise TooLargeError(job.name, human_bytes(total), human_bytes(limit))
                done = 0
                while chunk := f.read(COPY_STEP):
                    done += len(chunk)
                    if done > limit:
                        raise TooLargeError(
                            job.name, f"over {human_bytes(limit)}", human_bytes(limit)
                        )
                    digest.update(chunk)
                    out.write(chunk)
                    job.step(done, max(total, done))
        except (AttachmentCancelledError, TooLargeError):
            raise
        except OSError as e:
            raise UnreadableError(job.name, e.strerror or type(e).__name__) from e
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest(), done


def remove_stored(sha256: str, suffix: str = "") -> bool:
    """Delete a stored file (the caller knows nothing uses it any more); True if it was there."""
    target = stored_path(sha256, suffix)
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    return True
