"""Running ``ember`` as a user does: a subprocess of this interpreter (``ember``: to its end;
``serve_process`` with ``reaped`` and ``stop``: a server the test talks to, then stops)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

EMBER = [sys.executable, "-m", "app"]


def ember(
    *args: str, stdin: str | None = None, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``ember ARGS``; ``stdin`` is typed into it (none: an empty, closed input); ``env``
    is set over this process's environment (where ``ember_home`` put EMBER_HOME)."""
    return subprocess.run(
        [*EMBER, *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def serve_process(*args: str, **env: str) -> subprocess.Popen[str]:
    """``ember serve ARGS`` started with ``env`` set over this process's environment (where
    ``ember_home`` put EMBER_HOME), its output piped; use it inside ``reaped``."""
    return subprocess.Popen(
        [*EMBER, "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


@contextmanager
def reaped(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``process`` for the block; killed and waited for at its end if it still runs (a test
    that failed before stopping it leaves no server behind)."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def stop(
    process: subprocess.Popen[str], timeout: float = 20, sig: int = signal.SIGTERM
) -> tuple[str, str]:
    """Stop ``process`` as a service manager does (SIGTERM); its stdout and stderr once it has
    exited (its exit code is the caller's to check)."""
    process.send_signal(sig)
    return process.communicate(timeout=timeout)
