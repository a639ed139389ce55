"""Providers: remote ids, the registry and its keys, routing, and `ember providers` / `ember run
--provider` end to end as subprocesses against a real llama-cpp-python server (with an API key)."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.engine.provider_ids import (
    PRESETS,
    RemoteModelId,
    format_remote_id,
    is_remote_id,
    parse_remote_id,
)
from app.engine.providers import (
    FileSecrets,
    Provider,
    ProviderError,
    ProviderKeyError,
    ProviderNotFoundError,
    ProviderRegistry,
    RemoteRouter,
    keyring_usable,
    make_provider,
)
from app.engine.remote_errors import RemoteAuthError
from app.engine.types import BadRequestError, ChatRequest, Failed, Finished, SamplingParams
from tests.helpers.cli import EMBER
from tests.helpers.llama_server import MODEL_ALIAS, LlamaServer, running_llama_server
from tests.helpers.memory_keyring import MemoryKeyring

KEY = "sk-provider-test"

# ---- remote model ids ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "provider", "model"),
    [
        (
            "gpu-box::meta-llama/Llama-3.1-8B-Instruct",
            "gpu-box",
            "meta-llama/Llama-3.1-8B-Instruct",
        ),
        ("ollama::llama3.2:3b", "ollama", "llama3.2:3b"),
        ("openai::gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("a1::x::y", "a1", "x::y"),
    ],
)
def test_remote_ids_parse(text: str, provider: str, model: str) -> None:
    parsed = parse_remote_id(text)
    assert parsed == RemoteModelId(provider, model)
    assert str(parsed) == text == format_remote_id(provider, model)
    assert is_remote_id(text)


@pytest.mark.parametrize(
    "text",
    [
        "meta-llama/Llama-3.1-8B-Instruct",  # a Hub repo id
        "bartowski/Qwen2.5-7B-GGUF:Q4_K_M",  # a Hub id with a quant tag
        "C:\\models\\qwen.gguf",  # Windows paths have one colon
        "/home/me/a::b.gguf",
        "./a::b.gguf",
        "models/x.gguf",
        "Gpu::model",  # provider names are lowercase
        "gpu-::model",
        "gpu::",  # no model
        "::model",
        "gemma-3-270m",
    ],
)
def test_other_names_are_not_remote_ids(text: str) -> None:
    assert parse_remote_id(text) is None
    assert not is_remote_id(text)


def test_format_rejects_bad_parts() -> None:
    with pytest.raises(ValueError, match="not a valid provider name"):
        format_remote_id("GPU box", "m")
    with pytest.raises(ValueError):
        format_remote_id("gpu", "")


# ---- presets and providers ----------------------------------------------------------------------


def test_presets_have_the_usual_urls() -> None:
    urls = {name: p.base_url for name, p in PRESETS.items()}
    assert urls == {
        "vllm": "http://localhost:8000/v1",
        "sglang": "http://localhost:30000/v1",
        "tgi": "http://localhost:8080/v1",
        "ollama": "http://localhost:11434/v1",
        "lmstudio": "http://localhost:1234/v1",
        "llama-server": "http://localhost:8080/v1",
        "openai": "https://api.openai.com/v1",
    }
    assert not PRESETS["openai"].llama_extras


def test_make_provider_uses_the_preset_url_and_validates() -> None:
    p = make_provider("local-ollama", preset="ollama")
    assert p.base_url == "http://localhost:11434/v1"
    assert make_provider("box", "http://box:8000/").base_url == "http://box:8000/v1"
    with pytest.raises(ValueError, match="base URL or a preset"):
        make_provider("box")
    with pytest.raises(ValueError, match="Unknown preset"):
        make_provider("box", preset="nope")
    with pytest.raises(ValueError, match="not a valid provider name"):
        make_provider("My_Box", "http://box")
    with pytest.raises(ValueError, match="environment variable"):
        make_provider("box", "http://box", api_key_env="NOT-A-VAR")


# ---- the registry and keys ----------------------------------------------------------------------


def test_registry_add_list_get_remove(ember_home: Path, no_keyring: None) -> None:
    registry = ProviderRegistry()
    assert registry.path == ember_home / "providers.json"
    registry.add(make_provider("vllm-box", "http://box:8000", "vllm"))
    registry.add(make_provider("a-local", preset="ollama"))
    assert [p.name for p in registry.list()] == ["a-local", "vllm-box"]
    assert registry.get("vllm-box").base_url == "http://box:8000/v1"
    with pytest.raises(ProviderError, match="exists already"):
        registry.add(make_provider("a-local", preset="lmstudio"))
    registry.add(make_provider("a-local", preset="lmstudio"), replace=True)
    assert ProviderRegistry().get("a-local").preset == "lmstudio"  # persisted
    registry.remove("a-local")
    with pytest.raises(ProviderNotFoundError, match=r"known: vllm-box"):
        registry.get("a-local")
    with pytest.raises(ProviderNotFoundError):
        registry.remove("a-local")


def test_keys_go_to_the_keyring_when_there_is_one(
    ember_home: Path, memory_keyring: MemoryKeyring
) -> None:
    assert keyring_usable()
    registry = ProviderRegistry()
    p = registry.add(make_provider("oa", preset="openai"), api_key="sk-secret")
    assert p.key_ref == "keyring"
    assert memory_keyring.passwords == {("Ember", "provider:oa"): "sk-secret"}
    assert "sk-secret" not in (ember_home / "providers.json").read_text()
    assert not (ember_home / "secrets.json").exists()
    assert registry.api_key(registry.get("oa")) == "sk-secret"
    registry.remove("oa")
    assert memory_keyring.passwords == {}


def test_without_a_keyring_keys_go_to_a_private_file(ember_home: Path, no_keyring: None) -> None:
    assert not keyring_usable()
    registry = ProviderRegistry()
    p = registry.add(make_provider("oa", preset="openai"), api_key="sk-secret")
    assert p.key_ref == "file"
    secrets = ember_home / "secrets.json"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert "sk-secret" not in (ember_home / "providers.json").read_text()
    assert ProviderRegistry().api_key(p) == "sk-secret"
    registry.remove("oa")
    assert FileSecrets(secrets).get("oa") is None


def test_env_keys_are_read_at_use(no_keyring: None, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ProviderRegistry()
    p = registry.add(make_provider("box", "http://box", api_key_env="BOX_KEY"))
    assert p.key_source == "env:BOX_KEY"
    with pytest.raises(ProviderKeyError, match=r"\$BOX_KEY, which is not set"):
        registry.api_key(p)
    monkeypatch.setenv("BOX_KEY", "one")
    assert registry.api_key(p) == "one"
    monkeypatch.setenv("BOX_KEY", "two")
    assert registry.api_key(p) == "two"


def test_update_keeps_or_replaces_the_key(ember_home: Path, no_keyring: None) -> None:
    registry = ProviderRegistry()
    registry.add(make_provider("box", "http://box"), api_key="k1")
    p = registry.update("box", base_url="http://box2:9000")
    assert (p.base_url, p.key_ref) == ("http://box2:9000/v1", "file")
    assert registry.api_key(p) == "k1"
    p = registry.update("box", api_key="k2")
    assert registry.api_key(p) == "k2"
    p = registry.update("box", api_key_env="BOX_KEY")
    assert p.key_ref == "env:BOX_KEY"
    assert FileSecrets(ember_home / "secrets.json").get("box") is None  # the old one is gone
    p = registry.update("box", api_key_env=None)
    assert p.key_ref is None
    assert registry.api_key(p) is None


def test_providers_and_keys_are_read_once_until_they_change(
    ember_home: Path,
    memory_keyring: MemoryKeyring,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = ProviderRegistry()
    registry.add(make_provider("box", "http://box:1"), api_key="sk-cached-one")
    reads: list[Path] = []
    read_text = Path.read_text

    def counting_read_text(self: Path, *args: Any, **kwargs: Any) -> str:
        if self == registry.path:
            reads.append(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting_read_text)
    memory_keyring.reads = 0
    router = RemoteRouter(registry)
    try:
        engine = router.engine("box")
        for _ in range(5):  # what every remote chat does
            assert router.engine("box") is engine
        assert (len(reads), memory_keyring.reads) == (1, 1)
        # changed through this registry: seen at once
        registry.update("box", api_key="sk-cached-two")
        assert router.engine("box") is not engine
        assert registry.api_key(registry.get("box")) == "sk-cached-two"
        # changed by another process (here another registry on the same file)
        other = ProviderRegistry()
        other.add(make_provider("box", "http://box2:2"), api_key="sk-cached-three", replace=True)
        p = registry.get("box")
        assert p.base_url == "http://box2:2/v1" and registry.api_key(p) == "sk-cached-three"
        # edited by hand in place
        data = json.loads(registry.path.read_text())
        data["providers"]["box"]["base_url"] = "http://edited-by-hand:3"
        registry.path.write_text(json.dumps(data))
        assert router.engine("box").base_url == "http://edited-by-hand:3/v1"
        other.remove("box")
        with pytest.raises(ProviderNotFoundError):
            registry.get("box")
    finally:
        router.shutdown()
    assert "sk-cached" not in caplog.text  # keys are never logged


def test_a_corrupt_registry_is_reported_not_overwritten(ember_home: Path) -> None:
    (ember_home / "providers.json").write_text("{not json")
    with pytest.raises(ProviderError, match="unreadable"):
        ProviderRegistry().list()
    assert (ember_home / "providers.json").read_text() == "{not json"


def test_provider_round_trips_through_json() -> None:
    p = Provider("box", "http://box:1/v1", "vllm", "env:X", {"X-Team": "ml"})
    assert Provider.from_json("box", p.to_json()) == p


# ---- against a real server: routing and the CLI ------------------------------------------------


@pytest.fixture(scope="module")
def server(gemma_path: Path) -> Iterator[LlamaServer]:
    with running_llama_server(gemma_path, api_key=KEY) as s:
        yield s


def test_router_sends_remote_ids_to_their_provider(
    server: LlamaServer, no_keyring: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = ProviderRegistry()
    registry.add(make_provider("local", server.root_url, api_key_env="LOCAL_KEY"))
    monkeypatch.setenv("LOCAL_KEY", KEY)
    router = RemoteRouter(registry)
    try:
        assert router.list_models("local") == [f"local::{MODEL_ALIAS}"]
        request = ChatRequest(
            [{"role": "user", "content": "Hi"}],
            SamplingParams(temperature=0, max_tokens=4),
            model=f"local::{MODEL_ALIAS}",
        )
        final = router.submit(request).wait(60)
        assert isinstance(final, Finished), final
        assert final.result
        # a changed key makes a new engine; a wrong one gets the clear 401
        monkeypatch.setenv("LOCAL_KEY", "wrong")
        final = router.submit(request).wait(30)
        assert isinstance(final, Failed)
        assert isinstance(final.error, RemoteAuthError)
        with pytest.raises(BadRequestError, match="not a remote model id"):
            router.submit(ChatRequest([], model="gemma-3-270m"))
    finally:
        router.shutdown()


def ember(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    environment.update(env or {})
    return subprocess.run(
        [*EMBER, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
    )


def test_cli_add_ls_test_run_rm(server: LlamaServer) -> None:
    env = {"LOCAL_KEY": KEY}
    r = ember("providers", "add", "local", server.root_url + "/", "--api-key-env", "LOCAL_KEY")
    assert r.returncode == 0, r.stderr
    assert f"Added local: {server.base_url} (key: env:LOCAL_KEY)" in r.stdout

    r = ember("providers", "ls")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "URL", "PRESET", "KEY"]
    assert lines[1].split() == ["local", server.base_url, "-", "env:LOCAL_KEY"]

    r = ember("providers", "test", "local", env=env)
    assert r.returncode == 0, r.stderr
    assert f"local at {server.base_url} answered in" in r.stdout
    assert f"  local::{MODEL_ALIAS}" in r.stdout.splitlines()

    r = ember("providers", "test", "local", env={"LOCAL_KEY": "wrong"})
    assert r.returncode == 1
    assert r.stderr.startswith("ember: error: The server rejected the API key")
    assert len(r.stderr.strip().splitlines()) == 1

    r = ember("run", "--provider", "local", MODEL_ALIAS, "Hello", "--temp", "0", "-n", "6", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()

    r = ember("run", f"local::{MODEL_ALIAS}", "Paris is", "--raw", "-n", "4", "--json", env=env)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["finish_reason"] == "length"
    assert summary["usage"]["completion_tokens"] == 4

    r = ember(
        "run", "--provider", "local", MODEL_ALIAS, "-n", "4", stdin="Hi\nAgain\n/bye\n", env=env
    )
    assert r.returncode == 0, r.stderr
    assert f"Chatting with {MODEL_ALIAS} on local" in r.stderr
    assert len([line for line in r.stdout.splitlines() if line.strip()]) >= 2

    r = ember("providers", "rm", "local")
    assert r.returncode == 0, r.stderr
    r = ember("providers", "test", "local")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "ember: error: No provider called 'local' (known: none yet). "
        "Add one with `ember providers add NAME BASE_URL`."
    )


def test_cli_stores_a_key_in_a_private_file_without_a_keyring(
    server: LlamaServer, ember_home: Path
) -> None:
    r = ember("providers", "add", "keyed", server.base_url, "--api-key", "-", stdin=KEY + "\n")
    assert r.returncode == 0, r.stderr
    assert "key: file" in r.stdout
    assert "no OS keyring is available" in r.stderr
    assert stat.S_IMODE((ember_home / "secrets.json").stat().st_mode) == 0o600
    r = ember("providers", "test", "keyed")
    assert r.returncode == 0, r.stderr
    r = ember("run", "keyed::" + MODEL_ALIAS, "Hi", "-n", "3")
    assert r.returncode == 0, r.stderr


def test_cli_clear_errors(no_keyring: None, capsys: pytest.CaptureFixture[str]) -> None:
    """The error paths, in-process (the same main() as the subprocesses above, faster)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    code, _, err = run("providers", "add", "Bad_Name", "http://x")
    assert code == 1
    assert "not a valid provider name" in err
    assert run("providers", "add", "down", "http://127.0.0.1:9")[0] == 0
    code, _, err = run("providers", "test", "down")
    assert code == 1
    assert err.strip() == (
        "ember: error: Can't reach down at http://127.0.0.1:9/v1 — is the server running?"
    )
    code, _, err = run("run", "--provider", "nope", "m", "Hi")
    assert code == 1
    assert "No provider called 'nope'" in err
    code, _, err = run("providers", "add", "oa", "--preset", "openai")
    assert code == 0
    assert "needs an API key" in err
    code, out, _ = run("providers", "ls", "--json")
    assert {row["name"] for row in json.loads(out)} == {"down", "oa"}
    code, _, err = run("providers", "add", "h", "http://h", "--header", "no-colon")
    assert code == 1
    assert "--header needs 'NAME: VALUE'" in err
