"""MCP transports with limits, so a server cannot exhaust the app's memory or disk.

- :func:`stdio_transport`: runs the server as a subprocess in its own process group and speaks
  newline-delimited JSON-RPC on its stdin/stdout, like the SDK's ``stdio_client``, except that
  one message may be at most :data:`MAX_MESSAGE_BYTES` (the SDK's reader buffers a line without
  end for good) and stderr goes to a log file that is rotated at :data:`STDERR_LOG_BYTES`
  (instead of the app's own stderr). ``ended`` is set when the server's output ends (it exited
  or was stopped), with ``problem`` saying why when it was not asked to.
- :func:`http_client`: the httpx2 client for Streamable HTTP, whose JSON answers are cut off
  at :data:`MAX_MESSAGE_BYTES` (the SDK bounds SSE events, not plain JSON bodies).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import mcp_types
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from app.config import private_dir, private_opener
from app.engine.gguf_format import MIB, mib_text

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 8 * MIB
STDERR_LOG_BYTES = 1 * MIB
_GRACE_SECONDS = 2.0  # for the server to exit by itself once its stdin closes


@dataclass(slots=True)
class StdioLaunch:
    """What to run, and what happened to it."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    log_path: Path
    ended: anyio.Event = field(default_factory=anyio.Event)
    problem: str | None = None  # why the connection ended, when the server ended it
    pid: int | None = None


class _StderrLog:
    """Appends a server's stderr to its log file; past STDERR_LOG_BYTES the file moves to
    ``.1`` (replacing the older one), so a flooding server costs at most twice that."""

    def __init__(self, path: Path) -> None:
        private_dir(path.parent)
        self.path = path
        self._file = open(path, "ab", opener=private_opener)  # noqa: SIM115 (closed in close())

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        if self._file.tell() >= STDERR_LOG_BYTES:
            self._file.close()
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            self._file = open(self.path, "ab", opener=private_opener)  # noqa: SIM115

    def note(self, text: str) -> None:
        self.write(f"--- Ember: {text}\n".encode())

    def close(self) -> None:
        self._file.close()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as e:
        log.debug("Not a JSON-RPC message from the MCP server: %r", line[:200])
        return e


@asynccontextmanager
async def stdio_transport(launch: StdioLaunch) -> AsyncGenerator[TransportStreams, None]:
    stderr_log = _StderrLog(launch.log_path)
    stderr_log.note(f"starting {subprocess.list2cmdline([launch.command, *launch.args])}")
    try:
        process = await anyio.open_process(
            [launch.command, *launch.args],
            env=get_default_environment() | launch.env,
            cwd=launch.cwd,
            start_new_session=sys.platform != "win32",  # so a stop reaches its children too
        )
    except BaseException:
        stderr_log.close()
        raise
    launch.pid = process.pid
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    stopping = False

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end]).strip()
                        del buffer[: end + 1]
                        if line:
                            await read_writer.send(_parse(line))
                    if len(buffer) > MAX_MESSAGE_BYTES:
                        launch.problem = (
                            f"it sent a message larger than {mib_text(MAX_MESSAGE_BYTES)}"
                        )
                        return
                await note_exit()  # before the session hears of the end: it says why
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            launch.ended.set()

    async def note_exit() -> None:
        if launch.problem is not None or stopping:
            return
        with anyio.move_on_after(_GRACE_SECONDS):  # its output ended: it is exiting
            await process.wait()
        code = process.returncode
        launch.problem = "it exited" + (f" with code {code}" if code is not None else "")

    async def read_stderr() -> None:
        assert process.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for chunk in process.stderr:
                stderr_log.write(chunk)

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the end instead of waiting

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(read_stderr)
        tg.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            stopping = True
            with anyio.CancelScope(shield=True):
                await _stop(process)
                if launch.problem:
                    stderr_log.note(f"stopped: {launch.problem}")
                stderr_log.close()
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, give the server a moment to leave, then end its whole process group."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(_GRACE_SECONDS):
        while process.returncode is None:
            await anyio.sleep(0.02)
    if process.returncode is None:
        if sys.platform == "win32":
            process.kill()
        else:
            from mcp.os.posix.utilities import terminate_posix_process_tree

            await terminate_posix_process_tree(process, _GRACE_SECONDS)
        with anyio.move_on_after(_GRACE_SECONDS):
            await process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError):
                await pipe.aclose()
    # asyncio's subprocess transport stays open (and warns when collected) while a pipe it
    # read from was left unread, as after a flood; nothing public closes it.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):
            close()


# ---- HTTP ------------------------------------------------------------------------------------


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise httpx2.ReadError(
                    f"The MCP server's answer is larger than {mib_text(self._limit)}."
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    """Cuts off a JSON answer at ``limit`` bytes (an SSE stream is bounded per event by the
    SDK, and may rightly stay open for hours)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if "text/event-stream" in response.headers.get("content-type", ""):
            return response
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(stream, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def http_client(headers: dict[str, str], timeout: float) -> httpx2.AsyncClient:
    """An httpx2 client for one server: its headers, a connect timeout of ``timeout`` (a read
    may wait longer: the SDK's SSE streams stay open) and capped JSON answers."""
    return httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(timeout, read=300.0),
        transport=_CappedTransport(httpx2.AsyncHTTPTransport(), MAX_MESSAGE_BYTES),
    )
