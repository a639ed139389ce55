"""Waiting in tests for something another thread or process does: poll a condition until it
holds. The timeout is a failsafe for a busy machine, never a timing target."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float = 30.0, poll: float = 0.02) -> None:
    """Until ``condition()`` is true; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"the condition never came true within {timeout} s"
        time.sleep(poll)
