"""ServerRunner: the API served by uvicorn on its own thread, never on the GUI thread.

``start()`` binds the socket itself, so a taken port or a refused bind is reported at once as
an exception (and ``port=0`` picks a free port); it returns when uvicorn accepts requests.
``stop()`` cancels the API's engine jobs (open streams end within a token), asks uvicorn to
finish, and forces it after ``config.graceful_timeout`` seconds, so nothing can block
quitting. A stopped runner can be started again, with the same or a new config.

Thread: one daemon thread named ``ember-server`` per run, with its own event loop. Status
listeners are called with a :class:`ServerStatus` on whichever thread changed the state
(the caller of start/stop, or the server thread if it dies): a GUI must re-emit them as
queued signals.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import replace

import uvicorn

from app.server.app import create_app
from app.server.config import ServerConfig
from app.server.forward import RemoteForwarder
from app.server.gateway import Gateway
from app.server.header_timeout import HeaderTimeoutProtocol
from app.server.limits import RequestLimits, limits_for
from app.server.requestlog import RequestLog
from app.server.security import check_bind
from app.server.status import PortInUseError, ServerStartError, ServerStatus

log = logging.getLogger(__name__)

StatusListener = Callable[[ServerStatus], None]


class _Uvicorn(uvicorn.Server):
    """uvicorn that says when it accepts requests."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.ready.set()


class ServerRunner:
    def __init__(
        self,
        gateway: Gateway,
        config: ServerConfig | None = None,
        request_log: RequestLog | None = None,
        forwarder: RemoteForwarder | None = None,
        limits: RequestLimits | None = None,
    ) -> None:
        self.gateway = gateway
        self.limits = limits_for(gateway, limits)  # shared with the gateway's other port
        self.forwarder = forwarder if forwarder is not None else RemoteForwarder()
        self.config = config or ServerConfig()
        self.request_log = (
            request_log if request_log is not None else RequestLog(file=self.config.log_file)
        )
        self.ready = threading.Event()
        self._lock = threading.RLock()
        self._listeners: list[StatusListener] = []
        self._status = ServerStatus("stopped", self.config.host, None)
        self._server: _Uvicorn | None = None
        self._thread: threading.Thread | None = None

    # -- status ---------------------------------------------------------------------------

    @property
    def status(self) -> ServerStatus:
        return self._status

    @property
    def port(self) -> int | None:
        return self._status.port

    @property
    def base_url(self) -> str | None:
        return self._status.base_url

    @property
    def running(self) -> bool:
        return self._status.state == "running"

    def add_status_listener(self, listener: StatusListener) -> Callable[[], None]:
        """Call ``listener(status)`` on every state change; returns the remover."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _set_status(self, status: ServerStatus) -> None:
        with self._lock:
            self._status = status
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(status)
            except Exception:
                log.exception("A server status listener raised")

    # -- start / stop ---------------------------------------------------------------------

    def start(self, config: ServerConfig | None = None, timeout: float = 15.0) -> ServerStatus:
        """Bind and serve; returns the running status. Raises ServerStartError (taken port,
        bind failure, timeout) or InsecureBindError (network address without an API key)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                raise ServerStartError("The server is already running; stop it first.")
            if config is not None:
                self.config = config
            config = self.config
            check_bind(config)
            self.ready.clear()
            self._set_status(ServerStatus("starting", config.host, None))
            try:
                sock = bind_socket(config.host, config.port)
            except ServerStartError as e:
                self._set_status(ServerStatus("failed", config.host, None, str(e)))
                raise
            port = int(sock.getsockname()[1])
            if self.request_log.file is None:
                self.request_log.file = config.log_file
            app = create_app(self.gateway, config, self.request_log, self.forwarder, self.limits)
            uv_config = uvicorn.Config(
                app,
                lifespan="off",
                log_config=None,
                access_log=False,
                server_header=False,
                timeout_graceful_shutdown=max(1, round(config.graceful_timeout)),
                timeout_keep_alive=5,
                http=HeaderTimeoutProtocol,  # a request's head must come within 30 s
            )
            server = _Uvicorn(uv_config, self.ready)
            self._server = server
            thread = threading.Thread(
                target=self._serve, args=(server, sock, port), name="ember-server", daemon=True
            )
            self._thread = thread
            thread.start()
        if not self.ready.wait(timeout) or not thread.is_alive():
            self.stop()
            error = self._status.error or f"The server did not start within {timeout} s."
            raise ServerStartError(error)
        self._set_status(ServerStatus("running", config.host, port))
        log.info("Serving the API at %s", self.base_url)
        return self._status

    def _serve(self, server: _Uvicorn, sock: socket.socket, port: int) -> None:
        error: str | None = None
        try:
            asyncio.run(self._serve_until_exit(server, sock))
        except BaseException as e:  # SystemExit from uvicorn included: report, never raise
            log.exception("The API server failed")
            error = f"The API server failed: {e}"
        finally:
            sock.close()
        if error is not None:
            self.ready.set()  # wake a waiting start()
            self._set_status(ServerStatus("failed", self.config.host, None, error))
        elif self._status.state not in ("stopping", "stopped"):
            self._set_status(ServerStatus("stopped", self.config.host, None))

    async def _serve_until_exit(self, server: _Uvicorn, sock: socket.socket) -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            await self.forwarder.aclose()

    def stop(self, timeout: float | None = None) -> None:
        """Stop serving; returns once the server thread ended. Idempotent, any thread."""
        with self._lock:
            server, thread = self._server, self._thread
            if server is None or thread is None:
                return
            self._server = self._thread = None
            if self._status.state != "failed":
                self._set_status(replace(self._status, state="stopping"))
        self.gateway.cancel_all()
        server.should_exit = True
        grace = self.config.graceful_timeout if timeout is None else timeout
        thread.join(grace + 1.0)
        if thread.is_alive():
            log.warning("The API server did not stop within %.1f s; forcing it", grace)
            server.force_exit = True
            thread.join(2.0)
        if self._status.state != "failed":
            self._set_status(ServerStatus("stopped", self.config.host, None))
        self.ready.clear()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; raises PortInUseError / ServerStartError."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        raise ServerStartError(f"Cannot listen on {host!r}: {e.strerror}.") from e
    sock = socket.socket(family, kind, proto)
    try:
        if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # Windows: no port sharing
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:  # POSIX: rebind right after a restart (TIME_WAIT), never onto a live listener
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno in (errno.EADDRINUSE, 10048):
            raise PortInUseError(
                f"Port {port} on {host} is already in use (another server is running there); "
                "choose another with --port."
            ) from e
        if e.errno in (errno.EACCES, 10013):
            raise ServerStartError(
                f"Not allowed to listen on {host}:{port}; choose a port above 1023 with --port."
            ) from e
        raise ServerStartError(f"Cannot listen on {host}:{port}: {e.strerror or e}.") from e
    sock.setblocking(False)
    return sock
