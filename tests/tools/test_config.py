"""mcp.json: the Claude Desktop shape, import, secrets in the keyring, approvals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.tools.config import SECRET_MARK, McpConfig, ServerConfig, ToolConfigError
from tests.helpers.memory_keyring import MemoryKeyring

CLAUDE = {
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret", "LOG_LEVEL": "debug"},
        },
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Api-Key": "k-123"}},
        "time": {"command": "uvx", "args": ["mcp-server-time"], "someOtherApp": {"x": 1}},
    }
}


def test_import_a_claude_desktop_file(
    tmp_path: Path, config: McpConfig, memory_keyring: MemoryKeyring
) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps(CLAUDE))
    assert config.import_file(source) == ["github", "remote", "time"]
    saved = json.loads(config.path.read_text())["mcpServers"]
    # The same shape, secrets out of the file, other programs' keys kept.
    assert saved["github"]["env"] == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": SECRET_MARK,
        "LOG_LEVEL": "debug",
    }
    assert saved["remote"]["headers"] == {"X-Api-Key": SECRET_MARK}
    assert saved["time"]["someOtherApp"] == {"x": 1}
    assert "ghp_secret" not in config.path.read_text()
    assert ("Ember", "provider:mcp:github:env:GITHUB_PERSONAL_ACCESS_TOKEN") in (
        memory_keyring.passwords
    )
    github = config.get("github")
    assert config.env(github)["GITHUB_PERSONAL_ACCESS_TOKEN"] == "ghp_secret"
    assert config.headers(config.get("remote")) == {"X-Api-Key": "k-123"}
    # Imported command lines are shown before they first run.
    assert github.needs_approval
    assert github.command_line == "npx -y @modelcontextprotocol/server-github"
    assert config.approve_command("github").needs_approval is False
    assert not config.get("remote").needs_approval  # HTTP runs nothing here


def test_a_second_import_skips_names_that_exist(tmp_path: Path, config: McpConfig) -> None:
    source = tmp_path / "cursor.json"
    source.write_text(json.dumps({"mcpServers": {"time": CLAUDE["mcpServers"]["time"]}}))
    assert config.import_file(source) == ["time"]
    assert config.import_file(source) == []


def test_remove_deletes_the_secrets(config: McpConfig, memory_keyring: MemoryKeyring) -> None:
    config.add(ServerConfig("s", url="http://127.0.0.1:9/mcp", headers={"Authorization": "b"}))
    assert memory_keyring.passwords
    config.remove("s")
    assert memory_keyring.passwords == {}
    with pytest.raises(ToolConfigError, match="No MCP server called 's'"):
        config.get("s")


def test_without_a_keyring_secrets_go_to_a_private_file(config: McpConfig) -> None:
    from app.engine.providers import FileSecrets

    secrets = FileSecrets(config.path.parent / "secrets.json")
    local = McpConfig(config.path, secrets=secrets)
    local.add(ServerConfig("s", command="x", env={"API_KEY": "abc"}))
    assert "abc" not in config.path.read_text()
    assert local.env(local.get("s")) == {"API_KEY": "abc"}
    assert (secrets.path.stat().st_mode & 0o777) == 0o600


def test_tools_switches_and_always_allow_are_saved(config: McpConfig) -> None:
    config.add(ServerConfig("s", command="x"))
    config.set_tool_enabled("s", "rm_rf", False)
    config.set_always_allow("s", "get_time", True)
    config.update("s", enabled=False)
    fresh = McpConfig(config.path).get("s")
    assert not fresh.enabled
    assert not fresh.tool_enabled("rm_rf") and fresh.tool_enabled("get_time")
    assert fresh.always_allow == {"get_time"}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"args": ["x"]}, "either a command"),
        ({"command": "x", "url": "http://a"}, "not both"),
        ({"url": "ftp://a"}, "not an http"),
        ({"command": "x", "args": "oops"}, "'args' must be a list"),
        ("nope", "must be a JSON object"),
    ],
)
def test_bad_entries_say_what_to_fix(tmp_path: Path, entry: object, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"s": entry}}))
    config = McpConfig(path)
    assert config.list() == [] and message in config.problems()["s"]
    with pytest.raises(ToolConfigError, match=message):
        config.get("s")


def test_names_are_checked(config: McpConfig) -> None:
    with pytest.raises(ToolConfigError, match="not a valid server name"):
        ServerConfig("no spaces", command="x")


def test_the_tool_settings_and_their_defaults(ember_home: Path) -> None:
    from app.config import Settings

    settings = Settings()
    assert settings.get("tools.timeout") == 60.0
    assert settings.get("tools.max_rounds") == 8
    settings.set("tools.timeout", 5)
    assert Settings().get("tools.timeout") == 5.0


def test_a_command_line_changed_while_it_was_shown_is_not_approved(config: McpConfig) -> None:
    import dataclasses

    shown = config.add(ServerConfig("t", command="uvx", args=("mcp-server-time",)))
    config.add(dataclasses.replace(shown, args=("mcp-server-evil",)), replace=True)
    with pytest.raises(ToolConfigError, match="changed while it was shown"):
        config.approve_command("t", seen=shown.command_line)
    assert config.get("t").needs_approval
    assert not config.approve_command("t", seen="uvx mcp-server-evil").needs_approval
