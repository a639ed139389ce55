"""MCP server configurations for the tests: the real mcp-server-time, the SDK-written test
servers, a server that never answers, and an in-memory keyring."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from app.tools.config import ServerConfig

TIME_ARGS = ("-m", "mcp_server_time")


ROOT = Path(__file__).resolve().parents[2]


def approved(server: ServerConfig) -> ServerConfig:
    import dataclasses

    return dataclasses.replace(server, approved_command=server.command_line)


def time_server(name: str = "time") -> ServerConfig:
    return approved(ServerConfig(name, command=sys.executable, args=TIME_ARGS))


def sdk_server(name: str, markers: Path) -> ServerConfig:
    """The SDK-written test server over stdio."""
    return approved(
        ServerConfig(
            name,
            command=sys.executable,
            args=("-m", "tests.helpers.mcp_servers", "stdio", str(markers)),
            cwd=str(ROOT),
        )
    )


SILENT = (  # writes its pid (whole, by a rename) and never answers: connecting waits it out
    "import os, sys, time; p = sys.argv[1]; open(p + '.tmp', 'w').write(str(os.getpid())); "
    "os.replace(p + '.tmp', p); time.sleep(3600)"
)


def silent_server(name: str, pid_file: Path) -> ServerConfig:
    """A stdio server that starts and never answers (its pid lands in ``pid_file``)."""
    return approved(ServerConfig(name, command=sys.executable, args=("-c", SILENT, str(pid_file))))


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_for_file(path: Path) -> None:
    """Until a test server's tool has begun (it leaves a marker file); pytest's timeout
    bounds the wait."""
    while not path.exists():
        time.sleep(0.02)
