"""Fixtures for the library tests: a fake Hub on 127.0.0.1 that huggingface_hub and Ember use.

Ember reads ``HF_ENDPOINT`` when each call is made, so setting it with monkeypatch is enough
(huggingface_hub's own ``constants.ENDPOINT`` was fixed at import and is never relied on).
Tokens are isolated: no ``HF_TOKEN`` and no token file unless a test sets one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.config import paths
from app.library.download_state import Download, DownloadEvent, DownloadState
from app.library.downloads import DownloadManager
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeHub, FakeRepo, fake_hub_env

FAST_BACKOFF = (0.01, 0.02, 0.04, 0.08)


@pytest.fixture
def hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FakeHub]:
    """The fake Hub on 127.0.0.1 as ``HF_ENDPOINT``, with no token."""
    with fake_hub_env(monkeypatch, tmp_path_factory) as fake:
        yield fake


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


@pytest.fixture
def models_dir(ember_home: Path) -> Path:
    return paths().models_dir


@pytest.fixture
def manager(ember_home: Path) -> Iterator[DownloadManager]:
    p = paths()
    m = DownloadManager(p.models_dir, p.downloads_dir, backoff=FAST_BACKOFF)
    yield m
    m.shutdown()


@pytest.fixture
def recorder(manager: DownloadManager) -> Recorder:
    return Recorder(manager)


def gguf_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix == ".gguf")
