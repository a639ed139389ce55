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
repository was at when they started, so every part and every resume reads the same file. A
file becomes a model in ``models/<owner>/<repo>/`` only once its sha256 matches the Hub's.

This module schedules downloads and runs each one's steps; the steps live next to it:
:mod:`~app.library.download_state` (snapshots, events, state files),
:mod:`~app.library.download_http` (range requests, retries) and
:mod:`~app.library.download_files` (checksums, disk space, installing). HTTP is httpx;
huggingface_hub provides URLs, headers and the token (``HF_TOKEN``). ``HF_ENDPOINT`` is read
when a download starts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from huggingface_hub import constants as hf_constants

from app.config import make_private_dirs
from app.library import hub, hub_errors
from app.library.download_files import (
    Hashing,
    check_space,
    install,
    parts_for,
    rehash,
    target_path,
    verified_on_disk,
)
from app.library.download_http import RangeRequest, fetch_range, with_retries
from app.library.download_state import (
    Download,
    DownloadError,
    DownloadEvent,
    DownloadState,
    EventKind,
    Job,
    Part,
    RetryableError,
    StateFiles,
    StopRequestedError,
    Subscriber,
    snapshot,
)
from app.library.hub import ModelFile, Token, safe_repo_path, validate_repo_id
from app.library.hub_errors import HubError
from app.library.manifest import read_manifest

if TYPE_CHECKING:
    import httpx

# httpx and huggingface_hub's file_download are imported by the first download, not with this
# module: the app's window imports it and should not pay for them (tests/test_imports.py).

__all__ = ["DEFAULT_BACKOFF", "DownloadManager"]

log = logging.getLogger(__name__)

DEFAULT_BACKOFF: Final = (1.0, 2.0, 4.0, 8.0)


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
        self._jobs: dict[str, Job] = {}
        self._queue: deque[str] = deque()
        self._subscribers: list[Subscriber] = []
        self._workers: list[threading.Thread] = []
        self._stopping = False
        self._timeout = timeout
        self._client: httpx.Client | None = None  # made by the first download (_http)
        self._files = StateFiles(self.downloads_dir)

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
                    return snapshot(job)
            job = Job(uuid.uuid4().hex[:12], repo_id, revision, request, expand)
            self._jobs[job.id] = job
            self._files.save(job)
            self._enqueue(job)
            snap = snapshot(job)
        self._emit("added", job)
        return snap

    def pause(self, download_id: str) -> None:
        """Stop a queued or running download, keeping what has arrived."""
        with self._lock:
            job = self._job(download_id)
            if job.state == DownloadState.QUEUED and not job.active:
                self._dequeue(job)
                job.state = DownloadState.PAUSED
                self._files.save(job)
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
            self._files.save(job)
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
            self._files.discard(job)
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
            self._files.save(job)
            self._enqueue(job)
        self._emit("state", job)

    def remove(self, download_id: str) -> None:
        """Forget a finished (completed, failed or cancelled) download."""
        with self._lock:
            job = self._job(download_id)
            if not job.state.is_final:
                raise ValueError("Only a finished download can be removed; cancel it first")
            if job.state == DownloadState.FAILED:
                self._files.discard(job)
            del self._jobs[download_id]
        self._emit("removed", job)

    def get(self, download_id: str) -> Download:
        with self._lock:
            return snapshot(self._job(download_id))

    def restore(self, auto_resume: bool = True) -> list[Download]:
        """Reload unfinished downloads from ``downloads_dir`` (after a restart or a kill).

        Those that were running or queued continue (or wait as paused, without
        ``auto_resume``); paused ones stay paused; failed ones stay failed, with their error.
        """
        restored: list[Job] = []
        for state_file in self._files.all():
            job = self._files.load(state_file)
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
            return [snapshot(j) for j in restored]

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

    def _job(self, download_id: str) -> Job:
        job = self._jobs.get(download_id)
        if job is None:
            raise KeyError(f"No download {download_id!r}")
        return job

    def _enqueue(self, job: Job) -> None:
        if job.id not in self._queue:
            self._queue.append(job.id)
        self._ensure_workers()
        self._cond.notify()

    def _dequeue(self, job: Job) -> None:
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

    def _emit(self, kind: EventKind, job: Job) -> None:
        with self._lock:
            event = DownloadEvent(kind, snapshot(job))
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(event)
            except Exception:
                log.exception("A download subscriber failed")

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
            except StopRequestedError:
                self._on_interrupted(job)
            except (DownloadError, HubError, ValueError) as e:
                self._finish(job, DownloadState.FAILED, str(e))
            except Exception as e:
                log.exception("Download %s failed unexpectedly", job.id)
                self._finish(job, DownloadState.FAILED, f"Unexpected error: {e}")
            finally:
                with self._lock:
                    job.active = False

    def _on_interrupted(self, job: Job) -> None:
        # The current flag, not the one that stopped the worker: a resume or cancel may
        # have arrived since.
        with self._lock:
            reason, job.interrupt, job.note, job.active = job.interrupt, None, None, False
            if reason == "cancel":
                self._files.discard(job)
                job.state = DownloadState.CANCELLED
            elif reason == "pause":
                job.state = DownloadState.PAUSED
                self._files.save(job)
            elif reason is None:  # resumed before the pause took effect
                job.state = DownloadState.QUEUED
                self._enqueue(job)
            else:  # shutdown: "queued" on disk, so restore() continues it
                job.state = DownloadState.QUEUED
                self._files.save(job)
                return
        self._emit("state", job)

    def _finish(self, job: Job, state: DownloadState, error: str | None = None) -> None:
        with self._lock:
            stopping = job.interrupt is not None and state == DownloadState.FAILED
            if not stopping:
                job.active = False
                job.state = state
                job.error = error
                job.note = None
                self._files.save(job)
        if stopping:  # an error caused by stopping (the client closed at shutdown) is not one
            self._on_interrupted(job)
            return
        if error:
            log.warning("Download %s of %s failed: %s", job.id, job.repo_id, error)
        self._emit("state", job)

    def _check(self, job: Job) -> None:
        reason = job.interrupt
        if reason is not None:
            raise StopRequestedError(reason)

    def _run(self, job: Job) -> None:
        if hf_constants.is_offline_mode():
            raise DownloadError(
                "Hub access is switched off (HF_HUB_OFFLINE is set); unset it to download."
            )
        if job.commit is None or not job.parts:
            self._resolve(job)
        targets = [target_path(self.models_dir, job.repo_id, p.filename) for p in job.parts]
        if not verified_on_disk(job.parts, targets, self._manifest(job.repo_id)):
            check_space(self.downloads_dir, self.models_dir, job)
            for part in job.parts:
                if not part.verified:
                    self._download_part(job, part)
            with self._lock:
                job.state = DownloadState.VERIFYING
            self._emit("state", job)
            install(self._files, self.models_dir, job, targets)
        with self._lock:
            job.paths = tuple(targets)
            for part in job.parts:
                part.verified = True
        self._files.remove_partials(job)
        self._finish(job, DownloadState.COMPLETED)

    def _resolve(self, job: Job) -> None:
        """Read the repository: pin the commit, expand a split group, get sizes and sha256."""
        found: list[hub.RepoIndex] = []

        def read_index() -> None:
            try:
                found.append(
                    hub.repo_index(
                        job.repo_id, job.revision, endpoint=self._endpoint, token=self._token
                    )
                )
            except (hub_errors.HubUnreachableError, hub_errors.HubResponseError) as e:
                raise RetryableError("the Hub did not answer", final=str(e)) from e

        self._with_retries(job, f"Reading {job.repo_id}", read_index)
        index = found[0]
        parts = parts_for(job, index, self._files)
        with self._lock:
            job.commit = index.commit or job.revision
            job.parts = parts
            self._files.save(job)
        self._emit("progress", job)

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
            targets = [target_path(self.models_dir, repo_id, part.filename) for part in model.parts]
            if manifest is None:
                manifest = self._manifest(repo_id)
            if verified_on_disk(model.parts, targets, manifest):
                found[model.filename] = targets[0]
        return found

    def _manifest(self, repo_id: str) -> dict[str, dict[str, Any]]:
        return read_manifest(self.models_dir.joinpath(*repo_id.split("/")))

    def _download_part(self, job: Job, part: Part) -> None:
        path = self._files.part_path(job, part)
        make_private_dirs(path.parent)
        hashing = Hashing(part)
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
                self._files.save(job)
            raise DownloadError(
                f"{part.filename} arrived corrupted: its {hashing.kind} does not match the Hub's "
                f"({hashing.h.hexdigest()[:12]}… instead of {expected[:12]}…). The file was "
                "deleted; press Retry to download it again."
            )
        with self._lock:
            part.verified = True
            self._files.save(job)

    def _with_retries(
        self,
        job: Job,
        what: str,
        attempt: Callable[[], None],
        progress: Callable[[], int] = lambda: 0,
    ) -> None:
        def wait(note: str, delay: float) -> None:
            with self._lock:
                job.note = note
            self._emit("state", job)
            log.info("Download %s: %s", job.id, note)
            job.wake.wait(delay)

        check = partial(self._check, job)
        with_retries(what, attempt, self._backoff, check=check, wait=wait, progress=progress)
        if job.note is not None:
            with self._lock:
                job.note = None

    def _fetch(self, job: Job, part: Part, path: Path, hashing: Hashing) -> None:
        """One attempt: check what is on disk, then continue it with a range request."""
        offset = path.stat().st_size if path.exists() else 0
        if offset > part.size:
            path.unlink()
            offset = 0
        if hashing.count != offset:
            if offset:
                with self._lock:
                    job.note = "Checking the partial download"
                rehash(path, hashing, partial(self._check, job))
                with self._lock:
                    job.note = None
            else:
                hashing.reset()
        part.done = offset
        if offset == part.size:
            return
        request = RangeRequest(
            client=self._http(),
            repo_id=job.repo_id,
            revision=job.commit or job.revision,
            endpoint=self._endpoint,
            token=self._token,
            check=partial(self._check, job),
            on_etag=lambda etag: self._on_etag(job, part, etag),
            on_progress=lambda: self._progress(job),
        )
        fetch_range(request, part, path, hashing)

    def _on_etag(self, job: Job, part: Part, etag: str) -> None:
        with self._lock:
            part.etag = etag
            self._files.save(job)

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

    def _progress(self, job: Job) -> None:
        now = time.monotonic()
        with self._lock:
            done = sum(p.size if p.verified else p.done for p in job.parts)
            job.speed.add(now, done)
            if now - job.last_progress < self._progress_interval:
                return
            job.last_progress = now
        self._emit("progress", job)

    # last, so `list` below does not shadow the builtin in annotations above
    def list(self) -> list[Download]:
        """Every download, oldest first."""
        with self._lock:
            return [snapshot(j) for j in self._jobs.values()]
