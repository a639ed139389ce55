"""/api/pull, /api/copy and /api/delete through the official `ollama` client, against a real
server whose library is EMBER_HOME's, pulling from the local stand-in for the Hugging Face Hub
(tests/helpers/hub_server.py) through Ember's resumable, verified downloader."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import ollama
import pytest

from app.config import paths
from app.engine.worker import EngineWorker
from app.library.local import Library
from app.server.catalog import LibraryCatalog
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.runner import ServerRunner
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeHub, FakeRepo, fake_hub_env
from tests.helpers.served import ollama_names, serving
from tests.helpers.waiting import wait_until

REPO = "someone/Tiny-GGUF"
NAME = f"hf.co/{REPO}:Q4_K_M"
MB = 1024 * 1024


@dataclass
class Server:
    root: str
    gateway: Gateway
    hub: FakeHub
    runner: ServerRunner


@pytest.fixture
def server(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with fake_hub_env(monkeypatch, tmp_path_factory) as hub:
        files = {f"Tiny-{q}.gguf": gguf_bytes(quant=q, name="Tiny") for q in ("Q4_K_M", "Q8_0")}
        hub.add(FakeRepo(REPO, files))
        p = paths().ensure()
        library = Library(
            models_dir=p.models_dir,
            hf_cache_dir=p.home / "hf",
            lmstudio_dirs=(),
            cache_path=p.home / "library.json",
        )
        worker = EngineWorker()
        gateway = Gateway(worker, LibraryCatalog(library))
        with serving(gateway, ServerConfig(port=0)) as runner:
            assert runner.base_url is not None
            yield Server(runner.base_url.removesuffix("/v1"), gateway, hub, runner)


@pytest.fixture
def c(server: Server) -> Iterator[ollama.Client]:
    with ollama.Client(host=server.root) as client:
        yield client


def test_pull_streams_progress_then_the_model_is_listed(c: ollama.Client) -> None:
    assert NAME not in ollama_names(c)
    progress = list(c.pull(NAME, stream=True))
    statuses = [p.status for p in progress]
    assert statuses[0] == "pulling manifest"
    assert statuses[-1] == "success"
    assert "verifying sha256 digest" in statuses
    pulling = [p for p in progress if (p.status or "").startswith("pulling sha") or p.total]
    assert pulling and pulling[-1].total == pulling[-1].completed
    assert (pulling[-1].digest or "").startswith("sha256:")
    assert NAME in ollama_names(c)  # listed at once (no wait for the library's next scan)
    files = sorted(p.name for p in paths().models_dir.rglob("*.gguf"))
    assert files == ["Tiny-Q4_K_M.gguf"]

    again = c.pull(NAME)  # already there: no download, just success
    assert again.status == "success"
    other = c.pull(f"huggingface.co/{REPO}:q8_0")  # any case, either host name
    assert other.status == "success"
    assert f"hf.co/{REPO}:Q8_0" in ollama_names(c)


def test_names_that_cannot_be_pulled(c: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("llama3.2")
    assert e.value.status_code == 400 and "hf.co/OWNER/REPO" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("hf.co/someone/Missing-GGUF")
    assert e.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as e:
        c.pull(f"hf.co/{REPO}:Q2_K")
    assert e.value.status_code == 404 and "Q4_K_M" in e.value.error  # it names the choices
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("hf.co/../etc:Q4_K_M")
    assert e.value.status_code == 400


def test_copy_is_an_alias_both_apis_accept_and_delete_removes(
    server: Server, c: ollama.Client
) -> None:
    c.pull(NAME)
    assert c.copy(NAME, "tiny").status == "success"
    assert "tiny" in ollama_names(c)
    assert c.show("tiny:latest").details is not None
    entry = server.gateway.catalog.resolve("tiny")  # what the OpenAI routes resolve names by
    assert entry is not None and entry.path.endswith("Tiny-Q4_K_M.gguf")
    with pytest.raises(ollama.ResponseError) as e:
        c.copy(NAME, "bad name!")
    assert e.value.status_code == 400

    assert c.delete("tiny").status == "success"  # the alias only
    assert "tiny" not in ollama_names(c) and NAME in ollama_names(c)
    assert c.delete(NAME).status == "success"
    assert NAME not in ollama_names(c)
    assert not list(paths().models_dir.rglob("*.gguf"))
    with pytest.raises(ollama.ResponseError) as e:
        c.delete(NAME)
    assert e.value.status_code == 404


def test_pull_without_streaming_and_a_failed_download(server: Server) -> None:
    with httpx.Client(base_url=server.root, timeout=60) as http:
        server.hub.corrupt(REPO, "Tiny-Q8_0.gguf")
        failed = http.post("/api/pull", json={"model": f"hf.co/{REPO}:Q8_0", "stream": False})
        assert failed.status_code == 500
        assert "sha256 does not match" in failed.json()["error"]
        done = http.post("/api/pull", json={"model": NAME, "stream": False})
        assert done.status_code == 200 and done.json() == {"status": "success"}


def test_a_pull_the_client_leaves_is_paused_and_the_next_one_resumes(
    server: Server, c: ollama.Client
) -> None:
    data = gguf_bytes(quant="Q6_K", name="Big") + bytes(2 * MB)
    server.hub.add(FakeRepo("someone/Big-GGUF", {"Big-Q6_K.gguf": data}))
    server.hub.throttle_bps = MB
    big = "hf.co/someone/Big-GGUF:Q6_K"
    with (
        httpx.Client(base_url=server.root, timeout=60) as http,
        http.stream("POST", "/api/pull", json={"model": big}) as answer,
    ):
        for raw in answer.iter_lines():
            if json.loads(raw).get("completed", 0) > 100_000:
                break  # the client goes away mid-download
    # the first pull's answer is over (logged) once its downloader stopped
    wait_until(lambda: any(r.path == "/api/pull" for r in server.runner.request_log.records()))
    (first,) = server.runner.request_log.records()
    assert first.error and "pull the model again to resume" in first.error
    partial = next(paths().downloads_dir.rglob("*.part")).stat().st_size
    assert 0 < partial < len(data)
    server.hub.throttle_bps = None
    assert c.pull(big).status == "success"
    gets = server.hub.log(path_contains="/cdn/", method="GET")
    assert len(gets) == 2 and gets[1].headers["range"] == f"bytes={partial}-"
    assert gets[1].status == 206
    (model,) = paths().models_dir.rglob("Big-Q6_K.gguf")
    assert model.read_bytes() == data
