"""Models in other apps' stores run in place and are never deleted (issue 25, point 1).

A fake Ollama store holds the real test model as one blob (hard-linked, not copied, where the
file system allows), with fake Jan, GPT4All and llama.cpp folders beside it. The model is
listed by `/v1/models`, `/api/tags` and `ember ls`, loads from its blob and answers; every
delete path (`/api/delete`, `ember rm`, the library) hides, and a checksum of every file in
the read-only stores is the same before and after."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.library.local import Library
from app.library.stores import known_stores
from app.server.catalog import LibraryCatalog
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.runner import ServerRunner
from tests.helpers.cli import ember
from tests.helpers.gguf_writer import gguf_bytes, write_gguf
from tests.helpers.other_stores import canary, make_read_only, make_writable, ollama_model

GEMMA = "gemma3:270m"


@dataclass
class Stores:
    root: Path
    env: dict[str, str]  # where each app's store is, as its environment says
    runner: ServerRunner
    gateway: Gateway
    library: Library

    @property
    def root_url(self) -> str:
        url = self.runner.base_url
        assert url is not None
        return url.removesuffix("/v1")


def build_stores(root: Path, gemma_path: Path) -> dict[str, str]:
    """Ollama's store (the test model, and a small model), Jan's, GPT4All's and llama.cpp's."""
    ollama = root / "ollama"
    ollama_model(ollama, GEMMA, gemma_path, template="{{ .Prompt }}", params={"top_k": 64})
    ollama_model(ollama, "tiny:latest", gguf_bytes(name="Tiny"))
    data = root / "data"
    write_gguf(data / "Jan/data/llamacpp/models/jan-nano/model.gguf", name="Jan nano")
    write_gguf(data / "nomic.ai/GPT4All/orca-mini-3b.Q4_0.gguf", name="Orca", quant="Q4_0")
    llama = root / "llama.cpp"
    write_gguf(llama / "ggml-org_SmolLM-GGUF_smol-Q8_0.gguf", name="Smol", quant="Q8_0")
    return {"OLLAMA_MODELS": str(ollama), "LLAMA_CACHE": str(llama), "XDG_DATA_HOME": str(data)}


@pytest.fixture(scope="module")
def stores(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    root = tmp_path_factory.mktemp("other-apps")
    env = build_stores(root, gemma_path)
    library = Library(
        root / "ember-models",
        hf_cache_dir=root / "hf",
        lmstudio_dirs=(),
        cache_path=root / "library.json",
        stores=known_stores(env, root / "home"),
        hidden_path=root / "hidden.json",
    )
    worker = EngineWorker()
    gateway = Gateway(worker, LibraryCatalog(library, rescan_after=0.5), LoadParams(n_ctx=2048))
    runner = ServerRunner(gateway, ServerConfig(port=0))
    runner.start()
    try:
        yield Stores(root, env, runner, gateway, library)
    finally:
        runner.stop()
        worker.shutdown()
        make_writable(root)


@pytest.fixture
def as_user(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ember` run in a terminal whose environment names the fake stores."""
    for name, value in stores.env.items():
        monkeypatch.setenv(name, value)


def test_an_ollama_model_is_listed_everywhere_and_answers_from_its_blob(
    stores: Stores, as_user: None
) -> None:
    blob = stores.library.find(GEMMA).path
    assert blob.parent == stores.root / "ollama" / "blobs"
    with httpx.Client(base_url=stores.root_url, timeout=60) as http:
        ids = [m["id"] for m in http.get("/v1/models").json()["data"]]
        tags = [m["name"] for m in http.get("/api/tags").json()["models"]]
    assert GEMMA in ids and GEMMA in tags and "tiny:latest" in tags
    listed = json.loads(ember("ls", "--json").stdout)
    gemma = next(m for m in listed if m["id"] == GEMMA)
    assert gemma["source"] == "ollama" and gemma["path"] == str(blob)

    with openai.OpenAI(base_url=f"{stores.root_url}/v1", api_key="x", max_retries=0) as client:
        answer = client.chat.completions.create(
            model=GEMMA,
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=8,
            temperature=0,
        )
    assert answer.choices[0].message.content
    loaded = stores.gateway.loaded()
    assert [m.path for m in loaded] == [str(blob)]  # in place: the blob itself, not a copy


def test_every_delete_path_hides_and_the_read_only_stores_are_untouched(
    stores: Stores, as_user: None
) -> None:
    make_read_only(stores.root / "ollama")
    for name in ("data", "llama.cpp"):
        make_read_only(stores.root / name)
    before = {name: canary(stores.root / name) for name in ("ollama", "data", "llama.cpp")}
    assert len(before["ollama"]) >= 10  # manifests, blobs and their folders

    with httpx.Client(base_url=stores.root_url, timeout=120) as http:
        for name in (GEMMA, "tiny:latest", "jan-nano:latest"):
            deleted = http.request("DELETE", "/api/delete", json={"model": name})
            assert deleted.status_code == 200, deleted.text
            assert deleted.json()["status"] == "hidden"
            assert "never deletes another app's files" in deleted.json()["message"]
        tags = [m["name"] for m in http.get("/api/tags").json()["models"]]
    assert GEMMA not in tags and "tiny:latest" not in tags
    assert stores.gateway.loaded() == []  # the hidden model was unloaded first

    removed = ember("rm", "-y", "orca-mini-3b.Q4_0")  # the CLI, in its own EMBER_HOME
    assert removed.returncode == 0, removed.stderr
    assert "never deletes another app's files" in removed.stdout
    assert "orca-mini-3b" not in ember("ls").stdout
    assert "orca-mini-3b" in ember("ls", "--hidden").stdout
    smol = stores.library.find("smol")
    assert stores.library.delete(smol.id) == "hidden"

    after = {name: canary(stores.root / name) for name in ("ollama", "data", "llama.cpp")}
    assert after == before

    orca = Path(os.environ["XDG_DATA_HOME"]).resolve() / "nomic.ai/GPT4All/orca-mini-3b.Q4_0.gguf"
    assert ember("rm", "--unhide", str(orca)).returncode == 0
    assert "orca-mini-3b" in ember("ls").stdout
