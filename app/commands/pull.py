"""``ember pull REPO[:QUANT|:FILENAME]``: download a model from the Hugging Face Hub."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from app.cli import COMMANDS
from app.config import paths
from app.engine.gguf_format import human_bytes
from app.library import hub
from app.library.download_state import Download, DownloadEvent, DownloadState
from app.library.downloads import DownloadManager


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "pull",
        help=COMMANDS["pull"],
        description="Download a GGUF model. REPO alone picks a sensible quantization "
        "(Q4_K_M when there is one); REPO:Q8_0 picks a quantization, REPO:FILE.gguf a file. "
        "An interrupted pull resumes where it stopped; the file is verified before use.",
    )
    p.add_argument("spec", metavar="REPO[:QUANT|:FILENAME]")
    p.add_argument("--revision", default="main", help="branch, tag or commit (default: main)")
    p.set_defaults(func=run)


def split_spec(spec: str) -> tuple[str, str | None]:
    repo, _, selector = spec.partition(":")
    return repo, selector or None


def run(args: argparse.Namespace) -> int:
    path = pull(args.spec, args.revision)
    print(path)
    return 0


def pull(spec: str, revision: str = "main", quiet: bool = False) -> Path:
    """Download (or find already downloaded) the model ``spec`` names; returns its path."""
    repo_id, selector = split_spec(spec)
    hub.validate_repo_id(repo_id)
    files = hub.list_gguf_files(repo_id, revision)
    try:
        model = files.select(selector)
    except LookupError as e:
        raise ValueError(str(e)) from None
    p = paths().ensure()
    manager = DownloadManager(p.models_dir, p.downloads_dir, max_concurrent=1)
    try:
        installed = manager.installed_path(repo_id, model)
        if installed is not None:
            if not quiet:
                print(f"{repo_id}/{model.filename} is already downloaded.", file=sys.stderr)
            return installed
        return _download(manager, repo_id, model, revision, quiet)
    finally:
        manager.shutdown()


def _download(
    manager: DownloadManager, repo_id: str, model: hub.ModelFile, revision: str, quiet: bool
) -> Path:
    done = threading.Event()
    latest: list[Download] = []
    bar = _ProgressBar(enabled=not quiet)

    def on_event(event: DownloadEvent) -> None:
        d = event.download
        if d.repo_id != repo_id or model.filename not in d.filenames:
            return
        latest[:] = [d]
        bar.show(d)
        if d.state.is_final:
            done.set()

    manager.subscribe(on_event)
    manager.restore(auto_resume=False)  # an interrupted pull continues from its partial file
    d = manager.start(repo_id, model, revision)
    if d.state == DownloadState.PAUSED:
        manager.resume(d.id)
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        manager.pause(d.id)
        bar.finish()
        raise ValueError("Download interrupted; run the same `ember pull` to resume.") from None
    bar.finish()
    final = latest[0]
    if final.state != DownloadState.COMPLETED:
        raise ValueError(final.error or f"Download {final.state.value}.")
    return Path(final.paths[0])


class _ProgressBar:
    """One line on stderr, redrawn at most ~10 times a second; on a pipe, only a summary."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self._last = 0.0
        self._started = False

    def show(self, d: Download) -> None:
        if not self.enabled:
            return
        if not self._started and d.total_bytes:
            self._started = True
            print(
                f"Downloading {d.repo_id}/{d.filename} ({human_bytes(d.total_bytes)})",
                file=sys.stderr,
            )
        now = time.monotonic()
        if not self.tty or (now - self._last < 0.1 and not d.state.is_final):
            return
        self._last = now
        width = 30
        filled = int(width * d.fraction)
        eta = f"{int(d.eta) // 60}:{int(d.eta) % 60:02d}" if d.eta is not None else "--:--"
        note = f"  {d.note}" if d.note else ""
        line = (
            f"\r[{'#' * filled}{'.' * (width - filled)}] {d.fraction:4.0%}  "
            f"{human_bytes(d.done_bytes)}/{human_bytes(d.total_bytes)}  "
            f"{human_bytes(int(d.speed))}/s  ETA {eta}  {d.state.value}{note}"
        )
        sys.stderr.write(line.ljust(100))
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled and self.tty and self._started:
            sys.stderr.write("\n")
            sys.stderr.flush()
