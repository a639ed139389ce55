"""Purging a conversation removes its attachments' index and the stored files nothing else
uses (real SQLite, real files in the test's EMBER_HOME)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.attachments import store as attachment_store
from app.attachments.index import index_path
from app.chats import attachments
from app.chats.store import ChatStore
from tests.helpers.chat_attachments import attach_text, chat_with_files
from tests.helpers.spying import spy


def test_a_purge_removes_the_index_and_the_unshared_file_and_keeps_the_shared_one(
    store: ChatStore, tmp_path: Path
) -> None:
    shared = attach_text(tmp_path, "shared.md", "# Tides\nThe tide turns twice a day.\n")
    own = attach_text(tmp_path, "own.txt", "Only the first chat has this file.\n")
    first = chat_with_files(store, shared, own, indexed=True)
    chat_with_files(store, shared)
    assert index_path(first).exists()

    store.delete_conversation(first)
    # A soft delete can be undone: nothing is removed yet.
    assert own.stored.path.exists() and index_path(first).exists()

    assert store.purge_deleted() == 1
    assert not index_path(first).exists()
    assert not own.stored.path.exists()
    assert shared.stored.path.exists()  # the second chat still uses it


def test_a_file_of_a_soft_deleted_chat_survives_the_purge_of_another(
    store: ChatStore, tmp_path: Path
) -> None:
    shared = attach_text(tmp_path, "notes.txt", "Kept while a deleted chat may come back.\n")
    first = chat_with_files(store, shared)
    second = chat_with_files(store, shared)
    store.delete_conversation(first)
    store.delete_conversation(second)
    store.purge_deleted(older_than_seconds=3600)  # neither is that old: nothing goes
    assert shared.stored.path.exists()

    store.restore_conversation(second)
    store.purge_deleted()
    assert shared.stored.path.exists()  # the restored chat uses it
    store.delete_conversation(second)
    store.purge_deleted()
    assert not shared.stored.path.exists()


def test_deleting_a_message_keeps_its_files(store: ChatStore, tmp_path: Path) -> None:
    own = attach_text(tmp_path, "a.txt", "A file of a message that is deleted.\n")
    conversation_id = chat_with_files(store, own)
    question = store.active_branch(conversation_id)[0]
    store.delete_message(question.id)
    assert own.stored.path.exists()


def test_the_same_content_under_two_suffixes_is_two_files(store: ChatStore, tmp_path: Path) -> None:
    as_text = attach_text(tmp_path, "same.txt", "Same words.\n")
    as_markdown = attach_text(tmp_path, "same.md", "Same words.\n")
    assert as_text.stored.sha256 == as_markdown.stored.sha256
    first = chat_with_files(store, as_text)
    chat_with_files(store, as_markdown)
    store.delete_conversation(first)
    store.purge_deleted()
    assert not as_text.stored.path.exists()
    assert as_markdown.stored.path.exists()


def test_a_purge_unlinks_a_bounded_number_and_the_next_one_goes_on(
    store: ChatStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attachments, "MAX_REMOVALS", 2)
    files = [attach_text(tmp_path, f"f{i}.txt", f"File number {i}.\n") for i in range(6)]
    first = chat_with_files(store, *files)
    store.delete_conversation(first)
    store.purge_deleted()
    left = [f for f in files if f.stored.path.exists()]
    # Two steps: the index (none was built, nothing to unlink) and one file.
    assert len(left) == 5
    assert attachments.leftovers_path().exists()

    # Meanwhile a new chat attached one of the files left: the next purges keep it.
    chat_with_files(store, left[0])
    store.purge_deleted()
    assert len([f for f in files if f.stored.path.exists()]) == 3
    assert store.remove_unused_attachments() == 2  # a worker thread's sweep: no bound
    assert [f for f in files if f.stored.path.exists()] == [left[0]]
    assert not attachments.leftovers_path().exists()


def test_a_purge_reads_only_the_messages_that_name_its_files(
    store: ChatStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Purging at quit runs on the GUI thread: its cost must follow the purged chat's files,
    # not the whole history's attachments.
    purged = chat_with_files(store, attach_text(tmp_path, "gone.txt", "Only here.\n"))
    for i in range(20):
        chat_with_files(store, attach_text(tmp_path, f"other{i}.txt", f"Another file {i}.\n"))
    store.delete_conversation(purged)
    parsed = spy(monkeypatch, attachments.json, "loads")
    store.purge_deleted()
    # one read to list the purged chat's files; none of the 20 other chats' messages
    assert len(parsed) == 1


def test_the_sweep_holds_the_store_for_one_batch_of_unlinks_at_a_time(
    store: ChatStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sweep runs on a worker thread while the GUI thread uses the same store: each hold
    # of the store's lock may unlink one batch, never the whole backlog.
    monkeypatch.setattr(attachments, "MAX_REMOVALS", 2)
    files = [attach_text(tmp_path, f"f{i}.txt", f"File number {i}.\n") for i in range(7)]
    first = chat_with_files(store, *files)
    store.delete_conversation(first)
    store.purge_deleted()  # the index and one file; six files left over
    assert len([f for f in files if f.stored.path.exists()]) == 6

    unlinks_per_hold: list[int] = []
    real_read, real_remove_stored = store._read, attachment_store.remove_stored

    @contextmanager
    def counted_read() -> Iterator[Any]:
        unlinks_per_hold.append(0)
        with real_read() as conn:
            yield conn

    def counted_remove_stored(sha256: str, suffix: str = "") -> bool:
        assert not _lock_is_free(store)  # unlinks happen under the lock
        unlinks_per_hold[-1] += 1
        return real_remove_stored(sha256, suffix)

    monkeypatch.setattr(store, "_read", counted_read)
    monkeypatch.setattr(attachment_store, "remove_stored", counted_remove_stored)
    assert store.remove_unused_attachments() == 6
    assert not [f for f in files if f.stored.path.exists()]
    assert not attachments.leftovers_path().exists()
    assert max(unlinks_per_hold) == 2
    assert sum(unlinks_per_hold) == 6


def _lock_is_free(store: ChatStore) -> bool:
    """Whether another thread could take the store's lock now."""
    free: list[bool] = []

    def probe() -> None:
        if store._lock.acquire(blocking=False):
            store._lock.release()
            free.append(True)
        else:
            free.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return free[0]
