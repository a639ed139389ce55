"""A partial download is readable by this user only, like everything else in EMBER_HOME."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

import pytest

from app.config import paths
from app.library.download_state import DownloadState
from app.library.downloads import DownloadManager
from tests.helpers.downloads import Recorder
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeHub, FakeRepo

MB = 1_000_000


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The usual umask, under which a plain ``open`` makes a 0644 file and a 0755 folder."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_partial_download_is_private(
    usual_umask: None, hub: FakeHub, manager: DownloadManager, recorder: Recorder
) -> None:
    hub.add(FakeRepo("alice/Big-GGUF", {"big-Q4_K_M.gguf": gguf_bytes(payload=MB)}))
    hub.throttle_bps = 2 * MB
    download = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    recorder.wait_for(download.id, lambda d: d.done_bytes > 100_000)
    manager.pause(download.id)
    recorder.wait_state(download.id, DownloadState.PAUSED)
    partial = next(paths().downloads_dir.rglob("*.part"))
    assert stat.S_IMODE(partial.stat().st_mode) == 0o600
    assert stat.S_IMODE(partial.parent.stat().st_mode) == 0o700
