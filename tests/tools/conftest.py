"""Fixtures for the MCP tests: real servers (mcp-server-time over stdio, the SDK-written test
server of :mod:`tests.helpers.mcp_servers` over stdio and over HTTP), a config in EMBER_HOME, and a
memory keyring."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import pytest
from keyring.errors import PasswordDeleteError

from app.tools.config import McpConfig, ServerConfig
from app.tools.manager import ToolManager
from tests.helpers.mcp_servers import HttpServer
from tests.helpers.net import free_port

TIME_ARGS = ("-m", "mcp_server_time")
ROOT = Path(__file__).resolve().parents[2]


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A real keyring backend that keeps passwords in memory (the OS one is not for tests)."""

    priority = 5

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.passwords.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


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


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


@pytest.fixture
def config(ember_home: Path) -> McpConfig:
    return McpConfig()


@pytest.fixture
def manager(config: McpConfig) -> Iterator[ToolManager]:
    manager = ToolManager(config)
    yield manager
    manager.shutdown()


@pytest.fixture
def http_server(markers: Path) -> Iterator[HttpServer]:
    server = HttpServer(markers, free_port())
    server.start()
    yield server
    server.stop()


def wait_for_file(path: Path) -> None:
    """Until a test server's tool has begun (it leaves a marker file); pytest's timeout
    bounds the wait."""
    while not path.exists():
        time.sleep(0.02)
