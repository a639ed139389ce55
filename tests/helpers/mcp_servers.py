"""MCP servers for the tests, written with the official SDK (``MCPServer``, once FastMCP).

``python -m tests.helpers.mcp_servers stdio DIR`` serves :func:`build` over stdio; ``DIR`` is where
the tools leave marker files, so a test knows when a call has begun. :func:`serve_http` runs
the same tools over Streamable HTTP on 127.0.0.1 in a thread (the test's own process).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

HUGE_CHARS = 1_000_000
PICTURE_SIZE = (320, 160)  # the picture tool's PNG: wider than a thumbnail, twice as wide as high
RAW_STDOUT = [1]  # the pipe to the client, kept before the SDK takes fd 1 over


def build(markers: Path, required_header: tuple[str, str] | None = None) -> MCPServer:
    server = MCPServer("ember-test")
    calls = markers / "calls"

    def mark(name: str) -> None:
        markers.mkdir(parents=True, exist_ok=True)
        with open(calls, "a", encoding="utf-8") as f:
            f.write(name + "\n")
        (markers / name).touch()

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        mark("echo")
        return text

    @server.tool(structured_output=False)  # content blocks, not JSON
    def picture() -> list[Any]:
        """A red picture and a line about it."""
        mark("picture")
        return ["A red rectangle.", Image(data=red_png(*PICTURE_SIZE), format="png")]

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        mark("fail")
        raise ToolError(f"it broke: {reason}")

    @server.tool()
    def huge() -> str:
        """A result of a million characters."""
        mark("huge")
        return "x" * HUGE_CHARS

    @server.tool()
    async def hang() -> str:
        """Never answers."""
        mark("hang")
        await anyio.sleep(3600)
        return "too late"

    @server.tool()
    def crash() -> str:
        """The server process dies in the middle of the call."""
        mark("crash")
        os._exit(3)

    @server.tool()
    def flood() -> str:
        """Writes 20 MB to stdout without a line end (a broken or hostile server)."""
        mark("flood")
        # The SDK moves stdout aside while it serves (prints go to stderr): write to the pipe.
        with os.fdopen(os.dup(RAW_STDOUT[0]), "wb") as pipe:
            pipe.write(b"y" * (20 * 1024 * 1024))
        return "unreachable"

    @server.tool()
    def shout() -> str:
        """Writes 3 MB to stderr."""
        mark("shout")
        for _ in range(3 * 1024):
            sys.stderr.write("z" * 1023 + "\n")
        sys.stderr.flush()
        return "done"

    return server


def red_png(width: int, height: int) -> bytes:
    """A plain red PNG (written by hand: the test servers import no imaging library)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + b"\xff\x00\x00" * width  # filter byte, then RGB pixels
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


class HttpServer:
    """``build()`` over Streamable HTTP with uvicorn on its own thread (127.0.0.1, ``port``)."""

    def __init__(self, markers: Path, port: int) -> None:
        import uvicorn

        self.markers = markers
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.headers_seen: list[dict[str, str]] = []
        app = build(markers).streamable_http_app()
        seen = self.headers_seen

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
            await app(scope, receive, send)

        config = uvicorn.Config(recording, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        while not self.server.started:  # uvicorn sets it once it listens
            if not self.thread.is_alive():
                raise AssertionError("the test MCP server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


if __name__ == "__main__":
    RAW_STDOUT[0] = os.dup(1)
    build(Path(sys.argv[2])).run("stdio")
