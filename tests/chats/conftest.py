"""Fixtures for the conversation store: a real SQLite file in the test's tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.chats.store import ChatStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "chats.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChatStore]:
    with ChatStore(db_path) as chat_store:
        yield chat_store
