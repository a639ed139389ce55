"""Downloads against the fake Hub: verify, resume, retry, fail clearly, never escape models/."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest

from app.config import paths
from app.library import downloads as downloads_mod
from app.library.download_state import DownloadState
from app.library.downloads import DownloadManager
from app.library.hub import list_gguf_files
from app.library.hub_errors import UnsafeNameError
from app.library.local import Library
from app.library.manifest import read_manifest
from tests.helpers.downloads import FAST_BACKOFF, Recorder, gguf_files, tiny_repo
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeHub, FakeRepo

S = DownloadState
MB = 1_000_000


def big_repo(hub: FakeHub, repo_id: str = "alice/Big-GGUF", size: int = MB, **kw: object) -> bytes:
    data = gguf_bytes(payload=size)
    hub.add(FakeRepo(repo_id, {"big-Q4_K_M.gguf": data}, **kw))  # type: ignore[arg-type]
    return data


def test_download_completes_verified_and_recorded(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, models_dir: Path
) -> None:
    data = big_repo(hub)
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    assert d.state == S.QUEUED
    done = recorder.wait_state(d.id, S.COMPLETED, S.FAILED)
    assert done.state == S.COMPLETED, done.error
    target = models_dir / "alice" / "Big-GGUF" / "big-Q4_K_M.gguf"
    assert done.paths == (target,)
    assert target.read_bytes() == data
    assert (done.done_bytes, done.total_bytes) == (len(data), len(data))
    entry = read_manifest(target.parent)["big-Q4_K_M.gguf"]
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert entry["commit"] == hub.repos["alice/Big-GGUF"].sha
    assert list(paths().downloads_dir.iterdir()) == []  # no state, no partial left
    states = recorder.states(d.id)
    assert states[0] == S.DOWNLOADING and states[-2:] == [S.VERIFYING, S.COMPLETED]
    assert sum(s.is_final for s in states) == 1
    # pinned to the commit, and the token never reached the CDN
    assert all(f"/resolve/{hub.repos['alice/Big-GGUF'].sha}/" in r.path
               for r in hub.log(path_contains="/resolve/"))  # fmt: skip

    model = Library(models_dir, hf_cache_dir=models_dir / "none", lmstudio_dirs=()).find(
        "alice/Big-GGUF"
    )
    assert model.owned and model.source == "ember" and model.info is not None

    # asking again: already there, nothing downloaded
    hub.reset_log()
    again = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    assert recorder.wait_state(again.id, S.COMPLETED, S.FAILED).state == S.COMPLETED
    assert hub.log(path_contains="/cdn/") == []


def test_split_model_is_one_download(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, models_dir: Path
) -> None:
    parts = {f"m-Q8_0-{i:05d}-of-00003.gguf": gguf_bytes(payload=20_000 * i) for i in (1, 2, 3)}
    hub.add(FakeRepo("alice/Split-GGUF", {**parts, "mmproj-f16.gguf": gguf_bytes()}))
    group = list_gguf_files("alice/Split-GGUF").select("Q8_0")
    d = manager.start("alice/Split-GGUF", "m-Q8_0-00002-of-00003.gguf")  # any part means all
    done = recorder.wait_state(d.id, S.COMPLETED, S.FAILED)
    assert done.state == S.COMPLETED, done.error
    assert done.filenames == group.filenames and done.total_bytes == group.size
    assert [p.name for p in gguf_files(models_dir)] == sorted(parts)
    assert manager.start("alice/Split-GGUF", group).state in (S.QUEUED, S.COMPLETED)


def test_parallel_downloads(hub: FakeHub, ember_home: Path) -> None:
    for name in ("a", "b", "c", "d"):
        big_repo(hub, f"alice/{name}-GGUF", size=150_000)
    hub.throttle_bps = 400_000
    p = paths()
    with DownloadManager(p.models_dir, p.downloads_dir, max_concurrent=3) as manager:
        recorder = Recorder(manager)
        ids = [manager.start(f"alice/{n}-GGUF", "big-Q4_K_M.gguf").id for n in "abcd"]
        most = 0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            states = [d.state for d in manager.list()]
            most = max(most, states.count(S.DOWNLOADING))
            if all(s == S.COMPLETED for s in states):
                break
            time.sleep(0.01)
        assert most == 3  # several at once, never more than max_concurrent
        for download_id in ids:
            assert recorder.wait_state(download_id, S.COMPLETED).state == S.COMPLETED
    assert len(gguf_files(p.models_dir)) == 4


def test_pause_and_resume_continue_with_range(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, models_dir: Path
) -> None:
    data = big_repo(hub, size=MB)
    hub.throttle_bps = 2 * MB
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    recorder.wait_for(d.id, lambda x: x.done_bytes > 200_000)
    manager.pause(d.id)
    paused = recorder.wait_state(d.id, S.PAUSED)
    partial = next(paths().downloads_dir.rglob("*.part"))
    on_disk = partial.stat().st_size
    assert 0 < on_disk < len(data) and paused.done_bytes == on_disk
    assert gguf_files(models_dir) == []  # a partial file is never a model
    time.sleep(0.2)
    assert partial.stat().st_size == on_disk  # really stopped

    hub.throttle_bps = None
    manager.resume(d.id)
    done = recorder.wait_state(d.id, S.COMPLETED, S.FAILED)
    assert done.state == S.COMPLETED, done.error
    assert done.paths[0].read_bytes() == data
    gets = hub.log(path_contains="/cdn/", method="GET")
    assert len(gets) == 2
    assert gets[1].headers["range"] == f"bytes={on_disk}-"
    assert gets[1].headers["if-range"] == f'"{hashlib.sha256(data).hexdigest()}"'
    assert gets[1].status == 206 and gets[1].body_bytes == len(data) - on_disk


def test_cancel_removes_partial_files(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, models_dir: Path
) -> None:
    big_repo(hub, size=MB)
    hub.throttle_bps = MB
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    recorder.wait_for(d.id, lambda x: x.done_bytes > 100_000)
    manager.cancel(d.id)
    assert recorder.wait_state(d.id, S.CANCELLED).state == S.CANCELLED
    assert list(paths().downloads_dir.iterdir()) == []
    assert gguf_files(models_dir) == []
    assert recorder.states(d.id).count(S.CANCELLED) == 1
    manager.remove(d.id)
    assert manager.list() == []


def test_connection_drop_is_retried_and_resumed(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder
) -> None:
    data = big_repo(hub, size=MB)
    hub.drop_next(after_bytes=300_000)
    hub.fail_next(503, skip=1, path_contains="/cdn/")  # the first retry fails too
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    done = recorder.wait_state(d.id, S.COMPLETED, S.FAILED)
    assert done.state == S.COMPLETED, done.error
    assert done.paths[0].read_bytes() == data
    gets = hub.log(path_contains="/cdn/", method="GET")
    assert [g.status for g in gets] == [200, 503, 206]
    assert gets[2].headers["range"] == "bytes=300000-"
    assert sum(g.body_bytes for g in gets if g.status < 300) == len(data)  # nothing twice
    notes = [e.download.note for e in recorder.events if e.download.note]
    assert any("retrying in" in n for n in notes)


def test_persistent_server_error_fails_clearly(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, models_dir: Path
) -> None:
    big_repo(hub, size=10_000)
    hub.fail_next(500, times=100, path_contains="/resolve/")
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    failed = recorder.wait_state(d.id, S.FAILED, S.COMPLETED)
    assert failed.state == S.FAILED
    assert failed.error is not None
    assert "failed after 5 tries" in failed.error and "500" in failed.error
    assert "press Retry" in failed.error
    assert len(hub.log(path_contains="/resolve/")) == 5
    assert gguf_files(models_dir) == []

    hub.clear_faults()
    manager.retry(d.id)
    assert recorder.wait_state(d.id, S.COMPLETED, S.FAILED).state == S.COMPLETED
    assert recorder.states(d.id).count(S.FAILED) == 1


def test_corrupted_byte_is_rejected_and_nothing_lands(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, models_dir: Path
) -> None:
    big_repo(hub, size=200_000)
    hub.corrupt("alice/Big-GGUF", "big-Q4_K_M.gguf")
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    failed = recorder.wait_state(d.id, S.FAILED, S.COMPLETED)
    assert failed.state == S.FAILED
    assert failed.error is not None and "corrupted" in failed.error and "sha256" in failed.error
    assert list(models_dir.rglob("*")) == [] or gguf_files(models_dir) == []
    assert list(paths().downloads_dir.rglob("*.part")) == []
    assert Library(models_dir, hf_cache_dir=models_dir / "x", lmstudio_dirs=()).scan() == []


def test_gated_repo_needs_the_right_token(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_repo(hub, "meta/Gated-GGUF", size=10_000, gated="manual")
    d = manager.start("meta/Gated-GGUF", "big-Q4_K_M.gguf")
    failed = recorder.wait_state(d.id, S.FAILED, S.COMPLETED)
    assert failed.error is not None
    assert "gated" in failed.error and "accept its terms" in failed.error
    assert "HF_TOKEN" in failed.error

    monkeypatch.setenv("HF_TOKEN", hub.no_access_token)
    manager.retry(d.id)
    failed = recorder.wait_for(
        d.id, lambda x: x.state == S.FAILED and "no access" in (x.error or "")
    )
    assert "403" in (failed.error or "")

    monkeypatch.setenv("HF_TOKEN", hub.token)
    manager.retry(d.id)
    assert recorder.wait_state(d.id, S.COMPLETED, S.FAILED).state == S.COMPLETED
    resolved = hub.log(path_contains="/resolve/")[-1]
    assert resolved.headers["authorization"] == f"Bearer {hub.token}"
    assert all("authorization" not in r.headers for r in hub.log(path_contains="/cdn/"))


def test_not_enough_disk_space(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_repo(hub, size=100_000)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage(10**9, 10**9, 5000))
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    failed = recorder.wait_state(d.id, S.FAILED, S.COMPLETED)
    assert failed.error is not None and failed.error.startswith("Not enough disk space")
    assert "Free some space" in failed.error
    assert hub.log(path_contains="/cdn/") == []


@pytest.mark.parametrize(
    "name",
    [
        "../evil.gguf",
        "/etc/x.gguf",
        "a/../../b.gguf",
        "C:\\x.gguf",
        "C:x.gguf",
        "a//b.gguf",
        "x\0.gguf",
        "",
    ],
)
def test_unsafe_file_names_are_rejected(manager: DownloadManager, name: str) -> None:
    with pytest.raises(UnsafeNameError):
        manager.start("alice/Repo-GGUF", name)


@pytest.mark.parametrize("repo_id", ["../x", "a/b/c", "noslash", "a/..", "/abs", "a/b c", ".a/b"])
def test_unsafe_repo_ids_are_rejected(manager: DownloadManager, repo_id: str) -> None:
    with pytest.raises(UnsafeNameError):
        manager.start(repo_id, "x.gguf")


def test_symlink_out_of_models_dir_is_refused(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder, models_dir: Path, tmp_path: Path
) -> None:
    hub.add(tiny_repo("evil/Repo-GGUF"))
    outside = tmp_path / "outside"
    outside.mkdir()
    models_dir.mkdir(parents=True, exist_ok=True)
    (models_dir / "evil").symlink_to(outside, target_is_directory=True)
    d = manager.start("evil/Repo-GGUF", "Repo-Q4_K_M.gguf")
    failed = recorder.wait_state(d.id, S.FAILED, S.COMPLETED)
    assert failed.state == S.FAILED and "outside" in (failed.error or "")
    assert list(outside.iterdir()) == []


def test_shutdown_then_restore_resumes(hub: FakeHub, ember_home: Path) -> None:
    data = big_repo(hub, size=MB)
    hub.throttle_bps = 2 * MB
    p = paths()
    others = set(threading.enumerate())
    first = DownloadManager(p.models_dir, p.downloads_dir, backoff=FAST_BACKOFF)
    recorder = Recorder(first)
    d = first.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    recorder.wait_for(d.id, lambda x: x.done_bytes > 200_000)
    first.shutdown()
    # shutdown() joined its threads: none is left downloading, and the download is unfinished
    left = set(threading.enumerate()) - others
    assert not [t.name for t in left if t.name.startswith("ember-download-")]
    assert first.get(d.id).state != S.COMPLETED
    state = json.loads((p.downloads_dir / f"{d.id}.json").read_text())
    assert state["state"] == "queued" and state["parts"][0]["filename"] == "big-Q4_K_M.gguf"

    hub.throttle_bps = None
    with DownloadManager(p.models_dir, p.downloads_dir, backoff=FAST_BACKOFF) as second:
        rec2 = Recorder(second)
        (restored,) = second.restore(auto_resume=False)
        assert restored.id == d.id and restored.state == S.PAUSED and restored.done_bytes > 0
        second.resume(d.id)
        done = rec2.wait_state(d.id, S.COMPLETED, S.FAILED)
        assert done.state == S.COMPLETED, done.error
        assert done.paths[0].read_bytes() == data
    last = hub.log(path_contains="/cdn/", method="GET")[-1]
    assert last.headers["range"] == f"bytes={restored.done_bytes}-" and last.status == 206


_CHILD = """
import sys, time
from pathlib import Path
from app.library.downloads import DownloadManager
m = DownloadManager(Path(sys.argv[1]), Path(sys.argv[2]))
d = m.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
print(d.id, flush=True)
time.sleep(60)
"""


def test_killed_process_resumes_after_restore(hub: FakeHub, ember_home: Path) -> None:
    data = big_repo(hub, size=2 * MB)
    hub.throttle_bps = 2 * MB
    p = paths()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(p.models_dir), str(p.downloads_dir)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout is not None
        download_id = child.stdout.readline().strip()
        part = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            part = next(iter((p.downloads_dir / download_id).glob("*.part")), None)
            if part is not None and part.stat().st_size > 300_000:
                break
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    assert part is not None
    killed_at = part.stat().st_size
    assert 0 < killed_at < len(data)

    hub.throttle_bps = None
    with DownloadManager(p.models_dir, p.downloads_dir, backoff=FAST_BACKOFF) as manager:
        recorder = Recorder(manager)
        (restored,) = manager.restore()
        done = recorder.wait_state(restored.id, S.COMPLETED, S.FAILED)
        assert done.state == S.COMPLETED, done.error
        assert done.paths[0].read_bytes() == data
    last = hub.log(path_contains="/cdn/", method="GET")[-1]
    assert last.headers["range"] == f"bytes={killed_at}-" and last.status == 206


def test_progress_events_are_throttled(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder
) -> None:
    big_repo(hub, size=MB)
    hub.throttle_bps = 2 * MB
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    started = time.monotonic()
    done = recorder.wait_state(d.id, S.COMPLETED, S.FAILED)
    elapsed = time.monotonic() - started
    progress = [e for e in recorder.events if e.kind == "progress" and e.download.id == d.id]
    assert 2 <= len(progress) <= 12 * elapsed + 3
    speeds = [e.download.speed for e in progress if e.download.speed > 0]
    assert speeds and max(speeds) < 6 * MB
    assert any(e.download.eta is not None for e in progress)
    assert done.state == S.COMPLETED


def test_reading_the_repository_is_retried_too(
    hub: FakeHub, manager: DownloadManager, recorder: Recorder
) -> None:
    big_repo(hub, size=10_000)
    hub.fail_next(502, times=2, path_contains="/api/models/")
    d = manager.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
    assert recorder.wait_state(d.id, S.COMPLETED, S.FAILED).state == S.COMPLETED
    assert [r.status for r in hub.log(path_contains="/api/models/")] == [502, 502, 200]


def test_unreachable_or_offline_hub_fails_with_a_clear_message(
    ember_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import huggingface_hub.constants

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    p = paths()
    with DownloadManager(p.models_dir, p.downloads_dir, endpoint=url, backoff=FAST_BACKOFF) as m:
        recorder = Recorder(m)
        d = m.start("alice/Big-GGUF", "big-Q4_K_M.gguf")
        failed = recorder.wait_state(d.id, S.FAILED, S.COMPLETED)
        assert (failed.error or "").startswith(f"Can't reach the Hugging Face Hub at {url}")

        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        m.retry(d.id)
        failed = recorder.wait_for(d.id, lambda x: "HF_HUB_OFFLINE" in (x.error or ""))
        assert failed.state == S.FAILED


def test_installed_paths_reads_the_manifest_once_for_a_whole_file_list(
    hub: FakeHub,
    manager: DownloadManager,
    recorder: Recorder,
    models_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub.add(tiny_repo("alice/Many-GGUF", ("Q2_K", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")))
    files = list_gguf_files("alice/Many-GGUF")
    d = manager.start("alice/Many-GGUF", "Many-Q4_K_M.gguf")
    assert recorder.wait_state(d.id, S.COMPLETED, S.FAILED).state == S.COMPLETED
    reads: list[Path] = []

    def counting(folder: Path) -> dict[str, dict[str, object]]:
        reads.append(folder)
        return read_manifest(folder)

    monkeypatch.setattr(downloads_mod, "read_manifest", counting)
    target = models_dir / "alice" / "Many-GGUF" / "Many-Q4_K_M.gguf"
    assert manager.installed_paths("alice/Many-GGUF", files.models) == {"Many-Q4_K_M.gguf": target}
    assert len(reads) == 1  # not once per file
    assert manager.installed_path("alice/Many-GGUF", files.select("Q4_K_M")) == target
    assert manager.installed_path("alice/Many-GGUF", files.select("Q8_0")) is None
    assert manager.installed_paths("alice/Many-GGUF", []) == {} and len(reads) == 3
