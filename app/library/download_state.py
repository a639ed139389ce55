"""What a download is: its public snapshot and events, its parts, and its state file.

On disk a download is ``downloads/<id>.json`` (written atomically; see :class:`StateFiles`) and
``downloads/<id>/*.part``. The state file keeps what is needed to resume after a restart or a
kill: the repository, the commit it is pinned to, each part's size, checksum and ETag.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal

from app.config import atomic_write_text
from app.library.hub import safe_repo_path, validate_repo_id
from app.library.manifest import now_iso

log = logging.getLogger(__name__)

_STATE_VERSION: Final = 1


class DownloadState(StrEnum):
    QUEUED = "queued"
    DOWNLOADING = "downloading"
    PAUSED = "paused"
    VERIFYING = "verifying"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (DownloadState.COMPLETED, DownloadState.FAILED, DownloadState.CANCELLED)


class DownloadError(Exception):
    """Why a download failed, for the user."""


class InsufficientSpaceError(DownloadError):
    """Not enough free disk space to finish the download."""


class StopRequestedError(Exception):
    """Raised on a download's thread once it is asked to stop (``reason``: pause, cancel or
    shutdown)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RetryableError(Exception):
    """A transient failure (connection, timeout, 5xx): try again after a pause.

    ``final`` is the whole message to fail with when the tries run out (default: built from
    the reason)."""

    def __init__(self, reason: str, final: str | None = None) -> None:
        super().__init__(reason)
        self.final = final


@dataclass(frozen=True, slots=True)
class Download:
    """A snapshot of one download (a split model is one download of several files).

    ``speed`` is smoothed bytes/s, ``eta`` seconds (None when unknown); ``paths`` are the
    model files once completed; ``note`` is a transient remark ("retrying in 2 s ...").
    """

    id: str
    repo_id: str
    revision: str
    filenames: tuple[str, ...]
    state: DownloadState
    total_bytes: int
    done_bytes: int
    speed: float
    eta: float | None
    error: str | None
    note: str | None
    commit: str | None
    paths: tuple[Path, ...]

    @property
    def filename(self) -> str:
        """The first file (the one to load); "" until the repository has been read."""
        return self.filenames[0] if self.filenames else ""

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 0.0


EventKind = Literal["added", "state", "progress", "removed"]


@dataclass(frozen=True, slots=True)
class DownloadEvent:
    kind: EventKind
    download: Download


Subscriber = Callable[[DownloadEvent], None]


@dataclass
class Part:
    """One file of a download: what the Hub says it is, and how much of it is here."""

    filename: str
    size: int
    sha256: str | None
    blob_id: str | None
    etag: str | None = None
    verified: bool = False
    done: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "size": self.size,
            "sha256": self.sha256,
            "blob_id": self.blob_id,
            "etag": self.etag,
            "verified": self.verified,
        }


class Speed:
    """Bytes/s over the last few seconds, smoothed."""

    WINDOW: Final = 3.0

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()
        self.rate = 0.0

    def add(self, now: float, total: int) -> None:
        self.samples.append((now, total))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.WINDOW:
            self.samples.popleft()
        t0, b0 = self.samples[0]
        if now - t0 >= 0.2:
            current = (total - b0) / (now - t0)
            self.rate = current if self.rate == 0 else 0.7 * self.rate + 0.3 * current

    def reset(self) -> None:
        self.samples.clear()
        self.rate = 0.0


@dataclass
class Job:
    """A download as the manager tracks it; guarded by the manager's lock."""

    id: str
    repo_id: str
    revision: str
    request: tuple[str, ...]
    expand: bool  # a single name: download its whole split group
    state: DownloadState = DownloadState.QUEUED
    commit: str | None = None
    parts: list[Part] = field(default_factory=list)
    error: str | None = None
    note: str | None = None
    interrupt: str | None = None
    active: bool = False
    paths: tuple[Path, ...] = ()
    created_at: str = field(default_factory=now_iso)
    wake: threading.Event = field(default_factory=threading.Event)
    speed: Speed = field(default_factory=Speed)
    last_progress: float = 0.0


class StateFiles:
    """A download's files under ``downloads_dir``: its state file and its partial files."""

    def __init__(self, downloads_dir: Path) -> None:
        self.downloads_dir = downloads_dir

    def state_file(self, job: Job) -> Path:
        return self.downloads_dir / f"{job.id}.json"

    def part_path(self, job: Job, part: Part) -> Path:
        digest = hashlib.sha1(part.filename.encode(), usedforsecurity=False).hexdigest()[:16]
        return self.downloads_dir / job.id / f"{digest}.part"

    def all(self) -> list[Path]:
        """Every state file, oldest id first; none when the folder cannot be read."""
        try:
            return sorted(self.downloads_dir.glob("*.json"))
        except OSError:
            return []

    def save(self, job: Job) -> None:
        """Write the state (a finished download, unless failed, has none). A running download
        is saved as "queued", so that restoring it continues it."""
        state = job.state
        if state.is_final and state != DownloadState.FAILED:
            self.state_file(job).unlink(missing_ok=True)
            return
        data = {
            "version": _STATE_VERSION,
            "id": job.id,
            "repo_id": job.repo_id,
            "revision": job.revision,
            "commit": job.commit,
            "request": list(job.request),
            "expand": job.expand,
            "state": "queued"
            if state in (DownloadState.DOWNLOADING, DownloadState.VERIFYING)
            else state.value,
            "error": job.error,
            "created_at": job.created_at,
            "parts": [p.to_json() for p in job.parts],
        }
        try:
            atomic_write_text(self.state_file(job), json.dumps(data, indent=1))
        except OSError as e:
            log.warning("Could not save the state of download %s: %s", job.id, e)

    def load(self, state_file: Path) -> Job | None:
        """The download a state file describes, with how much of each part is on disk; None
        (and a warning in the log) when the file is unreadable or names unsafe paths."""
        try:
            data = json.loads(state_file.read_text(encoding="utf-8"))
            if data.get("version") != _STATE_VERSION or data["id"] != state_file.stem:
                raise ValueError("unknown version")
            request = tuple(str(n) for n in data["request"])
            validate_repo_id(data["repo_id"])
            for name in request:
                safe_repo_path(name)
            job = Job(
                data["id"], data["repo_id"], str(data["revision"]), request, bool(data["expand"])
            )
            job.commit = data.get("commit")
            job.created_at = data.get("created_at") or job.created_at
            job.error = data.get("error")
            for item in data.get("parts", []):
                safe_repo_path(item["filename"])
                part = Part(
                    item["filename"],
                    int(item["size"]),
                    item.get("sha256"),
                    item.get("blob_id"),
                    item.get("etag"),
                    bool(item.get("verified")),
                )
                job.parts.append(part)
            saved = data.get("state")
            job.state = (
                DownloadState(saved) if saved in ("paused", "failed") else DownloadState.QUEUED
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("Ignoring the unreadable download state %s: %s", state_file, e)
            return None
        for part in job.parts:
            self.measure(job, part)
        return job

    def measure(self, job: Job, part: Part) -> None:
        """Set ``part.done`` to the bytes of it already on disk."""
        with contextlib.suppress(OSError):
            part.done = min(part.size, self.part_path(job, part).stat().st_size)

    def remove_partials(self, job: Job) -> None:
        shutil.rmtree(self.downloads_dir / job.id, ignore_errors=True)
        self.state_file(job).unlink(missing_ok=True)

    def discard(self, job: Job) -> None:
        """Delete what has arrived: the download starts from nothing next time."""
        self.remove_partials(job)
        for part in job.parts:
            part.done, part.etag, part.verified = 0, None, False


def snapshot(job: Job) -> Download:
    """The public view of ``job`` (call with the manager's lock held)."""
    total = sum(p.size for p in job.parts)
    done = sum(p.size if p.verified else p.done for p in job.parts)
    speed = job.speed.rate if job.state == DownloadState.DOWNLOADING else 0.0
    eta = (total - done) / speed if speed > 0 and total else None
    filenames = tuple(p.filename for p in job.parts) or job.request
    return Download(
        id=job.id,
        repo_id=job.repo_id,
        revision=job.revision,
        filenames=filenames,
        state=job.state,
        total_bytes=total,
        done_bytes=done,
        speed=speed,
        eta=eta,
        error=job.error,
        note=job.note,
        commit=job.commit,
        paths=job.paths,
    )
