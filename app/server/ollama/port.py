"""Ollama's port (11434), optionally: a second listener on the same gateway and request log,
for tools that cannot change the host they call. When the port is taken, one sentence says by
whom (Ollama itself, another Ember, or another program) and what to do."""

from __future__ import annotations

from dataclasses import replace

from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.requestlog import RequestLog
from app.server.runner import ServerRunner
from app.server.status import PortInUseError, ServerStartError


def who_listens(host: str, port: int, timeout: float = 1.0) -> str | None:
    """ "ember", "ollama <version>", or None (something else, or nothing) at host:port."""
    import httpx

    url_host = f"[{host}]" if ":" in host else host
    if url_host in ("0.0.0.0", "[::]"):
        url_host = "127.0.0.1"
    try:
        with httpx.Client(base_url=f"http://{url_host}:{port}", timeout=timeout) as http:
            if http.get("/health").json().get("status") == "ok":
                return "ember"
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    try:
        with httpx.Client(base_url=f"http://{url_host}:{port}", timeout=timeout) as http:
            version = http.get("/api/version").json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return f"ollama {version}" if isinstance(version, str) else None


def taken_message(host: str, port: int) -> str:
    who = who_listens(host, port)
    if who == "ember":
        return (
            f"Port {port} is already served by another Ember (the app or `ember serve`); "
            "stop that one's Ollama port, or choose another with --ollama-port PORT."
        )
    if who is not None:
        return (
            f"Port {port} is taken by Ollama itself ({who}); quit Ollama (on Linux: "
            "`systemctl stop ollama`) so Ember can answer there, or leave the Ollama port off: "
            "Ember's own port answers Ollama's API too."
        )
    return (
        f"Port {port} on {host} is already in use by another program; choose another with "
        "--ollama-port PORT, or leave it off: Ember's own port answers Ollama's API too."
    )


def start_ollama_port(
    gateway: Gateway, config: ServerConfig, port: int, request_log: RequestLog
) -> ServerRunner:
    """Serve the same API on ``port`` too; raises ServerStartError saying who holds it."""
    runner = ServerRunner(gateway, replace(config, port=port), request_log)
    try:
        runner.start()
    except PortInUseError:
        raise ServerStartError(taken_message(config.host, port)) from None
    return runner
