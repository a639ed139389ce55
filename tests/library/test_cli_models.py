"""`ember pull`, `ember ls`, `ember rm` and `ember run REPO` end to end, as subprocesses,
against the fake Hub on 127.0.0.1 (real huggingface_hub, real downloads)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from app.config import paths
from tests.helpers.cli import EMBER, ember
from tests.helpers.downloads import gguf_files, tiny_repo
from tests.helpers.hub_server import FakeHub, FakeRepo


def test_pull_picks_q4_k_m_then_reuses_it(hub: FakeHub) -> None:
    hub.add(tiny_repo("acme/Tiny-GGUF", quants=("Q2_K", "Q4_K_M", "Q8_0")))
    r = ember("pull", "acme/Tiny-GGUF")
    assert r.returncode == 0, r.stderr
    path = Path(r.stdout.strip())
    assert path == paths().models_dir / "acme" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf"
    assert path.is_file()
    again = ember("pull", "acme/Tiny-GGUF")
    assert again.returncode == 0 and "already downloaded" in again.stderr
    assert Path(again.stdout.strip()) == path


def test_pull_a_quant_or_a_file(hub: FakeHub) -> None:
    hub.add(tiny_repo("acme/Tiny-GGUF", quants=("Q4_K_M", "Q8_0")))
    assert ember("pull", "acme/Tiny-GGUF:q8_0").stdout.strip().endswith("Tiny-Q8_0.gguf")
    r = ember("pull", "acme/Tiny-GGUF:Tiny-Q4_K_M.gguf")
    assert r.returncode == 0 and r.stdout.strip().endswith("Tiny-Q4_K_M.gguf")
    bad = ember("pull", "acme/Tiny-GGUF:Q3_K_S")
    assert bad.returncode == 1
    assert bad.stderr.startswith("ember: error: ") and "Choose from" in bad.stderr


def test_pull_errors_are_one_line(hub: FakeHub) -> None:
    for spec in ("acme/Missing-GGUF", "../evil", "not a repo"):
        r = ember("pull", spec)
        assert r.returncode == 1, spec
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stderr.startswith("ember: error: ")
    assert gguf_files(paths().models_dir) == []


def test_interrupted_pull_resumes_with_a_range_request(hub: FakeHub) -> None:
    payload = os.urandom(3_000_000)
    hub.add(FakeRepo("acme/Big-GGUF", {"Big-Q4_K_M.gguf": payload}))
    hub.throttle_bps = 1_000_000
    proc = subprocess.Popen([*EMBER, "pull", "acme/Big-GGUF"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)  # fmt: skip
    partial_dir = paths().downloads_dir
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        parts = list(partial_dir.rglob("*.part"))
        if parts and parts[0].stat().st_size > 300_000:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the download never started")
    proc.send_signal(signal.SIGKILL)  # like a crash or a closed laptop
    proc.wait(10)
    assert gguf_files(paths().models_dir) == []  # a partial file is never a model
    hub.throttle_bps = None
    hub.reset_log()
    r = ember("pull", "acme/Big-GGUF")
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).read_bytes() == payload
    ranges = [q.headers.get("range", "") for q in hub.log(method="GET") if "Big-Q4" in q.path]
    assert any(h.startswith("bytes=") and not h.startswith("bytes=0-") for h in ranges), ranges


def test_ls_and_rm(hub: FakeHub) -> None:
    hub.add(tiny_repo("acme/Tiny-GGUF", quants=("Q4_K_M", "Q8_0")))
    assert ember("pull", "acme/Tiny-GGUF:Q8_0").returncode == 0
    table = ember("ls")
    assert table.returncode == 0, table.stderr
    assert "NAME" in table.stdout and "Q8_0" in table.stdout
    rows = json.loads(ember("ls", "--json").stdout)
    assert [row["quant"] for row in rows] == ["Q8_0"]
    r = ember("rm", rows[0]["id"], "--yes")
    assert r.returncode == 0, r.stderr
    assert json.loads(ember("ls", "--json").stdout) == []
    assert ember("rm", "nothing-like-this").returncode == 1


def test_ls_when_empty_says_how_to_get_a_model() -> None:
    r = ember("ls")
    assert r.returncode == 0 and "ember pull" in r.stdout


def test_run_pulls_a_missing_model_then_chats(hub: FakeHub, gemma_path: Path) -> None:
    hub.add(FakeRepo("google/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": gemma_path}))
    r = ember("run", "google/gemma-3-270m-GGUF", "The capital of France is", "--raw", "-n", "4",
              "-c", "1024", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["usage"]["completion_tokens"] > 0
    assert (paths().models_dir / "google/gemma-3-270m-GGUF/gemma-3-270m-Q4_K_M.gguf").is_file()
    # the second time it is in the library and runs by its short name
    again = ember("run", "gemma-3-270m", "Hi", "-n", "2", "-c", "1024")
    assert again.returncode == 0, again.stderr


def test_pull_replaces_a_file_it_cannot_vouch_for(hub: FakeHub) -> None:
    """A file at the target path that the manifest does not record as verified (a stray copy,
    an older revision) is not taken for the download."""
    repo = hub.add(tiny_repo("acme/Tiny-GGUF"))
    target = paths().models_dir / "acme" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not the real weights")
    r = ember("pull", "acme/Tiny-GGUF")
    assert r.returncode == 0, r.stderr
    assert "already downloaded" not in r.stderr
    fake = repo.file("Tiny-Q4_K_M.gguf")
    assert fake is not None
    assert target.read_bytes() == b"".join(fake.read(0, fake.size))
