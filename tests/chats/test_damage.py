"""A chat store that survives damage: real SQLite files, damaged the way disks and tools do it
(garbage over pages, truncation to 0 bytes, another program's lock), and file permissions.

What must hold: the damage is said (``ChatStore.recovery``, ``StoreDamagedError``), the damaged
file is kept byte for byte, what can be read comes back unchanged in a fresh file, and no raw
``sqlite3`` error reaches the caller.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.chats.models import (
    RECOVERED_TITLE,
    ChatStoreError,
    StoreDamagedError,
    StoreLockedError,
)
from app.chats.store import ChatStore
from tests.helpers.damaged_db import damage_page_holding, fill, garbage, page_size

REPO_ROOT = Path(__file__).resolve().parents[2]

MessageRow = tuple[str, str | None, str, str, float]  # conversation, parent, role, content, time


def messages(db_path: Path) -> dict[str, MessageRow]:
    """Every message as another program reads it."""
    conn = sqlite3.connect(db_path)
    try:
        rows = conn.execute(
            "SELECT id, conversation_id, parent_id, role, content, created_at FROM messages"
        ).fetchall()
    finally:
        conn.close()
    return {row[0]: tuple(row[1:]) for row in rows}


def titles(db_path: Path) -> dict[str, str]:
    conn = sqlite3.connect(db_path)
    try:
        return dict(conn.execute("SELECT id, title FROM conversations").fetchall())
    finally:
        conn.close()


def every_call_works(store: ChatStore) -> None:
    """What the app does with a history; none of it may raise."""
    conversations = store.list_conversations()
    for conversation in conversations:
        store.active_branch(conversation.id)
        store.export_json(conversation.id)
    store.search("answer")
    store.search("lorem ipsum")


def check_recovered(original: dict[str, MessageRow], recovered: dict[str, MessageRow]) -> None:
    """Recovered messages are the originals, unchanged (a lost parent makes a first message)."""
    for message_id, (conversation, parent, role, content, created) in recovered.items():
        assert message_id in original
        was = original[message_id]
        assert (conversation, role, content, created) == (was[0], was[2], was[3], was[4])
        assert parent in (was[1], None)


@pytest.fixture
def history(db_path: Path) -> dict[str, MessageRow]:
    fill(db_path)
    return messages(db_path)


# -- damage found when the store opens --------------------------------------------------------


def test_garbage_in_the_middle_is_said_kept_aside_and_recovered(
    db_path: Path, history: dict[str, MessageRow]
) -> None:
    """The issue's case: 8 KB of garbage in the middle. Before, the store opened, then reading
    and searching raised sqlite3.DatabaseError while writes went on into the damaged file."""
    size = db_path.stat().st_size
    damaged = garbage(db_path, size // 2 // page_size(db_path) * page_size(db_path))

    with ChatStore(db_path) as store:
        report = store.recovery
        assert report is not None
        every_call_works(store)
        fresh = store.create_conversation("after the damage")
    assert report.damaged_path.read_bytes() == damaged  # kept, and never written into
    assert report.damaged_path.name.startswith("chats.db.damaged-")
    assert str(report.damaged_path) in report.message
    assert report.message.startswith("The chat history was damaged (")

    recovered = messages(db_path)
    check_recovered(history, recovered)
    assert report.messages == len(recovered)
    assert len(recovered) >= 0.9 * len(history)
    assert fresh.id in titles(db_path)
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()
    with ChatStore(db_path) as store:
        assert store.recovery is None  # the fresh file is fine: said once


def test_a_bad_page_costs_only_its_own_messages(
    db_path: Path, history: dict[str, MessageRow]
) -> None:
    """Reading goes on after the bad page: the rows before and after it come back."""
    damage_page_holding(db_path, "answer-0075")

    with ChatStore(db_path) as store:
        report = store.recovery
        assert report is not None and report.unreadable >= 1
        assert "some parts could not be read" in report.message
        every_call_works(store)
        assert [hit.conversation.title for hit in store.search("answer-0140")] == ["title-0140"]
    recovered = messages(db_path)
    check_recovered(history, recovered)
    lost = sorted(
        content.split()[0]
        for message_id, (_, _, _, content, _) in history.items()
        if message_id not in recovered
    )
    assert "answer-0075" in lost
    assert 0 < len(lost) <= 20, lost  # one page of messages, not the rest of the table
    for i in (0, 1, 70, 80, 148, 149):
        assert f"question-{i:04d}" not in lost


def test_a_lost_chat_row_brings_its_messages_back_in_a_recovered_chat(
    db_path: Path, history: dict[str, MessageRow]
) -> None:
    before = titles(db_path)
    damage_page_holding(db_path, "title-0100")

    with ChatStore(db_path) as store:
        report = store.recovery
        assert report is not None and report.placeholder_conversations >= 1
        every_call_works(store)
        placeholders = [c for c in store.list_conversations() if c.title == RECOVERED_TITLE]
        assert len(placeholders) == report.placeholder_conversations
        for conversation in placeholders:
            assert before[conversation.id] != RECOVERED_TITLE  # the same chat, same id
            branch = store.active_branch(conversation.id)
            assert branch and branch[0].content.startswith("question-")
    assert messages(db_path) == history  # the messages were all readable: none is lost
    after = titles(db_path)
    assert set(after) == set(before)
    lost_row = next(key for key, title in before.items() if title == "title-0100")
    assert after[lost_row] == RECOVERED_TITLE


def test_a_zero_byte_file_is_said_and_kept_not_opened_as_an_empty_history(
    db_path: Path,
) -> None:
    fill(db_path, 3)
    db_path.write_bytes(b"")  # truncated by a sync tool or a full disk
    Path(f"{db_path}-wal").unlink(missing_ok=True)
    with ChatStore(db_path) as store:
        report = store.recovery
        assert report is not None
        assert "empty (0 bytes)" in report.message
        assert store.list_conversations() == []
        store.create_conversation("new")
    assert report.damaged_path.exists() and report.damaged_path.stat().st_size == 0


def test_a_new_or_healthy_file_reports_nothing(db_path: Path) -> None:
    with ChatStore(db_path) as store:
        assert store.recovery is None
        store.create_conversation()
    with ChatStore(db_path) as store:
        assert store.recovery is None
    assert list(db_path.parent.glob("*.damaged-*")) == []


def test_a_file_that_is_not_a_database_is_kept_aside(db_path: Path) -> None:
    junk = b"this is not sqlite" * 100
    db_path.write_bytes(junk)
    with ChatStore(db_path) as store:
        report = store.recovery
        assert report is not None
        assert "not an SQLite database" in report.message
        assert (report.conversations, report.messages) == (0, 0)
        store.create_conversation()
    assert report.damaged_path.read_bytes() == junk


def test_the_damaged_files_wal_goes_aside_with_it(db_path: Path) -> None:
    """A WAL left behind could be replayed into the fresh file: it moves with its database,
    and what only it held is recovered too."""
    fill(db_path, 40)
    child = subprocess.run(
        [sys.executable, "-c", WAL_CHILD, str(db_path)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 1, child.stderr
    assert Path(f"{db_path}-wal").stat().st_size > 0
    damage_page_holding(db_path, "answer-0020")
    with ChatStore(db_path) as store:
        report = store.recovery
        assert report is not None
        assert [hit.conversation.title for hit in store.search("only in the wal")] == [
            "written last"
        ]
    assert Path(f"{report.damaged_path}-wal").exists()


WAL_CHILD = """
import os, sys
from pathlib import Path
from app.chats.store import ChatStore

store = ChatStore(Path(sys.argv[1]))
conversation = store.create_conversation("written last")
store.add_message(conversation.id, "user", "only in the wal")
os._exit(1)  # killed: the WAL is never checkpointed into the database
"""


# -- damage found while the store is open ------------------------------------------------------


def test_damage_while_open_is_recovered_and_said_once(
    db_path: Path, history: dict[str, MessageRow]
) -> None:
    with ChatStore(db_path) as store:
        assert store.recovery is None
        conversation = next(c for c in store.list_conversations() if c.title == "title-0060")
        conn = store._conn
        assert conn is not None
        # A history larger than SQLite's page cache: the page is read from the disk again.
        conn.execute("PRAGMA cache_size = 1")
        conn.execute("PRAGMA mmap_size = 0")
        damage_page_holding(db_path, "answer-0060")

        with pytest.raises(StoreDamagedError, match="The chat history was damaged") as info:
            store.active_branch(conversation.id)
        report = info.value.report
        assert store.recovery is report
        assert isinstance(info.value, ChatStoreError)  # what the app already catches
        every_call_works(store)
        store.create_conversation("after the damage")
    check_recovered(history, messages(db_path))
    assert report.damaged_path.exists()


# -- another program's lock ------------------------------------------------------------------


LOCK_CHILD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
if sys.argv[2] == "exclusive":
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
else:
    conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.rollback()
"""


Holder = Callable[[str], "subprocess.Popen[str]"]


@pytest.fixture
def lock_holder(db_path: Path) -> Iterator[Holder]:
    """A function that starts another process holding the database's lock ("immediate": the
    write lock; "exclusive": every lock) and returns once it holds it; released at the end."""
    children: list[subprocess.Popen[str]] = []

    def hold(mode: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-c", LOCK_CHILD, str(db_path), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(child)
        assert child.stdout is not None
        assert child.stdout.readline() == "locked\n"
        return child

    yield hold
    for child in children:
        release(child)


def release(child: subprocess.Popen[str]) -> None:
    if child.poll() is None:
        child.communicate("", timeout=30)


def test_a_write_lock_held_too_long_is_a_clear_error_and_changes_nothing(
    db_path: Path, lock_holder: Holder
) -> None:
    with ChatStore(db_path) as store:
        kept = store.create_conversation("kept")
    child = lock_holder("immediate")
    # The history still opens and reads while another program writes to it.
    with ChatStore(db_path, busy_timeout=0.2) as store:
        assert [c.title for c in store.list_conversations()] == ["kept"]
        with pytest.raises(StoreLockedError, match="in use by another program") as info:
            store.rename_conversation(kept.id, "renamed")
        assert "try again" in str(info.value)
        assert isinstance(info.value, ChatStoreError)
        release(child)
        assert store.rename_conversation(kept.id, "renamed").title == "renamed"  # retry works


def test_opening_a_history_another_program_keeps_locked_is_a_clear_error(
    db_path: Path, lock_holder: Holder
) -> None:
    ChatStore(db_path).close()
    child = lock_holder("exclusive")
    with pytest.raises(StoreLockedError, match=r"Cannot open the chat history .* locked") as info:
        ChatStore(db_path, busy_timeout=0.2)
    assert "another copy of Ember" in str(info.value)
    assert list(db_path.parent.glob("*.damaged-*")) == []  # a lock is not damage
    release(child)
    with ChatStore(db_path, busy_timeout=0.2) as store:
        assert store.recovery is None


# -- private files -----------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX permissions")
def test_the_history_is_readable_by_the_user_only(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        path = tmp_path / "home" / "chats.db"
        with ChatStore(path) as store:
            store.create_conversation()
            for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        path.chmod(0o644)  # as an older Ember left it
        with ChatStore(path) as store:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(Path(f"{path}-wal").stat().st_mode) == 0o600
    finally:
        os.umask(old_umask)
