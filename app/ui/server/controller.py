"""The API server as the GUI sees it: one gateway around the GUI's own engine worker, one
request log kept across runs, and a runner started and stopped off the GUI thread.

``ServerController`` keeps a *wanted* state (on or off) and brings the runner to it one step
at a time on a background thread: clicking the switch twice while the server starts simply
ends with it stopped again, and nothing on the GUI thread ever waits for uvicorn.

Signals (all on the GUI thread):

- ``status_changed(ServerStatus)``: every runner state change (starting, running, stopping,
  stopped, failed), re-emitted from the runner's thread;
- ``state_changed(str)``: the same, just the state name;
- ``start_failed(str)``: a start was refused or failed (taken port, network bind without a
  key); the message says what to do;
- ``request_logged(RequestRecord)``: a request finished (re-emitted from the server thread);
- ``config_changed()``: a server setting was changed through ``update_settings``;
- ``ollama_port_changed()``: the optional Ollama port (``server.ollama_port``, e.g. 11434)
  started, failed (``ollama_error`` says why; the main port keeps serving) or stopped.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal, Slot
from shiboken6 import isValid

from app.engine.load_settings import load_params
from app.engine.types import LoadParams
from app.server.config import (
    IMAGE_URLS_LOCAL_KEY,
    ServerConfig,
    allow_image_urls,
    image_urls_allowed,
)
from app.server.requestlog import RequestLog, RequestRecord
from app.server.security import (
    InsecureBindError,
    WeakApiKeyError,
    check_bind,
    generate_api_key,
)
from app.server.status import PortInUseError, ServerStartError, ServerStatus
from app.ui.services import Services
from app.ui.task_runner import tasks

if TYPE_CHECKING:
    from app.server.gateway import Gateway
    from app.server.runner import ServerRunner

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"  # the "Local network" choice; needs an API key
KEYS = (
    "server.host",
    "server.port",
    "server.api_key",
    "server.cors_origins",
    "server.model_aliases",
    "server.ollama_port",
    "server.model_ttl",
)


class ServerController(QObject):
    """Starts and stops the API server off the GUI thread; reports its state as signals."""

    state_changed = Signal(str)
    status_changed = Signal(object)
    start_failed = Signal(str)
    request_logged = Signal(object)
    config_changed = Signal()
    ollama_port_changed = Signal()
    _status_relayed = Signal(object)  # runner thread -> GUI thread (queued)

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.settings = services.settings
        # The server (FastAPI, uvicorn) is built on the first start, off the GUI thread: an app
        # whose server stays off never imports it.
        self.gateway: Gateway | None = None
        self.runner: ServerRunner | None = None
        self.ollama_runner: ServerRunner | None = None  # the optional Ollama port
        self.ollama_error: str | None = None
        self._ollama_started_with = 0  # the setting the running server started with
        self.request_log = RequestLog()
        self.last_error: str | None = None
        self._status = ServerStatus("stopped", self.config().host, None)
        self._wanted = False
        self._busy = False
        self._restart_asked = False  # Restart asked while a step ran: done after it
        self._keep_wish = False  # a failed start keeps server.enabled (see restore)
        self._closed = False
        self._lock = threading.Lock()
        self._status_relayed.connect(self._on_status_relayed)
        self.request_logged.connect(self._on_request_logged)
        self._remove_listener: Any = None
        self._unsubscribe = self.request_log.subscribe(self._on_request_record)
        services.on_close.append(self.shutdown)

    # -- state ----------------------------------------------------------------------------

    @property
    def status(self) -> ServerStatus:
        """The last status the GUI thread has seen."""
        return self._status

    @property
    def state(self) -> str:
        return self._status.state

    @property
    def wanted(self) -> bool:
        """Whether the user wants the server on (the switch's position)."""
        return self._wanted

    @property
    def base_url(self) -> str | None:
        return self._status.base_url

    @property
    def running_config(self) -> ServerConfig | None:
        """The config the running server was started with (None when not running)."""
        runner = self.runner
        return runner.config if runner is not None and self._status.state == "running" else None

    def config(self) -> ServerConfig:
        """The config the next start uses: the saved settings."""
        return ServerConfig.from_settings(self.settings)

    def model_ttl(self) -> float | None:
        """Seconds a model loaded for a request stays unused (None: kept)."""
        from app.engine.residency import ttl_setting

        return ttl_setting(self.settings.get("server.model_ttl"))

    def ollama_port(self) -> int:
        """The extra port for Ollama's clients the next start opens (0: none)."""
        return int(self.settings.get("server.ollama_port") or 0)

    @property
    def ollama_urls(self) -> list[str]:
        """Where Ollama's clients reach the running server: its own port (Ollama's API has no
        /v1), and the Ollama port when that one runs too."""
        urls = [self._status.base_url.removesuffix("/v1")] if self._status.base_url else []
        extra = self.ollama_runner
        if extra is not None and extra.running and extra.base_url:
            urls.append(extra.base_url.removesuffix("/v1"))
        return urls

    def needs_restart(self) -> bool:
        """Running, but with settings that differ from the saved ones."""
        running = self.running_config
        if running is None:
            return False
        if self._ollama_started_with != self.ollama_port():
            return True
        return _bind_part(running) != _bind_part(self.config())

    # -- settings -------------------------------------------------------------------------

    def update_settings(self, **values: Any) -> None:
        """Save server settings (``host``, ``port``, ``api_key``, ``cors_origins``,
        ``model_aliases``, ``ollama_port``)."""
        changed = False
        for name, value in values.items():
            key = f"server.{name}"
            if key not in KEYS:
                raise KeyError(key)
            if self.settings.get(key) != value:
                self.settings.set(key, value)
                changed = True
        if changed:
            if self.gateway is not None:  # for the next model loaded for a request
                self.gateway.model_ttl = self.model_ttl()
            self.config_changed.emit()

    def set_image_urls(self, on: bool) -> None:
        """Let the server fetch http(s) image URLs (from the next start)."""
        if image_urls_allowed(self.settings) != on:
            allow_image_urls(self.settings, on)
            self.config_changed.emit()

    def set_image_urls_local(self, on: bool) -> None:
        """Let image URLs reach this computer and local networks too (from the next start)."""
        if bool(self.settings.get(IMAGE_URLS_LOCAL_KEY)) != on:
            self.settings.set(IMAGE_URLS_LOCAL_KEY, bool(on))
            self.config_changed.emit()

    def generate_key(self) -> str:
        key = generate_api_key()
        self.update_settings(api_key=key)
        return key

    # -- switching ------------------------------------------------------------------------

    def restore(self) -> None:
        """At start-up: start the server if it was on when the app was last closed."""
        if self.settings.get("server.enabled"):
            # A start-up failure (the port taken for now) keeps the wish: next launch tries again.
            self._keep_wish = True
            self._want(True)

    def set_enabled(self, on: bool) -> None:
        """The user's switch: remembered across restarts; returns at once."""
        self._keep_wish = False
        self.settings.set("server.enabled", bool(on))
        self._want(bool(on))

    def restart(self) -> None:
        """Apply changed settings: stop and start again (off the GUI thread)."""
        if self._closed:
            return
        self._wanted = True
        self._keep_wish = False
        self.settings.set("server.enabled", True)
        if self._busy:  # a start still finishing: restart after it, with the new settings
            self._restart_asked = True
            return
        self._restart_asked = False
        self._busy = True
        self.last_error = None
        tasks().submit(self._restart_blocking, self._on_step_done, self._on_step_failed)

    def _want(self, on: bool) -> None:
        if self._closed:
            return
        self._wanted = on
        self._step()

    def _step(self) -> None:
        """Move the runner one step towards the wanted state (never on the GUI thread)."""
        if self._busy or self._closed:
            return
        running = self.runner is not None and self.runner.status.state in ("starting", "running")
        if self._wanted and not running:
            config = self.config()
            try:
                check_bind(config)
            except InsecureBindError as e:
                self._refuse(gui_message(e, config))
                return
            self._busy = True
            self.last_error = None
            params = load_params(self.settings)
            tasks().submit(
                lambda: self._start_blocking(config, params),
                self._on_step_done,
                self._on_step_failed,
            )
        elif not self._wanted and running and self.runner is not None:
            self._busy = True
            tasks().submit(self._stop_blocking, self._on_step_done, self._on_step_failed)

    def _server(self) -> ServerRunner:
        """The runner, built on first use (a background thread: this imports the server)."""
        with self._lock:
            if self.runner is None:
                from app.server.catalog import LibraryCatalog
                from app.server.forward import RemoteForwarder
                from app.server.gateway import Gateway
                from app.server.runner import ServerRunner

                services = self.services
                self.gateway = Gateway(
                    services.engine.worker,
                    LibraryCatalog(services.library),
                    load_params(services.settings),
                    residency=services.residency,
                    model_ttl=self.model_ttl(),
                )
                self.runner = ServerRunner(
                    self.gateway,
                    self.config(),
                    self.request_log,
                    forwarder=RemoteForwarder(services.providers),
                )
                self._remove_listener = self.runner.add_status_listener(self._on_runner_status)
            return self.runner

    def _start_blocking(self, config: ServerConfig, params: LoadParams) -> ServerStatus:
        runner = self._server()
        assert self.gateway is not None
        self.gateway.load_params = params
        status = runner.start(config)
        self._start_ollama_port(config)
        return status

    def _start_ollama_port(self, config: ServerConfig) -> None:
        """The optional Ollama port; a failure leaves the main port serving and is said."""
        from app.server.ollama.port import start_ollama_port

        port = self.ollama_port()
        self._ollama_started_with, self.ollama_error = port, None
        if not port or port == config.port:
            return
        assert self.gateway is not None
        try:
            self.ollama_runner = start_ollama_port(self.gateway, config, port, self.request_log)
        except ServerStartError as e:
            self.ollama_error = str(e).replace(" with --ollama-port PORT", " in the settings")

    def _stop_blocking(self) -> None:
        extra, self.ollama_runner = self.ollama_runner, None
        if extra is not None:
            extra.stop()
        if self.runner is not None:
            self.runner.stop()

    def _restart_blocking(self) -> ServerStatus:
        self._server()
        self._stop_blocking()
        return self._start_blocking(self.config(), load_params(self.settings))

    def _on_step_done(self, _result: object) -> None:
        self._busy = False
        self.ollama_port_changed.emit()
        asked, self._restart_asked = self._restart_asked, False
        if asked and self._wanted:  # not when switched off since
            self.restart()
            return
        self._step()

    def _on_step_failed(self, error: BaseException) -> None:
        self._busy = False
        self._restart_asked = False
        self.ollama_port_changed.emit()
        self._refuse(gui_message(error, self.config()))

    def _refuse(self, message: str) -> None:
        """A start that cannot happen: say why, and put the switch back off (remembered as
        off when the user had just turned it on; kept on when it failed at start-up)."""
        log.info("The API server did not start: %s", message)
        self.last_error = message
        self._wanted = False
        if not self._keep_wish:
            self.settings.set("server.enabled", False)
        failed = ServerStatus("failed", self.config().host, None, message)
        self._status = failed
        self.status_changed.emit(failed)
        self.state_changed.emit(failed.state)
        self.start_failed.emit(message)

    # -- events from other threads ---------------------------------------------------------

    def _on_runner_status(self, status: ServerStatus) -> None:
        """Runner thread (or a background task): hand over to the GUI thread. Emitted from
        another thread, the signal is queued to this object's (the GUI) thread."""
        with self._lock:
            if not self._closed and isValid(self):
                self._status_relayed.emit(status)

    def _on_request_record(self, record: RequestRecord) -> None:
        """Server thread: hand over to the GUI thread."""
        with self._lock:
            if not self._closed and isValid(self):
                self.request_logged.emit(record)

    @Slot(object)
    def _on_status_relayed(self, status: ServerStatus) -> None:
        if status.state == "failed" and status.error:
            self.last_error = status.error
        elif status.state == "failed" and self._status.state == "failed":
            return
        self._status = status
        self.status_changed.emit(status)
        self.state_changed.emit(status.state)

    @Slot(object)
    def _on_request_logged(self, _record: RequestRecord) -> None:
        # The API may have loaded another model just in time: the GUI catches up.
        self.services.engine.sync_with_worker()

    # -- lifecycle ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop serving before the engine worker shuts down (``Services.on_close``).
        Blocks until the server thread ended (open streams are cancelled first)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._remove_listener is not None:
            self._remove_listener()
        self._unsubscribe()
        self._stop_blocking()


def gui_message(error: BaseException, config: ServerConfig) -> str:
    """The runner's messages name command-line flags; say it in the page's terms."""
    if isinstance(error, WeakApiKeyError):  # an InsecureBindError too: it goes first
        return (
            "The API key is too short to guard the local network (16 characters or more). "
            "Generate one."
        )
    if isinstance(error, PortInUseError):
        return (
            f"Port {config.port} is already in use by another program. Choose another port, "
            "or quit the program that uses it."
        )
    if isinstance(error, InsecureBindError):
        return (
            "Serving the local network needs an API key, so that only people you give it to "
            "can use your models. Generate one, or choose \u201cThis computer\u201d."
        )
    if isinstance(error, ServerStartError):
        return str(error).replace(" with --port", "")
    return f"The API server could not start: {error}"


def _bind_part(config: ServerConfig) -> tuple[object, ...]:
    """What a running server cannot change without a restart."""
    return (
        config.host,
        config.port,
        config.api_key,
        tuple(config.cors_origins),
        config.model_aliases,
        config.image_urls,
        config.image_urls_local,
    )
