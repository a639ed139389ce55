"""``ember mcp add|import|ls|test|rm`` and ``ember run --mcp``, run as a user does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.tools.config import SECRET_MARK, McpConfig
from tests.helpers.cli import ember
from tests.helpers.mcp_config import TIME_ARGS


def test_add_ls_test_rm_a_stdio_server(ember_home: Path) -> None:
    added = ember("mcp", "add", "time", "--", sys.executable, *TIME_ARGS)
    assert added.returncode == 0, added.stderr
    assert "Added time:" in added.stdout
    listed = ember("mcp", "ls")
    assert "time" in listed.stdout and "mcp_server_time" in listed.stdout
    assert " on " in listed.stdout  # typed by the user: approved
    tested = ember("mcp", "test", "time")
    assert tested.returncode == 0, tested.stderr
    assert "get_current_time" in tested.stdout
    assert "Get current time in a specific timezone" in tested.stdout
    assert '"timezone"' in tested.stdout  # the input schema
    removed = ember("mcp", "rm", "time")
    assert removed.returncode == 0 and "Removed time" in removed.stdout
    assert "No MCP servers yet" in ember("mcp", "ls").stdout


def test_a_server_that_cannot_start_is_one_line_and_exit_1(ember_home: Path) -> None:
    ember("mcp", "add", "broken", "--", sys.executable, "-c", "import sys; sys.exit(7)")
    result = ember("mcp", "test", "broken")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("ember: error: MCP server broken could not start")
    assert "exited with code 7" in lines[0]


def test_an_imported_command_line_is_shown_and_needs_a_yes(
    ember_home: Path, tmp_path: Path
) -> None:
    source = tmp_path / "claude_desktop_config.json"
    entry = {"command": sys.executable, "args": list(TIME_ARGS), "env": {"API_TOKEN": "t0k"}}
    source.write_text(json.dumps({"mcpServers": {"time": entry}}))
    imported = ember("mcp", "import", str(source))
    assert imported.returncode == 0 and "Added 1 server: time" in imported.stdout
    assert "not approved" in ember("mcp", "ls").stdout
    refused = ember("mcp", "test", "time", stdin="n\n")
    assert refused.returncode == 1
    assert f"{sys.executable} -m mcp_server_time" in refused.stderr  # shown before it runs
    assert "its command line was not approved" in refused.stderr
    accepted = ember("mcp", "test", "time", stdin="y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert "get_current_time" in accepted.stdout
    assert not McpConfig().get("time").needs_approval
    assert json.loads((ember_home / "mcp.json").read_text())["mcpServers"]["time"]["env"] == {
        "API_TOKEN": SECRET_MARK
    }


def test_add_an_http_server_with_headers(ember_home: Path) -> None:
    result = ember(
        "mcp",
        "add",
        "web",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "Authorization: Bearer x",
    )
    assert result.returncode == 0, result.stderr
    assert "Kept in" in result.stderr and "Authorization" in result.stderr
    server = McpConfig().get("web")
    assert server.headers == {"Authorization": SECRET_MARK}
    bad = ember("mcp", "add", "nothing")
    assert bad.returncode == 1 and "Give a command after `--`" in bad.stderr


def test_run_with_mcp_is_a_chat_not_raw(ember_home: Path) -> None:
    result = ember("run", "model.gguf", "--mcp", "time", "--raw", "Hi")
    assert result.returncode == 1
    assert "--mcp works in a chat, not with --raw" in result.stderr


def run_with_time(model: Path) -> tuple[str, ...]:
    """``ember run MODEL`` offered the time server, a call required first, greedy, 40 tokens."""
    tools = ("--mcp", "time", "--tool-choice", "required")
    return ("run", str(model), *tools, "--temp", "0", "-n", "40")


def test_run_calls_the_time_tool_when_forced(ember_home: Path, gemma_path: Path) -> None:
    """The issue's done-when, in a terminal."""
    ember("mcp", "add", "time", "--", sys.executable, *TIME_ARGS)
    result = ember(*run_with_time(gemma_path), "--yes", "What time is it?", timeout=600)
    assert result.returncode == 0, result.stderr
    assert "→ get_current_time {" in result.stderr
    assert '← {\n  "timezone":' in result.stderr
    assert '"datetime":' in result.stderr


def test_interactive_run_asks_before_each_call(ember_home: Path, gemma_path: Path) -> None:
    from app.config import Settings

    ember("mcp", "add", "time", "--", sys.executable, *TIME_ARGS)
    Settings().set("tools.max_rounds", 1)  # one call, then an answer
    answers = "What time is it?\ny\n/bye\n"
    result = ember(*run_with_time(gemma_path), stdin=answers, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "Allow get_current_time (time)? [y]es once, [a]lways, [N]o:" in result.stderr
    assert "→ get_current_time {" in result.stderr
    assert '← {\n  "timezone":' in result.stderr
