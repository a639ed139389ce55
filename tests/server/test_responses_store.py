"""The stored responses (app/server/responses/store.py) on a real SQLite file: the bounds in
count, bytes and age (old ones pruned), the chain that previous_response_id walks, a private
file, a damaged file set aside, and the keeper's reads waiting for writes already started."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from app.server.responses.store import (
    DAY,
    ConversationTooLargeError,
    MissingResponseError,
    ResponseKeeper,
    ResponseStore,
    StoreLimits,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def response(n: int, text: str = "answer") -> dict[str, Any]:
    item = {"id": f"msg_{n}", "type": "message", "role": "assistant", "content": [text]}
    return {"id": f"resp_{n}", "object": "response", "output": [item]}


def user(n: int, text: str = "question") -> list[dict[str, Any]]:
    return [{"id": f"in_{n}", "type": "message", "role": "user", "content": text}]


def rows(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM responses ORDER BY created, rowid")]


def make(tmp_path: Path, clock: Clock | None = None, **limits: Any) -> ResponseStore:
    return ResponseStore(
        tmp_path / "home" / "responses.db", StoreLimits(**limits), clock or Clock()
    )


def test_put_get_input_items_delete(tmp_path: Path) -> None:
    store = make(tmp_path)
    assert store.put(None, user(1), response(1))
    assert store.get("resp_1") == response(1)
    assert store.input_items("resp_1") == user(1)
    assert store.get("resp_2") is None and store.input_items("resp_2") is None
    assert store.delete("resp_1") and not store.delete("resp_1")
    assert store.get("resp_1") is None


def test_the_file_and_folder_are_private(tmp_path: Path) -> None:
    store = make(tmp_path)
    store.put(None, user(1), response(1))
    if os.name != "posix":
        pytest.skip("POSIX modes")
    for path in store.path.parent.iterdir():  # the database and its -wal and -shm
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700


def test_count_bound_prunes_the_oldest(tmp_path: Path) -> None:
    clock = Clock()
    store = make(tmp_path, clock, max_count=3)
    for n in range(5):
        clock.now += 1
        store.put(None, user(n), response(n))
    assert rows(store.path) == ["resp_2", "resp_3", "resp_4"]


def test_bytes_bound_prunes_the_oldest(tmp_path: Path) -> None:
    clock = Clock()
    big = "x" * 10_000
    store = make(tmp_path, clock, max_bytes=35_000)
    for n in range(5):
        clock.now += 1
        store.put(None, user(n, big), response(n, big))  # about 20 KB each
    assert rows(store.path) == ["resp_4"]
    assert not store.put(None, user(9, big * 4), response(9))  # alone larger than the store
    assert rows(store.path) == ["resp_4"]


def test_age_bound_hides_then_prunes_old_responses(tmp_path: Path) -> None:
    clock = Clock()
    store = make(tmp_path, clock, max_age=30 * DAY)
    store.put(None, user(1), response(1))
    clock.now += 29 * DAY
    store.put("resp_1", user(2), response(2))
    assert store.get("resp_1") is not None
    clock.now += 2 * DAY
    assert store.get("resp_1") is None and store.input_items("resp_1") is None
    assert not store.delete("resp_1")
    with pytest.raises(MissingResponseError) as e:
        store.conversation("resp_2")
    assert e.value.response_id == "resp_1"
    store.put(None, user(3), response(3))  # a write removes what expired
    assert rows(store.path) == ["resp_2", "resp_3"]


def test_conversation_walks_the_chain_oldest_first(tmp_path: Path) -> None:
    clock = Clock()
    store = make(tmp_path, clock)
    store.put(None, user(1), response(1))
    store.put("resp_1", user(2), response(2))
    store.put("resp_2", user(3), response(3))
    items = store.conversation("resp_3")
    assert [i["id"] for i in items] == ["in_1", "msg_1", "in_2", "msg_2", "in_3", "msg_3"]
    assert [i["id"] for i in store.conversation("resp_1")] == ["in_1", "msg_1"]
    with pytest.raises(MissingResponseError):
        store.conversation("resp_9")
    small = make(tmp_path, clock, max_conversation_bytes=300)
    with pytest.raises(ConversationTooLargeError):
        small.conversation("resp_3")


def test_a_damaged_file_is_set_aside(tmp_path: Path) -> None:
    store = make(tmp_path)
    store.path.parent.mkdir(mode=0o700)
    store.path.write_bytes(b"not a database at all" * 100)
    assert store.put(None, user(1), response(1))
    assert store.get("resp_1") == response(1)
    assert [p.name for p in store.path.parent.glob("responses.db.damaged-*")]


def test_reads_wait_for_writes_already_started(tmp_path: Path) -> None:
    keeper = ResponseKeeper(make(tmp_path))

    async def save_then_read() -> Any:
        keeper.save_soon(None, user(1), response(1))
        return await keeper.run(keeper.store.get, "resp_1")

    assert asyncio.run(save_then_read()) == response(1)


def test_ids_are_parameters_never_paths(tmp_path: Path) -> None:
    store = make(tmp_path)
    store.put(None, user(1), response(1))
    for hostile in ("../../etc/passwd", "resp_1' OR '1'='1", "resp_1\x00", "%"):
        assert store.get(hostile) is None
        assert not store.delete(hostile)
    assert store.get("resp_1") is not None
