"""Running ``ember`` as a user does: a subprocess of this interpreter."""

from __future__ import annotations

import subprocess
import sys

EMBER = [sys.executable, "-m", "app"]


def ember(
    *args: str, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run ``ember ARGS``; ``stdin`` is typed into it (none: an empty, closed input)."""
    return subprocess.run(
        [*EMBER, *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
