"""Downloads against the fake Hub: tiny repositories of small GGUFs, a recorder of a download
manager's events, a fast retry backoff."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from app.library.download_state import Download, DownloadEvent, DownloadState
from app.library.downloads import DownloadManager
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeRepo

FAST_BACKOFF = (0.01, 0.02, 0.04, 0.08)


def tiny_repo(repo_id: str, quants: tuple[str, ...] = ("Q4_K_M",), **kwargs: object) -> FakeRepo:
    """A repository with one small GGUF per quantization (``<name>-<QUANT>.gguf``)."""
    stem = repo_id.split("/")[1].removesuffix("-GGUF")
    files = {f"{stem}-{q}.gguf": gguf_bytes(quant=q, name=stem) for q in quants}
    return FakeRepo(repo_id, files, **kwargs)  # type: ignore[arg-type]


class Recorder:
    """Collects a manager's events; waits for states."""

    def __init__(self, manager: DownloadManager) -> None:
        self.events: list[DownloadEvent] = []
        self._cond = threading.Condition()
        self.manager = manager
        manager.subscribe(self._on_event)

    def _on_event(self, event: DownloadEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait_for(
        self, download_id: str, predicate: Callable[[Download], bool], timeout: float = 15.0
    ) -> Download:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                current = self.manager.get(download_id)
                if predicate(current):
                    return current
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out; last state: {current}")
                self._cond.wait(min(remaining, 0.05))

    def wait_state(
        self, download_id: str, *states: DownloadState, timeout: float = 15.0
    ) -> Download:
        return self.wait_for(download_id, lambda d: d.state in states, timeout)

    def states(self, download_id: str) -> list[DownloadState]:
        with self._cond:
            return [
                e.download.state
                for e in self.events
                if e.kind == "state" and e.download.id == download_id
            ]


def gguf_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix == ".gguf")
