"""Watching what the code under test calls: a function or method replaced, for one test
(through ``monkeypatch``), by one that notes each call and then calls the real one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def spy(
    monkeypatch: pytest.MonkeyPatch,
    owner: object,
    name: str,
    record: Callable[..., object] | None = None,
) -> list[Any]:
    """The calls of ``owner.name`` from now on, each noted as ``record(*args, **kwargs)`` (by
    default its first argument), in order; every call still reaches the real one."""
    real = getattr(owner, name)
    noted: list[Any] = []

    def watched(*args: Any, **kwargs: Any) -> Any:
        noted.append(record(*args, **kwargs) if record is not None else args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, watched)
    return noted
