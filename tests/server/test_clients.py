"""Each client's settings (app/server/clients.py) name the server's real address, model and
key, and parse in their own format."""

from __future__ import annotations

import json
import tomllib

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from app.server.clients import NAMES, clients, startup_text

ROOT = "http://127.0.0.1:8434"


def by_name(root: str, model: str | None, key: str) -> dict[str, str]:
    return {c.name: c.code for c in clients(root, model, key)}


def test_every_client_names_the_server_and_the_model() -> None:
    assert NAMES == ("Claude Code", "Codex", "Continue", "Cline", "Zed", "opencode", "aider")
    for name, code in by_name(ROOT + "/v1", "qwen3-coder", "").items():
        assert ROOT in code and "/v1/v1" not in code, name
        assert "qwen3-coder" in code, name
    codes = by_name(ROOT, None, "")
    assert all("MODEL_ID" in code for code in codes.values())


def test_claude_code_uses_the_anthropic_variables() -> None:
    code = by_name(ROOT, "qwen", "sk-ember-secret")["Claude Code"]
    assert f"export ANTHROPIC_BASE_URL={ROOT}\n" in code  # no /v1: the SDK adds it
    assert "export ANTHROPIC_AUTH_TOKEN=sk-ember-secret" in code
    for variable in ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL"):
        assert f"export {variable}=qwen" in code
    assert "ANTHROPIC_AUTH_TOKEN=ember" in by_name(ROOT, "qwen", "")["Claude Code"]


def test_codex_is_a_responses_provider_in_config_toml() -> None:
    for key in ("", "sk-ember-secret"):
        config = tomllib.loads(by_name(ROOT, "qwen", key)["Codex"])
        assert config["model"] == "qwen" and config["model_provider"] == "ember"
        provider = config["model_providers"]["ember"]
        assert provider["base_url"] == f"{ROOT}/v1" and provider["wire_api"] == "responses"
        assert provider.get("env_key") == ("EMBER_API_KEY" if key else None)


def strip_comments(code: str) -> str:
    return "\n".join(line for line in code.splitlines() if not line.startswith("//"))


@pytest.mark.parametrize("key", ["", "sk-ember-secret"])
def test_the_config_files_parse(key: str) -> None:
    codes = by_name(ROOT, "qwen", key)
    zed = json.loads(strip_comments(codes["Zed"]))["language_models"]["openai_compatible"]
    assert zed["Ember"]["api_url"] == f"{ROOT}/v1"
    opencode = json.loads(strip_comments(codes["opencode"]))
    assert opencode["model"] == "ember/qwen"
    options = opencode["provider"]["ember"]["options"]
    assert options.get("apiKey") == ("{env:EMBER_API_KEY}" if key else None)
    continued = yaml.safe_load(codes["Continue"])["models"][0]
    assert continued["apiBase"] == f"{ROOT}/v1" and continued.get("apiKey") == (key or None)


def test_startup_text_shows_the_key_as_a_variable() -> None:
    text = startup_text(ROOT, "qwen", "$EMBER_API_KEY")
    assert "export ANTHROPIC_AUTH_TOKEN=$EMBER_API_KEY" in text
    assert "export EMBER_API_KEY=$EMBER_API_KEY" not in text
    assert text.count("== ") == len(NAMES)
