"""llama-cpp-python's own OpenAI-compatible server as a subprocess: a real, independent remote.

``running_llama_server(model)`` starts ``python -m llama_cpp.server`` on a free port of
127.0.0.1, waits until ``/v1/models`` answers, and kills the process when the block ends.
The test model has no chat template, so the server is told to use the "gemma" chat format.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from tests.helpers.net import free_port

MODEL_ALIAS = "gemma-3-270m"


@dataclass
class LlamaServer:
    process: subprocess.Popen[bytes]
    port: int
    api_key: str | None
    model: str
    log: IO[bytes]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def log_tail(self, limit: int = 2000) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-limit:]

    def log_count(self, text: str) -> int:
        return self.log_tail(10**7).count(text)

    def wait_for_log(self, text: str, count: int = 1, timeout: float = 10.0) -> bool:
        """Wait until ``text`` appears ``count`` times in the server's output."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log_count(text) >= count:
                return True
            time.sleep(0.05)
        return False

    def kill(self) -> None:
        """Die at once, the way a crashed server does (no graceful close of open streams)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()


@contextlib.contextmanager
def running_llama_server(
    model: Path,
    *,
    api_key: str | None = None,
    n_ctx: int = 1024,
    alias: str = MODEL_ALIAS,
    startup_timeout: float = 60.0,
) -> Iterator[LlamaServer]:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--chat_format",
        "gemma",
        "--n_threads",
        "1",  # robust when the test machine is busy: llama.cpp threads spin on barriers
        "--verbose",
        "False",
    ]
    if api_key is not None:
        cmd += ["--api_key", api_key]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        server = LlamaServer(process, port, api_key, alias, log)
        try:
            _wait_ready(server, startup_timeout)
            yield server
        finally:
            server.stop()


def _wait_ready(server: LlamaServer, timeout: float) -> None:
    headers = {"Authorization": f"Bearer {server.api_key}"} if server.api_key else {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited early:\n{server.log_tail()}")
        try:
            r = httpx.get(f"{server.base_url}/models", headers=headers, timeout=1.0)
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"llama_cpp.server did not start within {timeout} s:\n{server.log_tail()}")
