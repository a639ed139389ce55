"""Downloads that never break: resumable, verified, several at once.

Threads: a :class:`DownloadManager` runs up to ``max_concurrent`` worker threads
(``ember-download-N``, started on first use). Its methods are thread-safe and never wait on the
network. Subscribers receive :class:`DownloadEvent` on whichever thread caused it (a worker, or
the caller of ``pause``/``cancel``/...): the GUI bridge re-emits them as Qt signals.

Events: ``added``; ``state`` on every state (or note) change, with exactly one final state per
attempt (``completed``, ``failed`` or ``cancelled``; ``retry`` starts a new attempt);
``progress`` at most ~10 times a second per download; ``removed``.

On disk: ``downloads/<id>.json`` (the state, written atomically) and ``downloads/<id>/*.part``.
A download resumes from its partial files with ``Range`` requests after a pause, a network
error, or the app being closed or killed (``restore()``). Downloads are pinned to the commit the
repository was at when they started, so every part and every resume reads the same file. Each
file's sha256 is computed while it arrives and compared with the Hub's LFS sha256; only then are
the files moved (atomically) to ``models/<owner>/<repo>/<filename>`` and recorded in that
folder's ``.ember.json``. A partial, failed or unverified file never appears in ``models/``.

HTTP is httpx (streaming, ``Range``/``If-Range``); huggingface_hub provides URLs, headers and the
token (``HF_TOKEN``). ``HF_ENDPOINT`` is read when a download starts.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from huggingface_hub import constants as hf_constants

from app.config import atomic_write_text
from app.engine.gguf import human_bytes
from app.library import hub
from app.library.hub import HubError, ModelFile, RemoteFile, Token, safe_repo_path, validate_repo_id
from app.library.local import now_iso, read_manifest, update_manifest
from app.library.quant import split_name

if TYPE_CHECKING:
    import httpx

# httpx and huggingface_hub's file_download are imported by the first download, not with this
# module: the app's window imports it and should not pay for them (tests/test_imports.py).

log = logging.getLogger(__name__)

_STATE_VERSION: Final = 1
_CHUNK_REHASH: Final = 8 * 1024 * 1024
_DISK_RESERVE: Final = 16 * 1024 * 1024
DEFAULT_BACKOFF: Final = (1.0, 2.0, 4.0, 8.0)


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


# --- internals -----------------------------------------------------------------------------


class _StopRequestedError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _RetryableError(Exception):
    """A transient failure (connection, timeout, 5xx): try again after a pause.

    ``final`` is the whole message to fail with when the tries run out (default: built from
    the reason)."""

    def __init__(self, reason: str, final: str | None = None) -> None:
        super().__init__(reason)
        self.final = final


@dataclass
class _Part:
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


class _Hashing:
    """The running checksum of a part: sha256 for LFS files, git's blob sha1 otherwise."""

    def __init__(self, part: _Part) -> None:
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


class _Speed:
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
class _Job:
    id: str
    repo_id: str
    revision: str
    request: tuple[str, ...]
    expand: bool  # a single name: download its whole split group
    state: DownloadState = DownloadState.QUEUED
    commit: str | None = None
    parts: list[_Part] = field(default_factory=list)
    error: str | None = None
    note: str | None = None
    interrupt: str | None = None
    active: bool = False
    paths: tuple[Path, ...] = ()
    created_at: str = field(default_factory=now_iso)
    wake: threading.Event = field(default_factory=threading.Event)
    speed: _Speed = field(default_factory=_Speed)
    last_progress: float = 0.0


# --- the manager ---------------------------------------------------------------------------


class DownloadManager:
    """Runs downloads on its own threads; see the module docstring for threads and events."""

    def __init__(
        self,
        models_dir: Path,
        downloads_dir: Path,
        max_concurrent: int = 3,
        token: Token = None,
        endpoint: str | None = None,
        *,
        backoff: Sequence[float] = DEFAULT_BACKOFF,
        timeout: float = 30.0,
        progress_interval: float = 0.1,
    ) -> None:
        self.models_dir = Path(models_dir)
        self.downloads_dir = Path(downloads_dir)
        self.max_concurrent = max(1, max_concurrent)
        self._token = token
        self._endpoint = endpoint
        self._backoff = tuple(backoff)
        self._progress_interval = progress_interval
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._jobs: dict[str, _Job] = {}
        self._queue: deque[str] = deque()
        self._subscribers: list[Subscriber] = []
        self._workers: list[threading.Thread] = []
        self._stopping = False
        self._timeout = timeout
        self._client: httpx.Client | None = None  # made by the first download (_http)

    # public API ----------------------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Receive every :class:`DownloadEvent`; returns a function that unsubscribes."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def start(
        self,
        repo_id: str,
        filename_or_group: str | Sequence[str] | ModelFile,
        revision: str = "main",
    ) -> Download:
        """Queue a download of one file, a split model (any of its parts, or a ModelFile) or
        an explicit list of files. Returns at once; the repository is read on a worker.
        The same request while one is unfinished returns that one."""
        validate_repo_id(repo_id)
        if isinstance(filename_or_group, ModelFile):
            request, expand = filename_or_group.filenames, False
        elif isinstance(filename_or_group, str):
            request, expand = (filename_or_group,), True
        else:
            request, expand = tuple(filename_or_group), False
        if not request:
            raise ValueError("Name at least one file to download")
        for name in request:
            safe_repo_path(name)
        with self._lock:
            if self._stopping:
                raise RuntimeError("The download manager has been shut down")
            for job in self._jobs.values():
                same = job.repo_id == repo_id and job.revision == revision
                covered = job.request == request or request[0] in [p.filename for p in job.parts]
                if same and covered and not job.state.is_final:
                    return self._snapshot(job)
            job = _Job(uuid.uuid4().hex[:12], repo_id, revision, request, expand)
            self._jobs[job.id] = job
            self._save(job)
            self._enqueue(job)
            snap = self._snapshot(job)
        self._emit("added", job)
        return snap

    def pause(self, download_id: str) -> None:
        """Stop a queued or running download, keeping what has arrived."""
        with self._lock:
            job = self._job(download_id)
            if job.state == DownloadState.QUEUED and not job.active:
                self._dequeue(job)
                job.state = DownloadState.PAUSED
                self._save(job)
            elif job.active and job.state == DownloadState.DOWNLOADING:
                job.interrupt = "pause"
                job.wake.set()
                return
            else:
                return
        self._emit("state", job)

    def resume(self, download_id: str) -> None:
        """Continue a paused (or failed) download from where it stopped."""
        with self._lock:
            failed = self._job(download_id).state == DownloadState.FAILED
        if failed:
            self.retry(download_id)
            return
        with self._lock:
            job = self._job(download_id)
            if job.active and job.interrupt == "pause":  # not stopped yet: just keep going
                job.interrupt = None
                return
            if job.state != DownloadState.PAUSED or job.active:
                return
            job.state = DownloadState.QUEUED
            job.error = None
            self._save(job)
            self._enqueue(job)
        self._emit("state", job)

    def cancel(self, download_id: str) -> None:
        """Stop a download and delete its partial files."""
        with self._lock:
            job = self._job(download_id)
            if job.state.is_final and job.state != DownloadState.FAILED:
                return
            if job.active:
                job.interrupt = "cancel"
                job.wake.set()
                return
            self._dequeue(job)
            self._discard_files(job)
            job.state = DownloadState.CANCELLED
            job.note = job.error = None
        self._emit("state", job)

    def retry(self, download_id: str) -> None:
        """Start a failed or cancelled download again (re-reading the repository)."""
        with self._lock:
            job = self._job(download_id)
            if job.state not in (DownloadState.FAILED, DownloadState.CANCELLED) or job.active:
                return
            job.state = DownloadState.QUEUED
            job.error = job.note = None
            job.commit = None  # re-resolve: the file may have changed on the Hub
            self._save(job)
            self._enqueue(job)
        self._emit("state", job)

    def remove(self, download_id: str) -> None:
        """Forget a finished (completed, failed or cancelled) download."""
        with self._lock:
            job = self._job(download_id)
            if not job.state.is_final:
                raise ValueError("Only a finished download can be removed; cancel it first")
            if job.state == DownloadState.FAILED:
                self._discard_files(job)
            del self._jobs[download_id]
        self._emit("removed", job)

    def get(self, download_id: str) -> Download:
        with self._lock:
            return self._snapshot(self._job(download_id))

    def restore(self, auto_resume: bool = True) -> list[Download]:
        """Reload unfinished downloads from ``downloads_dir`` (after a restart or a kill).

        Those that were running or queued continue (or wait as paused, without
        ``auto_resume``); paused ones stay paused; failed ones stay failed, with their error.
        """
        restored: list[_Job] = []
        try:
            state_files = sorted(self.downloads_dir.glob("*.json"))
        except OSError:
            state_files = []
        for state_file in state_files:
            job = self._load(state_file)
            if job is None:
                continue
            with self._lock:
                if job.id in self._jobs or self._stopping:
                    continue
                self._jobs[job.id] = job
                if job.state == DownloadState.QUEUED:
                    if auto_resume:
                        self._enqueue(job)
                    else:
                        job.state = DownloadState.PAUSED
            restored.append(job)
            self._emit("added", job)
        with self._lock:
            return [self._snapshot(j) for j in restored]

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop all threads quickly. Partial files and state stay for ``restore()``."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            for job in self._jobs.values():
                if job.active:
                    job.interrupt = "shutdown"
                    job.wake.set()
            self._cond.notify_all()
            workers = list(self._workers)
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> DownloadManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # bookkeeping ---------------------------------------------------------------------------

    def _job(self, download_id: str) -> _Job:
        job = self._jobs.get(download_id)
        if job is None:
            raise KeyError(f"No download {download_id!r}")
        return job

    def _enqueue(self, job: _Job) -> None:
        if job.id not in self._queue:
            self._queue.append(job.id)
        self._ensure_workers()
        self._cond.notify()

    def _dequeue(self, job: _Job) -> None:
        with contextlib.suppress(ValueError):
            self._queue.remove(job.id)

    def _ensure_workers(self) -> None:
        self._workers = [w for w in self._workers if w.is_alive()]
        busy = sum(1 for j in self._jobs.values() if j.active)
        wanted = min(self.max_concurrent, len(self._queue) + busy)
        while len(self._workers) < wanted:
            worker = threading.Thread(
                target=self._worker_loop,
                name=f"ember-download-{len(self._workers) + 1}",
                daemon=True,
            )
            self._workers.append(worker)
            worker.start()

    def _snapshot(self, job: _Job) -> Download:
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

    def _emit(self, kind: EventKind, job: _Job) -> None:
        with self._lock:
            event = DownloadEvent(kind, self._snapshot(job))
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(event)
            except Exception:
                log.exception("A download subscriber failed")

    def _state_file(self, job: _Job) -> Path:
        return self.downloads_dir / f"{job.id}.json"

    def _part_path(self, job: _Job, part: _Part) -> Path:
        digest = hashlib.sha1(part.filename.encode(), usedforsecurity=False).hexdigest()[:16]
        return self.downloads_dir / job.id / f"{digest}.part"

    def _save(self, job: _Job) -> None:
        state = job.state
        if state.is_final and state != DownloadState.FAILED:
            self._state_file(job).unlink(missing_ok=True)
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
            atomic_write_text(self._state_file(job), json.dumps(data, indent=1))
        except OSError as e:
            log.warning("Could not save the state of download %s: %s", job.id, e)

    def _load(self, state_file: Path) -> _Job | None:
        try:
            data = json.loads(state_file.read_text(encoding="utf-8"))
            if data.get("version") != _STATE_VERSION or data["id"] != state_file.stem:
                raise ValueError("unknown version")
            request = tuple(str(n) for n in data["request"])
            validate_repo_id(data["repo_id"])
            for name in request:
                safe_repo_path(name)
            job = _Job(
                data["id"], data["repo_id"], str(data["revision"]), request, bool(data["expand"])
            )
            job.commit = data.get("commit")
            job.created_at = data.get("created_at") or job.created_at
            job.error = data.get("error")
            for item in data.get("parts", []):
                safe_repo_path(item["filename"])
                part = _Part(
                    item["filename"], int(item["size"]), item.get("sha256"), item.get("blob_id"),
                    item.get("etag"), bool(item.get("verified")),
                )  # fmt: skip
                job.parts.append(part)
            saved = data.get("state")
            job.state = (
                DownloadState(saved) if saved in ("paused", "failed") else DownloadState.QUEUED
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("Ignoring the unreadable download state %s: %s", state_file, e)
            return None
        for part in job.parts:
            with contextlib.suppress(OSError):
                part.done = min(part.size, self._part_path(job, part).stat().st_size)
        return job

    def _remove_partials(self, job: _Job) -> None:
        shutil.rmtree(self.downloads_dir / job.id, ignore_errors=True)
        self._state_file(job).unlink(missing_ok=True)

    def _discard_files(self, job: _Job) -> None:
        self._remove_partials(job)
        for part in job.parts:
            part.done, part.etag, part.verified = 0, None, False

    # the worker ------------------------------------------------------------------------------

    def _worker_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._queue:
                    self._cond.wait()
                if self._stopping:
                    return
                job = self._jobs.get(self._queue.popleft())
                if job is None or job.state != DownloadState.QUEUED:
                    continue
                job.state = DownloadState.DOWNLOADING
                job.active = True
                job.interrupt = None
                job.wake.clear()
                job.speed.reset()
            self._emit("state", job)
            try:
                self._run(job)
            except _StopRequestedError:
                self._on_interrupted(job)
            except (DownloadError, HubError, ValueError) as e:
                self._finish(job, DownloadState.FAILED, str(e))
            except Exception as e:
                log.exception("Download %s failed unexpectedly", job.id)
                self._finish(job, DownloadState.FAILED, f"Unexpected error: {e}")
            finally:
                with self._lock:
                    job.active = False

    def _on_interrupted(self, job: _Job) -> None:
        # The current flag, not the one that stopped the worker: a resume or cancel may
        # have arrived since.
        with self._lock:
            reason, job.interrupt, job.note, job.active = job.interrupt, None, None, False
            if reason == "cancel":
                self._discard_files(job)
                job.state = DownloadState.CANCELLED
            elif reason == "pause":
                job.state = DownloadState.PAUSED
                self._save(job)
            elif reason is None:  # resumed before the pause took effect
                job.state = DownloadState.QUEUED
                self._enqueue(job)
            else:  # shutdown: "queued" on disk, so restore() continues it
                job.state = DownloadState.QUEUED
                self._save(job)
                return
        self._emit("state", job)

    def _finish(self, job: _Job, state: DownloadState, error: str | None = None) -> None:
        with self._lock:
            stopping = job.interrupt is not None and state == DownloadState.FAILED
            if not stopping:
                job.active = False
                job.state = state
                job.error = error
                job.note = None
                self._save(job)
        if stopping:  # an error caused by stopping (the client closed at shutdown) is not one
            self._on_interrupted(job)
            return
        if error:
            log.warning("Download %s of %s failed: %s", job.id, job.repo_id, error)
        self._emit("state", job)

    def _check(self, job: _Job) -> None:
        reason = job.interrupt
        if reason is not None:
            raise _StopRequestedError(reason)

    def _run(self, job: _Job) -> None:
        if hf_constants.is_offline_mode():
            raise DownloadError(
                "Hub access is switched off (HF_HUB_OFFLINE is set); unset it to download."
            )
        if job.commit is None or not job.parts:
            self._resolve(job)
        targets = [self._target(job.repo_id, p.filename) for p in job.parts]
        if self._already_there(job, targets):
            with self._lock:
                job.paths = tuple(targets)
                for part in job.parts:
                    part.verified = True
            self._remove_partials(job)
            self._finish(job, DownloadState.COMPLETED)
            return
        self._check_space(job)
        for part in job.parts:
            if not part.verified:
                self._download_part(job, part)
        with self._lock:
            job.state = DownloadState.VERIFYING
        self._emit("state", job)
        self._install(job, targets)
        self._finish(job, DownloadState.COMPLETED)

    def _resolve(self, job: _Job) -> None:
        """Read the repository: pin the commit, expand a split group, get sizes and sha256."""
        found: list[hub.RepoIndex] = []

        def read_index() -> None:
            try:
                found.append(
                    hub.repo_index(
                        job.repo_id, job.revision, endpoint=self._endpoint, token=self._token
                    )
                )
            except (hub.HubUnreachableError, hub.HubResponseError) as e:
                raise _RetryableError("the Hub did not answer", final=str(e)) from e

        self._with_retries(job, f"Reading {job.repo_id}", read_index)
        index = found[0]
        names = list(job.request)
        missing = [n for n in names if n not in index.files]
        if missing:
            raise DownloadError(f"{job.repo_id} has no file {missing[0]}.")
        if job.expand and split_name(names[0]) is not None:
            models, _ = hub.group_gguf_files(list(index.files.values()))
            group = next((m for m in models if names[0] in m.filenames), None)
            if group is not None:
                if not group.is_complete:
                    raise DownloadError(
                        f"{names[0]} is part of a split model whose other parts are missing "
                        "on the Hub."
                    )
                names = list(group.filenames)
        old = {p.filename: p for p in job.parts}
        parts = []
        for name in names:
            safe_repo_path(name)
            remote: RemoteFile = index.files[name]
            part = _Part(remote.filename, remote.size, remote.sha256, remote.blob_id)
            previous = old.get(name)
            if previous and (previous.sha256, previous.size) == (part.sha256, part.size):
                part.etag, part.verified = previous.etag, previous.verified
            else:
                self._part_path(job, part).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                part.done = min(part.size, self._part_path(job, part).stat().st_size)
            parts.append(part)
        with self._lock:
            job.commit = index.commit or job.revision
            job.parts = parts
            self._save(job)
        self._emit("progress", job)

    def _target(self, repo_id: str, filename: str) -> Path:
        """``models/<owner>/<repo>/<filename>``, proven to be inside ``models/``."""
        validate_repo_id(repo_id)
        rel = safe_repo_path(filename)
        root = self.models_dir.resolve()
        target = root.joinpath(*repo_id.split("/"), *rel.parts)
        if not target.resolve().is_relative_to(root):
            raise DownloadError(f"Refusing to write {filename}: it would land outside {root}.")
        return target

    def installed_path(self, repo_id: str, model: ModelFile) -> Path | None:
        """Where ``model`` (every part) already is in ``models/``, verified as the Hub has it
        now (size and sha256 recorded in the manifest); None when it needs downloading."""
        return self.installed_paths(repo_id, (model,)).get(model.filename)

    def installed_paths(self, repo_id: str, models: Iterable[ModelFile]) -> dict[str, Path]:
        """:meth:`installed_path` of many files of one repository, reading its manifest once:
        ``{filename: path}`` for those already in ``models/`` (a repository's file list asks
        about every file at once)."""
        manifest: dict[str, dict[str, Any]] | None = None
        found: dict[str, Path] = {}
        for model in models:
            targets = [self._target(repo_id, part.filename) for part in model.parts]
            if manifest is None:
                manifest = self._manifest(repo_id)
            if self._verified_on_disk(repo_id, model.parts, targets, manifest):
                found[model.filename] = targets[0]
        return found

    def _manifest(self, repo_id: str) -> dict[str, dict[str, Any]]:
        return read_manifest(self.models_dir.joinpath(*repo_id.split("/")))

    def _already_there(self, job: _Job, targets: list[Path]) -> bool:
        return self._verified_on_disk(job.repo_id, job.parts, targets)

    def _verified_on_disk(
        self,
        repo_id: str,
        parts: Sequence[_Part | RemoteFile],
        targets: list[Path],
        manifest: dict[str, dict[str, Any]] | None = None,
    ) -> bool:
        """``manifest``: the repository's, when the caller has read it already."""
        if not targets:
            return False
        if manifest is None:
            manifest = self._manifest(repo_id)
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

    def _check_space(self, job: _Job) -> None:
        remaining = sum(p.size - p.done for p in job.parts if not p.verified)
        total = sum(p.size for p in job.parts)
        self.downloads_dir.mkdir(parents=True, exist_ok=True)
        self.models_dir.mkdir(parents=True, exist_ok=True)
        checks = [(self.downloads_dir, remaining)]
        if os.stat(self.downloads_dir).st_dev != os.stat(self.models_dir).st_dev:
            checks.append((self.models_dir, total))  # moved across disks: a copy
        name = job.parts[0].filename if job.parts else job.repo_id
        for folder, needed in checks:
            free = shutil.disk_usage(folder).free
            if needed + _DISK_RESERVE > free:
                raise InsufficientSpaceError(
                    f"Not enough disk space for {name}: it needs {human_bytes(needed)} more but "
                    "only "
                    f"{human_bytes(free)} is free on {folder}. Free some space, then press Retry."
                )

    def _download_part(self, job: _Job, part: _Part) -> None:
        path = self._part_path(job, part)
        path.parent.mkdir(parents=True, exist_ok=True)
        hashing = _Hashing(part)
        if hashing.expected is None:
            raise DownloadError(
                f"The Hub gave no checksum for {part.filename}, so Ember cannot verify it."
            )
        self._with_retries(
            job,
            f"Downloading {part.filename}",
            lambda: self._fetch(job, part, path, hashing),
            progress=lambda: part.done,
        )
        if not hashing.matches():
            expected = hashing.expected or ""
            path.unlink(missing_ok=True)
            with self._lock:
                part.done, part.etag = 0, None
                self._save(job)
            raise DownloadError(
                f"{part.filename} arrived corrupted: its {hashing.kind} does not match the Hub's "
                f"({hashing.h.hexdigest()[:12]}… instead of {expected[:12]}…). The file was "
                "deleted; press Retry to download it again."
            )
        with self._lock:
            part.verified = True
            self._save(job)

    def _with_retries(
        self,
        job: _Job,
        what: str,
        attempt: Callable[[], None],
        progress: Callable[[], int] = lambda: 0,
    ) -> None:
        """Run ``attempt`` until it succeeds, backing off after each transient failure; the
        count starts again whenever an attempt made progress."""
        tries = 0
        while True:
            self._check(job)
            before = progress()
            try:
                attempt()
                break
            except _RetryableError as e:
                tries = 1 if progress() > before else tries + 1
                if tries > len(self._backoff):
                    raise DownloadError(
                        e.final
                        or f"{what} failed after {tries} tries: {e}. Check your connection, "
                        "then press Retry."
                    ) from e
                delay = self._backoff[tries - 1]
                total = len(self._backoff) + 1
                with self._lock:
                    job.note = f"{e}; retrying in {delay:g} s (try {tries + 1} of {total})"
                self._emit("state", job)
                log.info("Download %s: %s", job.id, job.note)
                job.wake.wait(delay)
        if job.note is not None:
            with self._lock:
                job.note = None

    def _rehash(self, job: _Job, path: Path, hashing: _Hashing) -> None:
        """Hash the bytes already on disk (hashlib state cannot be saved across runs)."""
        hashing.reset()
        with self._lock:
            job.note = "Checking the partial download"
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK_REHASH):
                self._check(job)
                hashing.update(chunk)
        with self._lock:
            job.note = None

    def _http(self) -> httpx.Client:
        """The HTTP client the downloads share, made on first use."""
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    follow_redirects=True,
                    timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 15.0)),
                    limits=httpx.Limits(max_connections=self.max_concurrent * 2),
                )
            return self._client

    def _fetch(self, job: _Job, part: _Part, path: Path, hashing: _Hashing) -> None:
        """One HTTP attempt: continue ``path`` up to ``part.size`` bytes."""
        import httpx
        from huggingface_hub import hf_hub_url

        offset = path.stat().st_size if path.exists() else 0
        if offset > part.size:
            path.unlink()
            offset = 0
        if hashing.count != offset:
            if offset:
                self._rehash(job, path, hashing)
            else:
                hashing.reset()
        part.done = offset
        if offset == part.size:
            return
        headers = hub.hub_headers(self._token)
        headers["Accept-Encoding"] = "identity"
        if offset:
            headers["Range"] = f"bytes={offset}-"
            if part.etag and not part.etag.startswith("W/"):
                headers["If-Range"] = part.etag
        endpoint = hub.hub_endpoint(self._endpoint)
        url = hf_hub_url(
            job.repo_id, part.filename, revision=job.commit or job.revision, endpoint=endpoint
        )
        try:
            with self._http().stream("GET", url, headers=headers) as response:
                if response.status_code == 416:  # the server's file is shorter than our part
                    path.unlink(missing_ok=True)
                    hashing.reset()
                    part.done = 0
                    raise _RetryableError("the server could not resume; starting the file again")
                offset = self._accept(job, part, response, offset, "authorization" in headers)
                mode = "ab" if offset else "wb"
                if not offset:
                    hashing.reset()
                    part.done = 0
                with path.open(mode) as out:
                    for chunk in response.iter_raw():
                        self._check(job)
                        if part.done + len(chunk) > part.size:
                            raise _RetryableError("the server sent more bytes than the file has")
                        out.write(chunk)
                        hashing.update(chunk)
                        part.done += len(chunk)
                        self._progress(job)
        except httpx.TimeoutException as e:
            raise _RetryableError("the Hub stopped answering") from e
        except httpx.TransportError as e:
            raise _RetryableError(f"the connection failed ({e or type(e).__name__})") from e
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise InsufficientSpaceError(
                    f"The disk filled up while downloading {part.filename}. Free some space, "
                    "then press Retry."
                ) from e
            raise DownloadError(f"Cannot write {path}: {e.strerror or e}") from e
        if part.done < part.size:
            raise _RetryableError("the connection closed early")

    def _accept(
        self, job: _Job, part: _Part, response: httpx.Response, offset: int, token_sent: bool
    ) -> int:
        """Check a response; returns the offset its body starts at."""
        status = response.status_code
        if status in (200, 206):
            etag = response.headers.get("ETag")
            if etag and etag != part.etag:
                with self._lock:
                    part.etag = etag
                    self._save(job)
        if status == 206:
            start, total = _content_range(response.headers.get("Content-Range"))
            if total is not None and total != part.size:
                raise DownloadError(
                    f"{part.filename} changed on the Hub while downloading. Press Retry to "
                    "start again."
                )
            if start != offset:
                raise _RetryableError("the server resumed at the wrong place")
            return offset
        if status == 200:
            if offset:
                log.info(
                    "Download %s: the server sent all of %s again; restarting it",
                    job.id,
                    part.filename,
                )
            return 0
        message = self._http_error(job, response, token_sent)
        if status in (408, 429) or status >= 500:
            raise _RetryableError(message)
        raise DownloadError(message)

    def _http_error(self, job: _Job, response: httpx.Response, token_sent: bool) -> str:
        status = response.status_code
        endpoint = hub.hub_endpoint(self._endpoint)
        code = response.headers.get("X-Error-Code")
        if code == "GatedRepo":
            return hub.gated_message(job.repo_id, endpoint, token_sent, status)
        if status in (401, 403):
            if (
                response.headers.get("X-Error-Message")
                == "Invalid credentials in Authorization header"
            ):
                return (
                    "The Hub rejected your Hugging Face token (401). Check HF_TOKEN and try again."
                )
            if code == "RepoNotFound":
                hint = (
                    ""
                    if token_sent
                    else " If it is private, set HF_TOKEN to a token that can see it."
                )
                return f"There is no repository {job.repo_id} on the Hub.{hint}"
            if token_sent:
                return (
                    f"Your Hugging Face token is not allowed to download from {job.repo_id} "
                    f"({status})."
                )
            return (
                f"{job.repo_id} needs a Hugging Face token ({status}): set HF_TOKEN and try again."
            )
        if status == 404:
            return f"The file is not on the Hub any more ({job.repo_id}, 404)."
        if status == 429:
            return "the Hub is rate-limiting downloads (429)"
        if status >= 500:
            return f"the Hub answered {status}"
        return f"The Hub answered {status} for a file of {job.repo_id}."

    def _progress(self, job: _Job) -> None:
        now = time.monotonic()
        with self._lock:
            done = sum(p.size if p.verified else p.done for p in job.parts)
            job.speed.add(now, done)
            if now - job.last_progress < self._progress_interval:
                return
            job.last_progress = now
        self._emit("progress", job)

    def _install(self, job: _Job, targets: list[Path]) -> None:
        """Move every verified part into ``models/`` and record it in the manifest."""
        repo_dir = self.models_dir.joinpath(*job.repo_id.split("/"))
        for part, target in zip(job.parts, targets, strict=True):
            source = self._part_path(job, part)
            if source.exists() or not target.exists():  # else: moved before an interruption
                target.parent.mkdir(parents=True, exist_ok=True)
                _move_into_place(source, target)
            entry = {
                "revision": job.revision,
                "commit": job.commit,
                "sha256": part.sha256 or part.blob_id,
                "size": part.size,
                "downloaded_at": now_iso(),
            }
            update_manifest(repo_dir, part.filename, entry, repo_id=job.repo_id)
        with self._lock:
            job.paths = tuple(targets)
        self._remove_partials(job)

    # last, so `list` below does not shadow the builtin in annotations above
    def list(self) -> list[Download]:
        """Every download, oldest first."""
        with self._lock:
            return [self._snapshot(j) for j in self._jobs.values()]


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """``bytes 100-199/1000`` -> (100, 1000)."""
    if not value or not value.startswith("bytes "):
        return None, None
    span, _, total = value[6:].partition("/")
    start = span.split("-", 1)[0]
    return (int(start) if start.isdigit() else None, int(total) if total.isdigit() else None)


def _move_into_place(source: Path, target: Path) -> None:
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
