"""Hub search, file listing, model cards and remote headers against the fake Hub."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import huggingface_hub.constants
import pytest
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub import errors as hf_errors

from app.config import paths
from app.engine.fit import fit_check
from app.engine.gguf_reader import NotGGUFError
from app.library.download_state import DownloadState
from app.library.downloads import DownloadManager
from app.library.hub import fetch_header, list_gguf_files, model_card, search_models
from app.library.hub_errors import (
    GatedRepoError,
    HeaderTooLargeError,
    HubUnreachableError,
    RepoNotFoundError,
    UnsafeNameError,
)
from app.library.local import Library
from tests.helpers.downloads import Recorder, tiny_repo
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeFile, FakeHub, FakeRepo


def test_fake_hub_is_understood_by_huggingface_hub(hub: FakeHub, tmp_path: Path) -> None:
    """The fake speaks the real routes: huggingface_hub's own calls work against it."""
    data = gguf_bytes(quant="Q8_0")
    hub.add(FakeRepo("alice/Tiny-GGUF", {"sub/tiny-Q8_0.gguf": data}, card="# Tiny\n", likes=3))
    hub.add(tiny_repo("bob/Locked-GGUF", gated="auto"))
    api = HfApi(endpoint=hub.url, token=False)

    found = list(api.list_models(search="tiny", filter="gguf", sort="likes", limit=5))
    assert [m.id for m in found] == ["alice/Tiny-GGUF"]
    assert found[0].likes == 3
    info = api.model_info("alice/Tiny-GGUF", files_metadata=True)
    sibling = next(s for s in info.siblings or [] if s.rfilename == "sub/tiny-Q8_0.gguf")
    assert sibling.size == len(data) and sibling.lfs is not None
    assert len(sibling.lfs.sha256) == 64
    tree = [f.path for f in api.list_repo_tree("alice/Tiny-GGUF", recursive=True)]
    assert "sub/tiny-Q8_0.gguf" in tree

    path = hf_hub_download(
        "alice/Tiny-GGUF", "sub/tiny-Q8_0.gguf", endpoint=hub.url, cache_dir=tmp_path, token=False
    )
    assert Path(path).read_bytes() == data
    # the LFS file was redirected to the "CDN" (another origin), like the real Hub does
    assert hub.log(path_contains="/resolve/", method="HEAD")[0].status == 302
    assert hub.log(path_contains="/cdn/", method="GET")

    with pytest.raises(hf_errors.GatedRepoError):
        hf_hub_download(
            "bob/Locked-GGUF",
            "Locked-Q4_K_M.gguf",
            endpoint=hub.url,
            cache_dir=tmp_path,
            token=False,
        )
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        api.model_info("nobody/nothing")


def _search_repos(hub: FakeHub) -> None:
    hub.add(tiny_repo("alice/Llama-3-8B-GGUF", downloads=500, likes=10, trending_score=5,
                      last_modified="2025-03-01T00:00:00.000Z"))  # fmt: skip
    hub.add(tiny_repo("bob/Qwen-1.5B-GGUF", downloads=900, likes=2, trending_score=50,
                      last_modified="2025-01-01T00:00:00.000Z"))  # fmt: skip
    hub.add(tiny_repo("alice/Big-70B-GGUF", downloads=100, likes=99, trending_score=1,
                      last_modified="2025-05-01T00:00:00.000Z"))  # fmt: skip
    hub.add(tiny_repo("carol/Mystery-GGUF", downloads=50, gguf={"total": 3_200_000_000}))
    hub.add(FakeRepo("alice/Llama-3-8B", {"model.safetensors": b"x"}, tags=["safetensors"],
                     downloads=10_000))  # fmt: skip


def test_search_sorts_filters_and_only_lists_gguf(hub: FakeHub) -> None:
    _search_repos(hub)
    by_downloads = [r.id for r in search_models("", sort="downloads")]
    assert by_downloads == [
        "bob/Qwen-1.5B-GGUF",
        "alice/Llama-3-8B-GGUF",
        "alice/Big-70B-GGUF",
        "carol/Mystery-GGUF",
    ]  # the safetensors repo is not GGUF, so not listed
    assert search_models(sort="likes")[0].id == "alice/Big-70B-GGUF"
    assert search_models(sort="trending")[0].id == "bob/Qwen-1.5B-GGUF"
    assert search_models(sort="updated")[0].id == "alice/Big-70B-GGUF"
    assert [r.id for r in search_models("llama")] == ["alice/Llama-3-8B-GGUF"]
    assert {r.id for r in search_models(author="alice")} == {
        "alice/Llama-3-8B-GGUF",
        "alice/Big-70B-GGUF",
    }
    assert len(search_models(limit=2)) == 2

    first = search_models("llama")[0]
    assert (first.author, first.downloads, first.likes, first.params) == ("alice", 500, 10, "8B")
    assert first.last_modified is not None and first.last_modified.year == 2025
    assert "gguf" in first.tags

    mystery = search_models("mystery")[0]
    assert mystery.params == "3.2B"  # from the Hub's GGUF parameter count
    small = {r.id for r in search_models(min_params=1, max_params=10)}
    assert small == {"alice/Llama-3-8B-GGUF", "bob/Qwen-1.5B-GGUF", "carol/Mystery-GGUF"}
    assert [r.id for r in search_models(min_params=20)] == ["alice/Big-70B-GGUF"]

    request = hub.log(path_contains="/api/models")[0]
    assert request.query["filter"] == ["gguf"]
    assert "downloads" in request.query["expand"]
    with pytest.raises(ValueError, match="sort"):
        search_models(sort="stars")  # type: ignore[arg-type]


def test_unreachable_hub_fails_fast_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)  # a retry would back off first
    with pytest.raises(HubUnreachableError, match=f"Can't reach the Hugging Face Hub at {url}"):
        search_models("llama")
    with pytest.raises(HubUnreachableError) as refused:
        list_gguf_files("a/b")
    assert slept == []  # failed at the first refusal, without retrying
    assert "the connection was refused" in str(refused.value)
    assert "Errno" not in str(refused.value)

    monkeypatch.setenv("HF_ENDPOINT", "http://hub.invalid")  # .invalid never resolves
    with pytest.raises(HubUnreachableError) as unnamed:
        search_models("llama")
    assert "its name could not be looked up (no network, or no DNS)" in str(unnamed.value)
    assert "Errno" not in str(unnamed.value)

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubUnreachableError, match="HF_HUB_OFFLINE"):
        search_models("llama")


def test_list_gguf_files_groups_quants_splits_and_projectors(hub: FakeHub) -> None:
    small = gguf_bytes()
    files: dict[str, object] = {
        f"m-{q}.gguf": gguf_bytes(quant=q) for q in ("Q8_0", "Q4_K_M", "IQ3_XS", "F16", "BF16")
    }
    for i in (1, 2, 3):
        files[f"Q6_K/m-Q6_K-{i:05d}-of-00003.gguf"] = small + bytes(i)
    files["mmproj-m-f16.gguf"] = small
    files["m.Q2_K.gguf"] = small
    files["../evil.gguf"] = small
    files["model.safetensors"] = b"st"
    hub.add(FakeRepo("alice/M-GGUF", files, card="# M", gated="manual"))

    listing = list_gguf_files("alice/M-GGUF")
    assert listing.gated and listing.commit == hub.repos["alice/M-GGUF"].sha
    assert [m.quant for m in listing.models] == [
        "Q2_K", "IQ3_XS", "Q4_K_M", "Q6_K", "Q8_0", "BF16", "F16",
    ]  # fmt: skip
    split = next(m for m in listing.models if m.quant == "Q6_K")
    assert split.is_split and split.is_complete and split.name == "m-Q6_K"
    assert split.filenames == tuple(f"Q6_K/m-Q6_K-{i:05d}-of-00003.gguf" for i in (1, 2, 3))
    assert split.size == 3 * len(small) + 6
    assert all(p.sha256 and len(p.sha256) == 64 for p in split.parts)
    assert [p.filename for p in listing.projectors] == ["mmproj-m-f16.gguf"]
    every = [f for m in listing.models for f in m.filenames]
    assert "mmproj-m-f16.gguf" not in every and "../evil.gguf" not in every
    assert list(listing.by_quant())[:3] == ["Q2_K", "IQ3_XS", "Q4_K_M"]

    assert listing.select().quant == "Q4_K_M"
    assert listing.select("q8_0").filename == "m-Q8_0.gguf"
    assert listing.select("Q6_K/m-Q6_K-00002-of-00003.gguf") is split
    with pytest.raises(LookupError, match="Q5_K_M"):
        listing.select("Q5_K_M")


def test_model_card_and_errors(hub: FakeHub) -> None:
    card = "---\nlicense: mit\ntags: [gguf]\n---\n\n# A model\n\nUse it well.\n"
    hub.add(tiny_repo("alice/Card-GGUF", card=card))
    hub.add(tiny_repo("alice/NoCard-GGUF"))
    assert model_card("alice/Card-GGUF") == "# A model\n\nUse it well.\n"
    assert model_card("alice/NoCard-GGUF") == ""
    with pytest.raises(RepoNotFoundError, match="no repository nobody/none"):
        list_gguf_files("nobody/none")
    for bad in ("../etc", "a/b/c", "noslash", "a/..", "a/b\\c"):
        with pytest.raises(UnsafeNameError):
            list_gguf_files(bad)


def test_fetch_header_reads_only_the_head(hub: FakeHub) -> None:
    # A 40,000-token vocabulary makes a ~600 KB header, more than the first request asks for.
    data = gguf_bytes(vocab_size=40_000, context_length=8192, payload=3_000_000, arch="qwen2")
    hub.add(FakeRepo("alice/Big-Header-GGUF", {"big-Q4_K_M.gguf": data}))
    info = fetch_header("alice/Big-Header-GGUF", "big-Q4_K_M.gguf", initial=64 * 1024)
    assert info.architecture == "qwen2" and info.context_length == 8192
    assert info.file_size == len(data)
    assert info.vocab_size == 40_000

    gets = hub.log(path_contains="/cdn/", method="GET")
    assert len(gets) >= 2  # grew its range
    assert all(g.headers.get("range", "").startswith("bytes=") for g in gets)
    served = hub.body_bytes("/cdn/")
    header_end = info.tensor_data_offset
    assert header_end <= served < header_end + 2_000_000 < len(data)

    with pytest.raises(HeaderTooLargeError):
        fetch_header(
            "alice/Big-Header-GGUF", "big-Q4_K_M.gguf", initial=64 * 1024, max_bytes=200_000
        )


def test_fetch_header_errors(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add(FakeRepo("alice/Odd-GGUF", {"odd.gguf": FakeFile(b"<!DOCTYPE html>" * 100)}))
    hub.add(tiny_repo("bob/Locked-GGUF", gated="auto"))
    with pytest.raises(NotGGUFError, match="web page"):
        fetch_header("alice/Odd-GGUF", "odd.gguf")
    with pytest.raises(GatedRepoError, match=r"gated.*accept its terms.*HF_TOKEN"):
        fetch_header("bob/Locked-GGUF", "Locked-Q4_K_M.gguf")
    monkeypatch.setenv("HF_TOKEN", hub.no_access_token)
    with pytest.raises(GatedRepoError, match="has no access"):
        fetch_header("bob/Locked-GGUF", "Locked-Q4_K_M.gguf")
    monkeypatch.setenv("HF_TOKEN", hub.token)
    assert fetch_header("bob/Locked-GGUF", "Locked-Q4_K_M.gguf").architecture == "llama"
    with pytest.raises(UnsafeNameError):
        fetch_header("bob/Locked-GGUF", "../x.gguf")


def test_real_model_header_and_fit(hub: FakeHub, gemma_path: Path) -> None:
    """The real Gemma file: its 6.5 MB header is fetched in a few ranged requests."""
    hub.add(FakeRepo("google/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": gemma_path}))
    info = fetch_header("google/gemma-3-270m-GGUF", "gemma-3-270m-Q4_K_M.gguf")
    assert info.architecture == "gemma3"
    assert info.file_size == gemma_path.stat().st_size
    served = hub.body_bytes("/cdn/")
    assert served < 0.1 * gemma_path.stat().st_size
    assert len(hub.log(path_contains="/cdn/", method="GET")) <= 6
    result = fit_check(info, 4096, available_ram=8 * 10**9)
    assert result.level == "fits" and result.estimate.weights_bytes > 100_000_000


def test_real_model_download_end_to_end(hub: FakeHub, gemma_path: Path, ember_home: Path) -> None:
    """Search, list, download and verify the real 250 MB model; the library then lists it."""
    hub.add(FakeRepo("google/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": gemma_path}))
    (found,) = search_models("gemma")
    model = list_gguf_files(found.id).select()
    assert model.quant == "Q4_K_M" and model.size == gemma_path.stat().st_size
    p = paths()
    with DownloadManager(p.models_dir, p.downloads_dir) as manager:
        recorder = Recorder(manager)
        d = manager.start(found.id, model)
        done = recorder.wait_state(d.id, DownloadState.COMPLETED, DownloadState.FAILED, timeout=120)
    assert done.state == DownloadState.COMPLETED, done.error
    local = Library(p.models_dir, hf_cache_dir=ember_home / "no-cache", lmstudio_dirs=()).find(
        "google/gemma-3-270m-GGUF:Q4_K_M"
    )
    assert local.info is not None and local.info.architecture == "gemma3"
    assert local.size == gemma_path.stat().st_size and local.owned
