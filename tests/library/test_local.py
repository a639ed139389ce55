"""The local library: sources, grouping, metadata cache, import/delete and name lookup."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.library import metadata_cache as local_mod
from app.library.local import Library
from app.library.local_model import AmbiguousModelError, LibraryError, NoMatchingModelError
from app.library.manifest import read_manifest, update_manifest
from tests.helpers.gguf_writer import gguf_bytes, write_gguf
from tests.helpers.spying import spy


class Tree:
    """A fake machine: Ember's models folder, an HF cache, LM Studio and a user folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.models = root / "ember" / "models"
        self.hf = root / "hf" / "hub"
        self.lms = root / "lmstudio" / "models"
        self.extra = root / "mine"
        for d in (self.models, self.hf, self.lms, self.extra):
            d.mkdir(parents=True)

    def library(self, **kw: Any) -> Library:
        return Library(
            self.models,
            extra_dirs=[self.extra],
            hf_cache_dir=self.hf,
            lmstudio_dirs=[self.lms],
            cache_path=self.root / "cache" / "library.json",
            **kw,
        )

    def ember(self, repo_id: str, filename: str, **kw: Any) -> Path:
        path = write_gguf(self.models / repo_id / filename, **kw)
        update_manifest(
            self.models / repo_id, filename, {"sha256": "x", "size": path.stat().st_size}
        )
        return path

    def hf_cache(self, repo_id: str, filename: str, commit: str = "abc123", **kw: Any) -> Path:
        repo_dir = self.hf / f"models--{repo_id.replace('/', '--')}"
        blob = write_gguf(repo_dir / "blobs" / f"blob-{filename.replace('/', '_')}", **kw)
        link = repo_dir / "snapshots" / commit / filename
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
        (repo_dir / "refs").mkdir(exist_ok=True)
        (repo_dir / "refs" / "main").write_text(commit)
        return link


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def test_scan_finds_every_source(tree: Tree) -> None:
    tree.ember("alice/Llama-GGUF", "llama-Q4_K_M.gguf", name="Llama")
    tree.hf_cache("bob/Qwen-GGUF", "qwen-Q8_0.gguf", quant="Q8_0")
    write_gguf(tree.lms / "lmstudio-community" / "Phi-GGUF" / "phi-Q5_K_M.gguf", quant="Q5_K_M")
    write_gguf(tree.extra / "loose.gguf")
    write_gguf(tree.extra / "deeper" / "nested-F16.gguf", quant="F16")

    models = {m.source: m for m in tree.library().scan()}
    assert set(models) == {"ember", "hf-cache", "lmstudio", "folder"}

    ember = models["ember"]
    assert ember.id == "alice/Llama-GGUF/llama-Q4_K_M.gguf"
    assert ember.owned and ember.repo_id == "alice/Llama-GGUF" and ember.quant == "Q4_K_M"
    assert ember.name == "llama-Q4_K_M" and ember.info is not None and ember.info.name == "Llama"
    assert ember.size == ember.path.stat().st_size and ember.error is None

    hf = models["hf-cache"]
    assert not hf.owned and hf.repo_id == "bob/Qwen-GGUF" and hf.quant == "Q8_0"
    assert hf.id == str(hf.path) and "snapshots" in str(hf.path)  # listed in place
    assert hf.info is not None

    lms = models["lmstudio"]
    assert lms.repo_id == "lmstudio-community/Phi-GGUF" and not lms.owned

    folder = [m for m in tree.library().scan() if m.source == "folder"]
    assert {m.filename for m in folder} == {"loose.gguf", "deeper/nested-F16.gguf"}


def test_split_models_projectors_and_partials(tree: Tree) -> None:
    repo = tree.models / "alice" / "Vision-GGUF"
    for i in (1, 2, 3):
        write_gguf(repo / f"big-Q4_K_M-{i:05d}-of-00003.gguf", extra_kv={"split.count": 3})
    write_gguf(repo / "mmproj-model-f16.gguf")
    write_gguf(repo / "mmproj-model-f32.gguf")
    (repo / "other-Q8_0.gguf.part").write_bytes(b"partial")
    (repo / ".other-Q8_0.gguf.ember-tmp").write_bytes(b"partial")
    (tree.extra / "broken-00001-of-00002.gguf").write_bytes(gguf_bytes())
    blobs = tree.hf / "models--x--y" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "abc.incomplete").write_bytes(b"GGUF")

    models = tree.library().scan()
    assert [m.name for m in models] == ["big-Q4_K_M", "broken"]
    split, broken = models
    assert split.is_split and split.path.name == "big-Q4_K_M-00001-of-00003.gguf"
    assert split.size == sum(p.stat().st_size for p in split.parts)
    assert split.mmproj is not None and split.mmproj.name == "mmproj-model-f16.gguf"
    assert len(split.projectors) == 2
    assert broken.error is not None and "2 of 2 missing" in broken.error.replace("part(s) ", "")


def test_metadata_cache_avoids_rereading_headers(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [tree.ember("alice/M-GGUF", f"m{i}-Q4_K_M.gguf", vocab_size=200) for i in range(5)]
    calls = spy(monkeypatch, local_mod, "read_gguf", Path)
    first = tree.library().scan()
    assert len(calls) == 5
    calls.clear()
    second = tree.library().scan()  # a new Library: only the cache file carries over
    assert calls == []
    assert [m.info for m in first] == [m.info for m in second]
    assert second[0].info is not None and second[0].info.context_length == 4096

    write_gguf(paths[0], context_length=8192)  # changed size/mtime: read again
    third = tree.library().scan()
    assert [c.resolve() for c in calls] == [paths[0].resolve()]
    changed = next(m for m in third if m.path == paths[0])
    assert changed.info is not None and changed.info.context_length == 8192


def test_corrupt_files_are_listed_with_an_error(tree: Tree) -> None:
    (tree.extra / "garbage.gguf").write_bytes(b"<!DOCTYPE html><html></html>")
    data = gguf_bytes(payload=10_000)
    (tree.extra / "cut.gguf").write_bytes(data[: len(data) - 5000])
    write_gguf(tree.extra / "fine.gguf")
    models = {m.name: m for m in tree.library().scan()}
    assert models["fine"].error is None
    assert models["garbage"].error is not None and "not a GGUF" in models["garbage"].error
    assert models["cut"].error is not None and "incomplete" in models["cut"].error
    assert models["garbage"].info is None
    again = {m.name: m for m in tree.library().scan()}  # errors are cached too
    assert again["garbage"].error == models["garbage"].error


def test_import_copy_and_link_then_delete(tree: Tree, tmp_path: Path) -> None:
    outside = write_gguf(tmp_path / "downloads" / "my-model-Q4_K_M.gguf")
    lib = tree.library()

    copied = lib.import_file(outside, mode="copy")
    assert copied.source == "imported" and copied.owned
    assert copied.id == "@imported/my-model-Q4_K_M/my-model-Q4_K_M.gguf"
    assert not copied.path.is_symlink() and copied.path.read_bytes() == outside.read_bytes()
    entry = read_manifest(copied.path.parent)[copied.path.name]
    assert entry["mode"] == "copy" and entry["imported_from"] == str(outside.resolve())
    with pytest.raises(LibraryError, match="already imported"):
        lib.import_file(outside)
    lib.delete(copied.id)
    assert outside.exists() and not copied.path.exists()
    assert not (tree.models / "@imported").exists()  # empty folders pruned

    linked = lib.import_file(outside, mode="link")
    assert linked.path.is_symlink() and linked.path.resolve() == outside.resolve()
    lib.delete(linked.id)
    assert outside.exists() and not linked.path.is_symlink()  # the link went, not the file

    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(LibraryError, match=r"not a \.gguf"):
        lib.import_file(tmp_path / "x.txt")
    (tmp_path / "fake.gguf").write_text("hello")
    with pytest.raises(ValueError, match="not a GGUF"):
        lib.import_file(tmp_path / "fake.gguf")


def test_delete_only_removes_owned_files(tree: Tree) -> None:
    owned = tree.ember("alice/Two-GGUF", "two-Q4_K_M.gguf")
    kept = tree.ember("alice/Two-GGUF", "two-Q8_0.gguf", quant="Q8_0")
    cached = tree.hf_cache("bob/Cached-GGUF", "c-Q4_K_M.gguf")
    lib = tree.library()
    lib.scan()
    lib.delete("alice/Two-GGUF/two-Q4_K_M.gguf")
    assert not owned.exists() and kept.exists()
    assert set(read_manifest(owned.parent)) == {"two-Q8_0.gguf"}
    lib.delete("alice/Two-GGUF/two-Q8_0.gguf")
    assert not (tree.models / "alice").exists()

    hf_model = lib.find("bob/Cached-GGUF")
    assert lib.delete(hf_model.id) == "hidden"  # not Ember's file: hidden, never deleted
    assert cached.exists() and cached.resolve().exists()
    assert hf_model.id not in {m.id for m in lib.scan()}
    assert lib.unhide(str(cached)) and hf_model.id in {m.id for m in lib.scan()}
    with pytest.raises(NoMatchingModelError):
        lib.delete("nope/none/x.gguf")


def test_find_resolves_what_a_user_typed(tree: Tree) -> None:
    q4 = tree.ember("alice/Llama-GGUF", "llama-Q4_K_M.gguf")
    tree.ember("alice/Llama-GGUF", "llama-Q8_0.gguf", quant="Q8_0")
    tree.ember("bob/Qwen-GGUF", "qwen-Q4_K_M.gguf", name="Qwen")  # other bytes, own entry
    loose = write_gguf(tree.extra / "special-sauce.gguf", name="Special sauce")
    lib = tree.library()

    assert lib.find("alice/Llama-GGUF/llama-Q4_K_M.gguf").path == q4  # exact id
    assert lib.find(str(q4)).path == q4  # a path
    assert lib.find(str(loose)).source == "folder"
    assert lib.find("bob/Qwen-GGUF").name == "qwen-Q4_K_M"  # a repo with one file
    assert lib.find("alice/Llama-GGUF:q8_0").quant == "Q8_0"  # repo:QUANT
    assert lib.find("alice/Llama-GGUF:llama-Q4_K_M.gguf").path == q4  # repo:FILENAME
    assert lib.find("sauce").path == loose  # a unique substring
    assert lib.find("qwen-Q4_K_M").repo_id == "bob/Qwen-GGUF"  # a name

    with pytest.raises(AmbiguousModelError) as err:
        lib.find("alice/Llama-GGUF")
    assert set(err.value.candidates) == {
        "alice/Llama-GGUF/llama-Q4_K_M.gguf",
        "alice/Llama-GGUF/llama-Q8_0.gguf",
    }
    assert "llama-Q8_0" in str(err.value)
    with pytest.raises(AmbiguousModelError):
        lib.find("Q4_K_M")
    with pytest.raises(NoMatchingModelError, match="ember pull alice/Llama-GGUF:Q2_K"):
        lib.find("alice/Llama-GGUF:Q2_K")
    with pytest.raises(NoMatchingModelError, match="No model matches 'zzz'"):
        lib.find("zzz")

    outside = write_gguf(tree.root / "elsewhere" / "solo.gguf")
    found = lib.find(str(outside))  # a file outside the library still runs
    assert found.path == outside and not found.owned


@pytest.mark.parametrize(
    "name", ["a" * 300, "/" + "a" * 300 + ".gguf", "x/" * 3000, "~nobody-ember-test/model.gguf"]
)
def test_a_name_no_file_can_have_matches_no_model(tree: Tree, name: str) -> None:
    """Over 255 bytes (ENAMETOOLONG), or '~someone' who does not exist: looking for a file by
    that name raised an OSError (a 500 from the API); it is a name that matches nothing."""
    tree.ember("alice/Llama-GGUF", "llama-Q4_K_M.gguf")
    with pytest.raises(NoMatchingModelError, match="No model matches"):
        tree.library().find(name)


def test_add_and_remove_folders(tree: Tree, tmp_path: Path) -> None:
    lib = Library(
        tree.models, hf_cache_dir=tree.hf, lmstudio_dirs=(), cache_path=tmp_path / "c.json"
    )
    write_gguf(tree.extra / "a.gguf")
    assert lib.scan() == []
    assert lib.add_folder(tree.extra) == (tree.extra.resolve(),)
    assert [m.name for m in lib.models] == ["a"]
    assert lib.remove_folder(tree.extra) == ()
    assert lib.models == []
    with pytest.raises(LibraryError, match="not a folder"):
        lib.add_folder(tmp_path / "missing")


def test_a_folder_added_during_a_scan_is_not_lost(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app scans on a background thread while the user adds a folder: the scan that
    started first must not put back a list without the new folder's models."""
    import threading

    lib = Library(
        tree.models, hf_cache_dir=tree.hf, lmstudio_dirs=(), cache_path=tmp_path / "c.json"
    )
    tree.ember("alice/Old-GGUF", "old-Q4_K_M.gguf")
    write_gguf(tree.extra / "new.gguf", name="New")  # other content: its own entry
    scanning, release = threading.Event(), threading.Event()
    describe = Library._describe

    def slow_describe(self: Library, *args: Any) -> Any:
        scanning.set()
        release.wait(10)  # the scan is half-way when the user acts
        return describe(self, *args)

    monkeypatch.setattr(Library, "_describe", slow_describe)
    scan = threading.Thread(target=lib.scan)
    scan.start()
    assert scanning.wait(10)
    add = threading.Thread(target=lib.add_folder, args=(tree.extra,))
    add.start()
    add.join(0.3)
    assert add.is_alive()  # waits for the scan instead of racing it
    release.set()
    scan.join(10)
    add.join(10)
    assert sorted(m.name for m in lib.models) == ["new", "old-Q4_K_M"]


def test_looking_up_one_file_keeps_the_metadata_cache(tree: Tree, tmp_path: Path) -> None:
    """``find(path)`` (the API naming a file) reads one header; the cache of the others stays."""
    import json

    lib = tree.library()
    tree.ember("alice/A-GGUF", "a-Q4_K_M.gguf")
    write_gguf(tree.extra / "b.gguf")
    outside = write_gguf(tmp_path / "elsewhere" / "c.gguf")
    lib.scan()
    cache = tree.root / "cache" / "library.json"
    before = set(json.loads(cache.read_text())["entries"])
    assert len(before) == 2
    lib.find(str(outside))
    assert before <= set(json.loads(cache.read_text())["entries"])
