"""Hostile input in Ollama's store (issue 26): every bad manifest or blob is skipped with a
logged reason, never read outside the store, never blocks the scan; the good model beside
them is still listed."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from app.library.local import Library
from app.library.ollama_store import MAX_MANIFEST_BYTES
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.other_stores import MODEL, ollama_blob, ollama_model

GOOD = "gemma3:270m"


@pytest.fixture
def store(ember_home: Path) -> Path:
    store = Path(os.environ["OLLAMA_MODELS"])
    ollama_model(store, GOOD, gguf_bytes(name="Good"))
    return store


def _manifest(store: Path, model: str, text: str | bytes) -> Path:
    path = store / "manifests/registry.ollama.ai/library" / model / "latest"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _layers(*layers: tuple[str, str]) -> str:
    return json.dumps({"layers": [{"mediaType": m, "digest": d} for m, d in layers]})


def _scan(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.set_level(logging.INFO, logger="app.library.ollama_store")
    library = Library(tmp_path / "m", hf_cache_dir=tmp_path / "h", lmstudio_dirs=())
    return [m.name for m in library.scan()]


def _skipped(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if "skipped" in r.getMessage())


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        (" " * MAX_MANIFEST_BYTES + '{"layers": []}', "larger than"),
        ("[" * 50_000 + "]" * 50_000, "not JSON (RecursionError)"),
        ('{"layers": "all of them"}', "no list of layers"),
        ('{"layers": [' + ",".join(["{}"] * 65) + "]}", "no list of layers"),
        (_layers((MODEL, "sha256:../../../../etc/passwd")), "digest is not sha256"),
        (_layers((MODEL, "sha256-" + "a" * 64)), "digest is not sha256"),
        (_layers((MODEL, "sha256:" + "A" * 64)), "digest is not sha256"),
        (_layers((MODEL, "sha256:" + "b" * 64)), "model blob missing"),
        (b"\xff\xfe\x00garbage", "not JSON"),
    ],
    ids=[
        "bad-json",
        "huge",
        "deeply-nested",
        "layers-not-a-list",
        "too-many-layers",
        "dotdot-digest",
        "dash-digest",
        "uppercase-digest",
        "missing-blob",
        "binary",
    ],
)
def test_a_bad_manifest_is_skipped_with_its_reason(
    store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, reason: str
) -> None:
    _manifest(store, "bad", text)
    assert _scan(tmp_path, caplog) == [GOOD]
    assert reason in _skipped(caplog)


def test_links_out_of_the_store_are_not_followed(
    store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.gguf"
    secret.write_bytes(gguf_bytes(name="Secret"))
    # a manifest that is a symlink to a file outside the store
    elsewhere = outside / "manifest"
    elsewhere.write_text(_layers((MODEL, ollama_blob(store, gguf_bytes(name="Via link")))))
    link = store / "manifests/registry.ollama.ai/library/linked/latest"
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere)
    # a blob that is a symlink out of the store
    digest = "sha256:" + "c" * 64
    (store / "blobs" / ("sha256-" + "c" * 64)).symlink_to(secret)
    _manifest(store, "escape", _layers((MODEL, digest)))
    # a manifests folder that is a symlink out of the store is not walked
    (outside / "library" / "walked").mkdir(parents=True)
    (outside / "library" / "walked" / "latest").write_text(_layers((MODEL, digest)))
    (store / "manifests" / "evil.example").symlink_to(outside)

    assert _scan(tmp_path, caplog) == [GOOD]
    skipped = _skipped(caplog)
    assert "manifest is a link out of the store" in skipped
    assert "model blob is a link out of the store" in skipped


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_folder_for_a_blob_never_blocks_the_scan(
    store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fifo, folder = "d" * 64, "e" * 64
    os.mkfifo(store / "blobs" / f"sha256-{fifo}")  # opening it would wait for a writer
    (store / "blobs" / f"sha256-{folder}").mkdir()
    _manifest(store, "fifo", _layers((MODEL, f"sha256:{fifo}")))
    _manifest(store, "folder", _layers((MODEL, f"sha256:{folder}")))
    os.mkfifo(store / "manifests/registry.ollama.ai/library/fifo/tag")  # a manifest FIFO too
    assert _scan(tmp_path, caplog) == [GOOD]
    assert _skipped(caplog).count("is not a regular file") == 3


def test_names_ollama_would_never_write_are_skipped(
    store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = _layers((MODEL, ollama_blob(store, gguf_bytes(name="Other"))))
    _manifest(store, "-dash", good)
    _manifest(store, "new\nline", good)
    _manifest(store, "x" * 200, good)
    assert _scan(tmp_path, caplog) == [GOOD]
    assert _skipped(caplog).count("not a name Ollama writes") == 3
