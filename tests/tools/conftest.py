"""Fixtures for the MCP tests: real servers (mcp-server-time over stdio, the SDK-written test
server of :mod:`tests.helpers.mcp_servers` over stdio and over HTTP), a config in EMBER_HOME, and a
memory keyring."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tools.config import McpConfig
from app.tools.manager import ToolManager
from tests.helpers.mcp_servers import HttpServer
from tests.helpers.net import free_port


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
