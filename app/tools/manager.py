"""Connections to MCP servers: each on its own asyncio loop thread, started on first use, kept
up, restarted with backoff after a crash, stopped at quit.

:class:`ServerConnection` owns one server. Its loop thread runs a supervisor that connects
(stdio: starts the process; HTTP: opens a session), lists the tools and waits until the
connection breaks or a stop is asked; after a crash it connects again after 1, 2, 4… seconds
(at most 30), giving up after :data:`MAX_RESTARTS` failed starts in a row (the next use tries
again). A server that cannot start at first use fails that use at once with what went wrong.

Calls and listings are submitted from any thread and return ``concurrent.futures.Future`` s:
``future.cancel()`` cancels the call (the SDK tells the server), a timeout cancels it too.
Nothing here blocks the caller's thread unless it waits on a future.

:class:`ToolManager` holds the connections of the servers in ``mcp.json`` and exposes their
tools to a model (:class:`ToolBox`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Collection
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from app.config import paths
from app.tools.config import McpConfig, ServerConfig
from app.tools.results import ToolOutput, from_mcp

log = logging.getLogger(__name__)

T = TypeVar("T")

CONNECT_TIMEOUT = 30.0
MAX_RESTARTS = 5
MAX_BACKOFF = 30.0
MAX_TOOLS = 128  # per server: every one goes into the prompt
MAX_TOOL_PAGES = 20
STOP_TIMEOUT = 8.0


class ToolError(Exception):
    """A call or connection that failed; the message says what happened and what to do."""


class ServerStartError(ToolError):
    pass


class CommandNotApprovedError(ToolError):
    def __init__(self, server: ServerConfig) -> None:
        super().__init__(
            f"MCP server {server.name} would run `{server.shown_command}`, which you have not "
            'approved yet. Check it, then approve it ("Run it" in a chat, Test in '
            "Settings → Tools, or answer yes in `ember mcp test`)."
        )
        self.server = server


class ToolTimeoutError(ToolError):
    pass


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """A tool as its server lists it."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(slots=True)
class _Attempt:
    """One connection attempt; callers wait on ``up``."""

    up: asyncio.Future[Any]
    tools: list[ToolInfo] = field(default_factory=list)


class ServerConnection:
    """One MCP server on its own asyncio loop thread (daemon, named ``mcp-<name>``)."""

    def __init__(
        self,
        config: ServerConfig,
        env: dict[str, str],
        headers: dict[str, str],
        log_path: Path,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.config = config
        self._env = env
        self._headers = headers
        self.log_path = log_path
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._supervisor: concurrent.futures.Future[None] | None = None
        self._attempt: _Attempt | None = None
        self._broken: asyncio.Event | None = None
        self._stopping = False
        self._launch: Any = None  # the stdio process being run (StdioLaunch)
        self._task: asyncio.Task[None] | None = None  # the supervisor, on the loop thread
        self._connecting = False  # the supervisor waits for the server to start and answer
        self.starts = 0  # connections made so far (a restart counts)
        self.last_error: str | None = None

    # -- from any thread -----------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``stopped``, ``starting``, ``ready`` or ``failed``."""
        attempt = self._attempt
        if self._supervisor is None or self._supervisor.done():
            return "failed" if self.last_error else "stopped"
        if attempt is None or not attempt.up.done():
            return "starting"
        return "ready" if attempt.up.exception() is None else "failed"

    def _submit(self, factory: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        loop = self._ensure_running()

        async def run() -> T:
            return await factory()

        return asyncio.run_coroutine_threadsafe(run(), loop)

    def list_tools(self, timeout: float | None = None) -> concurrent.futures.Future[list[ToolInfo]]:
        """The server's tools (connecting first if need be)."""
        return self._submit(lambda: self._tools(timeout or self.connect_timeout))

    def call(
        self, tool: str, arguments: dict[str, Any], timeout: float
    ) -> concurrent.futures.Future[ToolOutput]:
        """Run ``tool``; the future holds its :class:`ToolOutput` (an error the tool reported
        is an output with ``is_error``), or raises :class:`ToolError`. ``cancel()`` stops it."""
        return self._submit(lambda: self._call(tool, arguments, timeout))

    def known_tools(self) -> list[ToolInfo] | None:
        """The tools listed by the current connection, if it is up."""
        attempt = self._attempt  # read from another thread: a look, never a wait
        try:
            if attempt is None or not attempt.up.done() or attempt.up.exception() is not None:
                return None
        except (asyncio.CancelledError, asyncio.InvalidStateError):
            return None
        return list(attempt.tools)

    def stop(self) -> None:
        """Stop the server and the thread (idempotent; waits a few seconds at most)."""
        with self._lock:
            loop, thread, supervisor = self._loop, self._thread, self._supervisor
            self._stopping = True
        if loop is None or thread is None:
            return
        if supervisor is not None and not supervisor.done():
            halt = asyncio.run_coroutine_threadsafe(self._halt(), loop)
            with contextlib.suppress(Exception):
                halt.result(STOP_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_TIMEOUT)
        if not thread.is_alive():
            loop.close()

    def _ensure_running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._stopping:
                raise ToolError(f"MCP server {self.config.name} has been stopped.")
            if self.config.needs_approval:
                raise CommandNotApprovedError(self.config)
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"mcp-{self.config.name}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            if self._supervisor is None or self._supervisor.done():
                self._supervisor = asyncio.run_coroutine_threadsafe(self._supervise(), self._loop)
            return self._loop

    # -- on the loop thread --------------------------------------------------------------------

    def _wake(self) -> None:
        if self._broken is not None:
            self._broken.set()

    async def _halt(self) -> None:
        """The supervisor ends: cancelled while it connects (a server that never answers would
        hold a stop for the connect timeout, and its process would outlive the app), else
        woken. Either way the connection unwinds, which stops the process."""
        task = self._task
        if task is None or task.done():
            return
        if self._connecting:  # only then: a cancel inside the unwinding would cut it short
            task.cancel()
        else:
            self._wake()
        await asyncio.wait({task}, timeout=STOP_TIMEOUT)

    def _lost(self, attempt: _Attempt) -> None:
        """``attempt``'s connection is gone: calls from now on wait for the reconnection
        (not for the supervisor to notice, which a call submitted meanwhile would race)."""
        if self._attempt is attempt and attempt.up.done() and not self._stopping:
            self._attempt = _Attempt(asyncio.get_running_loop().create_future())
        self._wake()

    async def _supervise(self) -> None:
        self._task = asyncio.current_task()
        try:
            await self._keep_up()
        except BaseException as e:  # a bug or a broken install: callers must not wait on
            if not isinstance(e, asyncio.CancelledError):
                log.exception("MCP server %s: the connection's supervisor failed", self.config.name)
                self.last_error = self._describe(e, self.connect_timeout)
            self._fail_waiting()
            raise
        self._fail_waiting()

    def _fail_waiting(self) -> None:
        waiting = self._attempt
        if waiting is not None and not waiting.up.done():  # e.g. a call marked it lost
            waiting.up.set_exception(ServerStartError(self._start_failed()))
            waiting.up.exception()  # retrieved: no "never retrieved" warning

    async def _keep_up(self) -> None:
        failures = 0
        self.last_error = None
        while not self._stopping:
            loop = asyncio.get_running_loop()
            attempt = self._attempt
            if attempt is None or attempt.up.done():  # else: callers wait on it already
                attempt = self._attempt = _Attempt(loop.create_future())
            self._broken = asyncio.Event()
            started = time.monotonic()
            try:
                async with AsyncExitStack() as stack:
                    # Not wait_for: that runs the connect in another task, and the SDK's task
                    # groups must be left by the task that entered them.
                    async with asyncio.timeout(self.connect_timeout):
                        self._connecting = True
                        try:
                            client = await self._connect(stack, attempt)
                        finally:
                            self._connecting = False
                    self.starts += 1
                    failures = 0
                    attempt.up.set_result(client)
                    await self._broken.wait()
            except Exception as e:  # the server did not start or broke: tell waiters why
                self.last_error = self._describe(e, self.connect_timeout)
                log.info("MCP server %s: %s", self.config.name, self.last_error)
            if not attempt.up.done():
                attempt.up.set_exception(ServerStartError(self._start_failed()))
                failures += 1
            else:
                attempt.up.exception()  # retrieved: no "never retrieved" warning
            if self._stopping or self.starts == 0 or failures >= MAX_RESTARTS:
                return  # stopped, never started, or keeps failing: the next use tries again
            if time.monotonic() - started > MAX_BACKOFF:
                failures = 0  # it ran for a while: a new crash starts the backoff over
            delay = min(2.0**failures, MAX_BACKOFF)
            log.info("MCP server %s stopped; restarting in %.0f s", self.config.name, delay)
            if self._attempt is None or self._attempt.up.done():  # else: a call made it
                self._attempt = _Attempt(loop.create_future())  # callers wait for the restart
            self._broken = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._broken.wait(), delay)  # a stop cuts it short

    def _start_failed(self) -> str:
        why = self.last_error or "it did not answer"
        return f"MCP server {self.config.name} could not start: {why}. See its log: {self.log_path}"

    async def _connect(self, stack: AsyncExitStack, attempt: _Attempt) -> Any:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from app.tools.transport import StdioLaunch, http_client, stdio_transport

        config = self.config
        if config.command is not None:
            launch = StdioLaunch(
                config.command, list(config.args), self._env, config.cwd, self.log_path
            )
            self._launch = launch
            transport: Any = stdio_transport(launch)
            broken = self._broken
            assert broken is not None

            async def watch() -> None:  # the process ended: reconnect
                await launch.ended.wait()
                self._lost(attempt)
                broken.set()

            watcher = asyncio.ensure_future(watch())
            stack.callback(watcher.cancel)
        else:
            assert config.url is not None
            http = await stack.enter_async_context(http_client(self._headers, self.connect_timeout))
            transport = streamable_http_client(config.url, http_client=http)
        client = await stack.enter_async_context(Client(transport, cache=None))
        attempt.tools = await self._fetch_tools(client)
        return client

    async def _fetch_tools(self, client: Any) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                tools.append(
                    ToolInfo(
                        self.config.name,
                        str(tool.name),
                        str(tool.description or "")[:4000],
                        dict(tool.input_schema or {"type": "object"}),
                    )
                )
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS:
                break
        return tools[:MAX_TOOLS]

    async def _ready(self, timeout: float) -> tuple[Any, _Attempt]:
        attempt = self._attempt
        while attempt is None:  # the supervisor has not begun yet
            await asyncio.sleep(0)
            attempt = self._attempt
        try:
            client = await asyncio.wait_for(asyncio.shield(attempt.up), timeout)
        except TimeoutError:
            raise ToolTimeoutError(
                f"MCP server {self.config.name} did not start within {timeout:.0f} s. "
                f"See its log: {self.log_path}"
            ) from None
        return client, attempt

    async def _tools(self, timeout: float) -> list[ToolInfo]:
        _client, attempt = await self._ready(timeout)
        return list(attempt.tools)

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> ToolOutput:
        client, attempt = await self._ready(self.connect_timeout)  # starting has its own limit
        try:
            async with asyncio.timeout(timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolTimeoutError(
                f"{tool} on {self.config.name} did not answer within {timeout:.0f} s and was "
                "cancelled."
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as e:
            message = self._describe(e, timeout)
            if self._is_connection_loss(e):
                self._lost(attempt)  # reconnect (with backoff) for the next call
                message = (
                    f"MCP server {self.config.name} stopped during the call ({message}); "
                    "it is being restarted."
                )
            raise ToolError(message) from e
        return from_mcp(result)

    def _is_connection_loss(self, error: Exception) -> bool:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        if isinstance(error, MCPError):
            return error.code == CONNECTION_CLOSED
        return True  # a transport error (HTTP down, a broken pipe): connect again

    def _describe(self, error: BaseException, timeout: float) -> str:
        """One line for a person."""
        if isinstance(error, ImportError):  # never from the server: this install is broken
            return f"Ember's MCP support could not be loaded ({error}); reinstall Ember"
        from mcp import MCPError

        problem = self._launch.problem if self._launch is not None else None
        if isinstance(error, MCPError):
            text = error.message
            return f"{text} ({problem})" if problem else text
        if isinstance(error, TimeoutError):
            return f"no answer within {timeout:.0f} s"
        if isinstance(error, FileNotFoundError):
            return f"the command {self.config.command!r} was not found"
        if isinstance(error, BaseExceptionGroup):
            return "; ".join(self._describe(e, timeout) for e in error.exceptions)
        text = str(error) or type(error).__name__
        return f"{text} ({problem})" if problem else text


# ---- all servers ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolBox:
    """Tools offered to a model: OpenAI function definitions and, for each name the model
    sees, the server and tool it stands for (a name two servers share gets the server's name
    in front)."""

    tools: list[dict[str, Any]]
    route: dict[str, tuple[str, str]]

    def __bool__(self) -> bool:
        return bool(self.tools)


class ToolManager:
    """The servers of ``mcp.json``; a connection per server, made on first use. Thread-safe."""

    def __init__(self, config: McpConfig | None = None, logs_dir: Path | None = None) -> None:
        self.config = config or McpConfig()
        self.logs_dir = logs_dir or paths().logs_dir
        self._lock = threading.Lock()
        self._connections: dict[str, ServerConnection] = {}

    def log_path(self, name: str) -> Path:
        return self.logs_dir / f"mcp-{name}.log"

    def connection(self, name: str) -> ServerConnection:
        """The server's connection; a new one when its entry changed since (the old one stops)."""
        server = self.config.get(name)
        with self._lock:
            current = self._connections.get(name)
            if current is not None and _same_launch(current.config, server):
                current.config = server  # tool switches and approvals need no restart
                return current
        env = self.config.env(server)  # may read the keyring: not under the lock
        headers = self.config.headers(server)
        fresh = ServerConnection(server, env, headers, self.log_path(name))
        with self._lock:
            old = self._connections.get(name)
            self._connections[name] = fresh
        if old is not None:
            old.stop()
        return fresh

    def list_tools(self, name: str, timeout: float | None = None) -> list[ToolInfo]:
        connection = self.connection(name)
        return connection.list_tools(timeout).result()

    def toolbox(
        self,
        names: list[str],
        timeout: float | None = None,
        exclude: Collection[str] = (),
        wait: Callable[[list[concurrent.futures.Future[list[ToolInfo]]]], list[list[ToolInfo]]]
        | None = None,
    ) -> ToolBox:
        """The enabled tools of the enabled servers ``names``, ready for a ChatRequest, but
        those named in ``exclude`` (``"server/tool"``: a chat's own choice). The servers
        connect at once; ``wait`` waits for their listings (a chat's, so Esc stops the wait:
        ``LoopControl.wait``; default: until each is listed or fails)."""
        servers = [s for s in (self.config.get(n) for n in names) if s.enabled]
        listings = [self.connection(s.name).list_tools(timeout) for s in servers]
        listed = wait(listings) if wait is not None else [f.result() for f in listings]
        found: list[ToolInfo] = []
        for server, listing in zip(servers, listed, strict=True):
            found += [
                t
                for t in listing
                if server.tool_enabled(t.name) and f"{server.name}/{t.name}" not in exclude
            ]
        counts: dict[str, int] = {}
        for tool in found:
            counts[tool.name] = counts.get(tool.name, 0) + 1
        tools: list[dict[str, Any]] = []
        route: dict[str, tuple[str, str]] = {}
        for tool in found:
            shown = tool.name if counts[tool.name] == 1 else f"{tool.server}_{tool.name}"
            route[shown] = (tool.server, tool.name)
            function: dict[str, Any] = {"name": shown, "parameters": tool.input_schema}
            if tool.description:
                function["description"] = tool.description
            tools.append({"type": "function", "function": function})
        return ToolBox(tools, route)

    def call(
        self, server: str, tool: str, arguments: dict[str, Any], timeout: float
    ) -> concurrent.futures.Future[ToolOutput]:
        return self.connection(server).call(tool, arguments, timeout)

    def unapproved(self, names: Collection[str]) -> list[ServerConfig]:
        """The enabled servers among ``names`` whose command line has not been approved (each
        must be shown to the person before it runs)."""
        servers = (self.config.find(n) for n in names)
        return [s for s in servers if s is not None and s.enabled and s.needs_approval]

    def status(self, name: str) -> tuple[str, str | None]:
        """A server's connection state (``stopped``, ``starting``, ``ready``, ``failed``)
        and its last error, without connecting (for Settings → Tools)."""
        with self._lock:
            connection = self._connections.get(name)
        if connection is None:
            return "stopped", None
        return connection.state, connection.last_error

    def known_tools(self, name: str) -> list[ToolInfo] | None:
        """The tools of a server that is up now, without connecting (None: not known yet)."""
        with self._lock:
            connection = self._connections.get(name)
        return connection.known_tools() if connection is not None else None

    def stop(self, name: str) -> None:
        with self._lock:
            connection = self._connections.pop(name, None)
        if connection is not None:
            connection.stop()

    def shutdown(self) -> None:
        """Stop every server (at quit); idempotent."""
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        threads = [threading.Thread(target=c.stop, daemon=True) for c in connections]
        for t in threads:  # in parallel: each may take a couple of seconds to leave
            t.start()
        for t in threads:
            t.join(STOP_TIMEOUT + 1)


def _same_launch(a: ServerConfig, b: ServerConfig) -> bool:
    return (a.command, a.args, a.env, a.cwd, a.url, a.headers) == (
        b.command,
        b.args,
        b.env,
        b.cwd,
        b.url,
        b.headers,
    )
