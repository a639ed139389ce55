"""What issue 14 is done by: the official `ollama` client lists, shows, chats (streaming and
not), generates, embeds, pulls and deletes against `ember serve` run as a user runs it (a real
subprocess, the real Gemma model, the local stand-in for the Hugging Face Hub)."""

from __future__ import annotations

from pathlib import Path

import ollama
import pytest

from tests.helpers.cli import reaped, serve_process, stop
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeRepo, fake_hub_env
from tests.helpers.net import free_port, wait_for_health


def test_the_ollama_client_against_ember_serve(
    gemma_path: Path,
    ember_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with fake_hub_env(monkeypatch, tmp_path_factory) as hub:
        hub.add(FakeRepo("someone/Tiny-GGUF", {"Tiny-Q4_K_M.gguf": gguf_bytes(name="Tiny")}))
        port = free_port()
        root = f"http://127.0.0.1:{port}"
        args = ("--model", str(gemma_path), "--port", str(port), "--ctx", "1024")
        with reaped(serve_process(*args)) as process:
            wait_for_health(root, process)
            with ollama.Client(host=root) as client:
                run_the_client(client)
            out, err = stop(process, timeout=30)
    assert process.returncode == 0, err
    assert f"Ollama-compatible API at {root}" in out.splitlines()


def run_the_client(client: ollama.Client) -> None:
    (listed,) = client.list().models
    name = listed.model or ""
    assert name == "gemma-3-270m:Q4_K_M"  # the --model file, named as Ollama names models
    assert "completion" in (client.show(name).capabilities or [])
    options = {"num_predict": 2, "temperature": 0}
    chat = [{"role": "user", "content": "Hi"}]
    whole = client.chat(model=name, messages=chat, options=options)
    assert whole.done and whole.eval_count == 2
    parts = list(client.chat(model=name, messages=chat, options=options, stream=True))
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    generated = client.generate(model=name, prompt="Once upon a", options=options)
    assert generated.done and generated.eval_count == 2
    assert len(client.embed(model=name, input="hello").embeddings[0]) == 640
    assert [m.model for m in client.ps().models] == [name]

    assert client.pull("hf.co/someone/Tiny-GGUF").status == "success"
    pulled = "hf.co/someone/Tiny-GGUF:Q4_K_M"
    assert pulled in [m.model for m in client.list().models]
    assert client.delete(pulled).status == "success"
    assert [m.model for m in client.list().models] == [name]
