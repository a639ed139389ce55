"""MCP connections against real servers: mcp-server-time and the SDK-written test server
(stdio), the same tools over Streamable HTTP."""

from __future__ import annotations

import concurrent.futures
import sys
from pathlib import Path

import pytest

from app.engine.gguf_format import mib_text
from app.tools.config import McpConfig, ServerConfig
from app.tools.manager import CommandNotApprovedError, ServerStartError, ToolError, ToolManager
from app.tools.results import MAX_RESULT_CHARS
from app.tools.transport import MAX_MESSAGE_BYTES, STDERR_LOG_BYTES
from tests.helpers.mcp_config import (
    approved,
    process_alive,
    sdk_server,
    silent_server,
    time_server,
    wait_for_file,
)
from tests.helpers.mcp_servers import HUGE_CHARS, HttpServer


def test_time_server_lists_and_calls_its_tools(config: McpConfig, manager: ToolManager) -> None:
    config.add(time_server())
    tools = {t.name: t for t in manager.list_tools("time")}
    assert set(tools) == {"get_current_time", "convert_time"}
    assert "timezone" in tools["get_current_time"].input_schema["properties"]
    output = manager.call("time", "get_current_time", {"timezone": "UTC"}, 30).result()
    assert not output.is_error
    assert '"timezone": "UTC"' in output.text
    assert manager.connection("time").starts == 1  # the same server answered both


def test_a_tool_error_is_an_output_the_model_sees(config: McpConfig, manager: ToolManager) -> None:
    config.add(time_server())
    output = manager.call("time", "get_current_time", {"timezone": "Nowhere/Atlantis"}, 30).result()
    assert output.is_error
    assert "Invalid timezone" in output.text


def test_a_command_line_not_approved_does_not_run(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    server = ServerConfig("t", command=sys.executable, args=("-m", "tests.helpers.mcp_servers"))
    config.add(server)
    with pytest.raises(CommandNotApprovedError, match=r"would run `.*tests\.helpers\.mcp_servers`"):
        manager.list_tools("t")
    config.approve_command("t")
    changed = approved(server)
    config.add(ServerConfig("t", command=sys.executable, args=("-c", "pass")), replace=True)
    assert config.get("t").needs_approval  # a changed command line is shown again
    assert not changed.needs_approval


def test_a_server_that_cannot_start_fails_at_once_with_why(
    config: McpConfig, manager: ToolManager
) -> None:
    config.add(approved(ServerConfig("gone", command="/no/such/mcp-server")))
    with pytest.raises(ServerStartError, match="'/no/such/mcp-server' was not found"):
        manager.list_tools("gone")


def test_a_broken_install_fails_at_once_and_says_so(
    config: McpConfig, manager: ToolManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundle once lacked a module the SDK imports: the supervisor died and every use
    waited out the start time for nothing. Now it fails at once and says what is wrong."""
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError
    config.add(time_server())
    connection = manager.connection("time")
    connection.connect_timeout = 3600  # a wait for the time-out would hang the test
    with pytest.raises(ServerStartError, match=r"MCP support could not be loaded.*reinstall"):
        connection.list_tools().result()


def test_timeout_cancels_a_hanging_call_and_the_server_keeps_serving(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    with pytest.raises(ToolError, match="did not answer within 1 s and was cancelled"):
        manager.call("t", "hang", {}, 1).result()
    assert manager.call("t", "echo", {"text": "still here"}, 30).result().text == "still here"
    assert manager.connection("t").starts == 1


def test_cancel_stops_a_call_in_flight(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    future = manager.call("t", "hang", {}, 600)
    wait_for_file(markers / "hang")
    assert future.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        future.result()
    assert manager.call("t", "echo", {"text": "next"}, 30).result().text == "next"


def test_a_server_that_crashes_mid_call_is_restarted(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    with pytest.raises(ToolError, match=r"stopped during the call.*exited with code 3"):
        manager.call("t", "crash", {}, 30).result()
    connection = manager.connection("t")
    # At once, not when the supervisor gets to it: a call made now waits for the restart
    # instead of being handed the dead connection (CI saw that race).
    assert connection.state == "starting"
    assert manager.call("t", "echo", {"text": "back"}, 60).result().text == "back"
    assert connection.starts == 2
    assert "exited with code 3" in connection.log_path.read_text()


def test_a_call_right_after_a_crash_waits_for_the_restart(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    """The race CI met: a call submitted between the crash and the supervisor noticing it
    was handed the dead connection. Both calls run in one task here, so the second always
    comes first."""
    config.add(sdk_server("t", markers))
    connection = manager.connection("t")

    async def crash_then_echo() -> str:
        with pytest.raises(ToolError, match="stopped during the call"):
            await connection._call("crash", {}, 30)
        return (await connection._call("echo", {"text": "back"}, 60)).text

    assert connection._submit(crash_then_echo).result() == "back"
    assert connection.starts == 2


def test_a_huge_result_is_cut_and_says_so(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    output = manager.call("t", "huge", {}, 60).result()
    assert output.truncated
    assert output.text.startswith("x" * MAX_RESULT_CHARS)
    assert f"the result was {HUGE_CHARS:,} characters long" in output.text
    assert len(output.text) < MAX_RESULT_CHARS + 200


def test_a_flooding_server_is_stopped_not_buffered(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    with pytest.raises(ToolError, match=f"larger than {mib_text(MAX_MESSAGE_BYTES)}"):
        manager.call("t", "flood", {}, 60).result()


def test_stderr_goes_to_a_log_that_cannot_grow_without_end(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    assert manager.call("t", "shout", {}, 60).result().text == "done"
    manager.stop("t")  # stderr is read to its end
    log = manager.log_path("t")
    rotated = log.with_name(log.name + ".1")
    assert rotated.exists()
    assert log.stat().st_size <= STDERR_LOG_BYTES
    assert rotated.stat().st_size <= STDERR_LOG_BYTES + 64 * 1024
    assert "z" * 100 in rotated.read_text()


def test_http_server_with_a_secret_header(
    config: McpConfig, manager: ToolManager, http_server: HttpServer, memory_keyring: object
) -> None:
    config.add(ServerConfig("web", url=http_server.url, headers={"Authorization": "Bearer s3cret"}))
    assert "s3cret" not in config.path.read_text()  # it went to the keyring
    names = {t.name for t in manager.list_tools("web")}
    assert {"echo", "fail", "huge", "hang"} <= names
    assert manager.call("web", "echo", {"text": "over http"}, 30).result().text == "over http"
    failed = manager.call("web", "fail", {"reason": "on purpose"}, 30).result()
    assert failed.is_error and "it broke: on purpose" in failed.text
    assert any(h.get("authorization") == "Bearer s3cret" for h in http_server.headers_seen)


def test_an_http_server_that_is_not_there(config: McpConfig, manager: ToolManager) -> None:
    from tests.helpers.net import free_port

    config.add(ServerConfig("nothing", url=f"http://127.0.0.1:{free_port()}/mcp"))
    with pytest.raises(ServerStartError, match="MCP server nothing could not start"):
        manager.list_tools("nothing")


def test_shutdown_stops_the_server_process(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    import os

    config.add(sdk_server("t", markers))
    manager.list_tools("t")
    pid = manager.connection("t")._launch.pid
    manager.shutdown()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_stopping_a_server_that_is_still_connecting_ends_its_process(
    config: McpConfig, manager: ToolManager, tmp_path: Path
) -> None:
    """Quitting (or Esc, then quitting) while a server starts: its process does not outlive
    the app, and the stop does not wait out the 30 s connect timeout to get there."""
    pid_file = tmp_path / "pid"
    config.add(silent_server("silent", pid_file))
    connection = manager.connection("silent")
    connection.list_tools()
    wait_for_file(pid_file)
    pid = int(pid_file.read_text())
    assert connection.state == "starting" and process_alive(pid)
    manager.shutdown()
    assert not process_alive(pid)


def test_an_http_server_that_goes_away_and_comes_back(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    from tests.helpers.net import free_port

    port = free_port()
    first = HttpServer(markers, port)
    first.start()
    config.add(ServerConfig("web", url=first.url))
    assert manager.call("web", "echo", {"text": "one"}, 30).result().text == "one"
    first.stop()
    with pytest.raises(ToolError, match="MCP server web stopped during the call"):
        manager.call("web", "echo", {"text": "lost"}, 600).result()  # not a timeout: at once
    second = HttpServer(markers, port)
    second.start()
    try:
        assert manager.call("web", "echo", {"text": "back"}, 30).result().text == "back"
    finally:
        second.stop()
