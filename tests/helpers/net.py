"""Ports and readiness for tests that start servers on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_health(url: str, process: subprocess.Popen[str], timeout: float = 60) -> None:
    """Wait until ``url``/health answers 200; fail with the process's output if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"the server exited with {process.returncode}:\n{out}\n{err}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url}/health did not answer within {timeout} s")


class LocalHttp:
    """``handler`` served on 127.0.0.1 (on a port the OS picks) by a daemon thread, a thread a
    request, until ``close``. ``url`` is its root."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], poll_interval: float = 0.5) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True
        )
        self.thread.start()
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@contextmanager
def local_http(handler: type[BaseHTTPRequestHandler]) -> Iterator[LocalHttp]:
    """``handler`` served on 127.0.0.1 for the block (see :class:`LocalHttp`)."""
    http = LocalHttp(handler)
    try:
        yield http
    finally:
        http.close()
