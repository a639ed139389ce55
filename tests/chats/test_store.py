"""ChatStore against real SQLite files: conversations, the message tree, search, migrations,
crash recovery and threads. Export/import live in test_transfer.py, grouping in test_grouping.py,
damaged and locked files in test_damage.py.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.chats import schema
from app.chats.models import ChatStoreError, Message, NotFoundError, SchemaVersionError
from app.chats.store import ChatStore

REPO_ROOT = Path(__file__).resolve().parents[2]


def contents(messages: list[Message]) -> list[str]:
    return [message.content for message in messages]


def raw(db_path: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    """Read the file with a separate plain connection, as another process would."""
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def chat(store: ChatStore, *texts: str, title: str = "Chat") -> tuple[str, list[Message]]:
    """A conversation with alternating user/assistant messages in one branch."""
    conversation = store.create_conversation(title)
    messages = [
        store.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", text)
        for i, text in enumerate(texts)
    ]
    return conversation.id, messages


# -- opening, schema, migrations --------------------------------------------------------------


def test_open_configures_sqlite(store: ChatStore, db_path: Path) -> None:
    conn = store._conn
    assert conn is not None
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert raw(db_path, "PRAGMA user_version") == [(len(schema.MIGRATIONS),)]
    tables = {row[0] for row in raw(db_path, "SELECT name FROM sqlite_master")}
    assert {"conversations", "messages", "messages_parent", "messages_conversation"} <= tables


def test_open_creates_missing_folders(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "chats.db"
    with ChatStore(path) as store:
        store.create_conversation()
    assert path.exists()


def test_reopen_keeps_data(db_path: Path) -> None:
    with ChatStore(db_path) as store:
        conversation_id, _ = chat(store, "hi", "hello")
    with ChatStore(db_path) as store:
        assert contents(store.active_branch(conversation_id)) == ["hi", "hello"]


def test_newer_schema_is_refused_with_a_clear_error(db_path: Path) -> None:
    ChatStore(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(SchemaVersionError, match="newer version of Ember") as info:
        ChatStore(db_path)
    assert str(db_path) in str(info.value)
    assert "99" in str(info.value)


def test_a_new_migration_runs_once_on_an_old_file(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ChatStore(db_path) as store:
        conversation_id, _ = chat(store, "kept")
    calls: list[int] = []

    def migration_2(conn: sqlite3.Connection) -> None:
        calls.append(2)
        conn.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, migration_2])
    with ChatStore(db_path) as store:
        assert contents(store.active_branch(conversation_id)) == ["kept"]
    with ChatStore(db_path):
        pass
    assert calls == [2]
    assert raw(db_path, "PRAGMA user_version") == [(2,)]
    assert raw(db_path, "SELECT pinned FROM conversations") == [(0,)]


def test_a_failing_migration_leaves_the_previous_version(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ChatStore(db_path).close()

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("migration bug")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, broken])
    with pytest.raises(RuntimeError, match="migration bug"):
        ChatStore(db_path)
    assert raw(db_path, "PRAGMA user_version") == [(1,)]
    assert raw(db_path, "SELECT name FROM sqlite_master WHERE name = 'half_done'") == []


def test_an_unopenable_path_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ChatStoreError, match="Cannot open the chat history"):
        ChatStore(tmp_path)  # a folder


def test_close_is_idempotent_and_later_calls_fail(db_path: Path) -> None:
    store = ChatStore(db_path)
    store.close()
    store.close()
    with pytest.raises(ChatStoreError, match="closed"):
        store.list_conversations()


# -- conversations ------------------------------------------------------------------------------


def test_create_and_get_conversation(store: ChatStore) -> None:
    before = time.time()
    created = store.create_conversation(
        "Trip", model="gemma-3", system_prompt="Be brief.", settings={"temperature": 0.2}
    )
    assert len(created.id) == 36  # a uuid
    assert created.title == "Trip"
    assert created.model == "gemma-3"
    assert created.system_prompt == "Be brief."
    assert created.settings == {"temperature": 0.2}
    assert created.current_leaf_id is None
    assert not created.is_deleted
    assert before <= created.created_at == created.updated_at <= time.time()
    assert store.get_conversation(created.id) == created


def test_create_conversation_defaults(store: ChatStore) -> None:
    conversation = store.create_conversation()
    assert (conversation.title, conversation.model, conversation.system_prompt) == (
        "New chat",
        None,
        "",
    )
    assert conversation.settings == {}


def test_unknown_conversation_raises_not_found(store: ChatStore) -> None:
    for call in (
        lambda: store.get_conversation("nope"),
        lambda: store.rename_conversation("nope", "x"),
        lambda: store.update_conversation_settings("nope", model="m"),
        lambda: store.delete_conversation("nope"),
        lambda: store.restore_conversation("nope"),
        lambda: store.add_message("nope", "user", "hi"),
        lambda: store.active_branch("nope"),
        lambda: store.message_count("nope"),
        lambda: store.export_markdown("nope"),
        lambda: store.export_json("nope"),
    ):
        with pytest.raises(NotFoundError, match="nope"):
            call()


def test_settings_must_be_a_json_object(store: ChatStore) -> None:
    with pytest.raises(ValueError, match="JSON-serializable"):
        store.create_conversation(settings={"bad": object()})
    conversation = store.create_conversation()
    with pytest.raises(TypeError, match="must be a dict"):
        store.update_conversation_settings(conversation.id, settings=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metadata"):
        store.add_message(conversation.id, "user", "x", metadata={"when": time})


def test_list_conversations_newest_activity_first(store: ChatStore) -> None:
    first = store.create_conversation("first")
    second = store.create_conversation("second")
    third = store.create_conversation("third")
    assert [c.title for c in store.list_conversations()] == ["third", "second", "first"]
    store.add_message(first.id, "user", "bump")
    assert [c.id for c in store.list_conversations()] == [first.id, third.id, second.id]
    assert [c.id for c in store.list_conversations(limit=2)] == [first.id, third.id]


def test_rename_conversation(store: ChatStore) -> None:
    conversation = store.create_conversation()
    renamed = store.rename_conversation(conversation.id, "  Paris trip \n")
    assert renamed.title == "Paris trip"
    assert renamed.updated_at == conversation.updated_at  # not activity: the list order stays
    assert store.get_conversation(conversation.id).title == "Paris trip"
    with pytest.raises(ValueError, match="empty"):
        store.rename_conversation(conversation.id, "   ")


def test_update_conversation_settings_changes_only_what_is_given(store: ChatStore) -> None:
    conversation = store.create_conversation(
        model="a", system_prompt="old", settings={"temperature": 1.0, "top_k": 40}
    )
    updated = store.update_conversation_settings(conversation.id, settings={"temperature": 0.1})
    assert updated.settings == {"temperature": 0.1}  # replaced, not merged
    assert (updated.model, updated.system_prompt) == ("a", "old")
    updated = store.update_conversation_settings(conversation.id, model=None)
    assert updated.model is None
    assert updated.system_prompt == "old"
    updated = store.update_conversation_settings(conversation.id, system_prompt="new", model="b")
    assert (updated.model, updated.system_prompt, updated.settings) == (
        "b",
        "new",
        {"temperature": 0.1},
    )
    assert store.update_conversation_settings(conversation.id) == updated
    assert store.get_conversation(conversation.id) == updated


def test_delete_is_soft_and_restore_undoes_it(store: ChatStore) -> None:
    conversation_id, _ = chat(store, "hello", "hi there")
    other = store.create_conversation("other")
    store.delete_conversation(conversation_id)
    assert [c.id for c in store.list_conversations()] == [other.id]
    deleted = store.get_conversation(conversation_id)
    assert deleted.is_deleted
    assert deleted.deleted_at is not None
    store.delete_conversation(conversation_id)  # again: keeps the first time
    assert store.get_conversation(conversation_id).deleted_at == deleted.deleted_at
    assert contents(store.active_branch(conversation_id)) == ["hello", "hi there"]

    restored = store.restore_conversation(conversation_id)
    assert not restored.is_deleted
    assert {c.id for c in store.list_conversations()} == {conversation_id, other.id}
    assert store.message_count(conversation_id) == 2


def test_purge_deleted_removes_old_deletions_for_good(store: ChatStore, db_path: Path) -> None:
    old_id, _ = chat(store, "a", "b", "c")
    recent_id, _ = chat(store, "d")
    live_id, _ = chat(store, "e")
    store.delete_conversation(old_id)
    store.delete_conversation(recent_id)
    # Pretend the first deletion happened two days ago.
    store._conn.execute(  # type: ignore[union-attr]
        "UPDATE conversations SET deleted_at = deleted_at - 172800 WHERE id = ?", (old_id,)
    )
    assert store.purge_deleted(older_than_seconds=86400) == 1
    with pytest.raises(NotFoundError):
        store.get_conversation(old_id)
    with pytest.raises(NotFoundError):
        store.restore_conversation(old_id)
    orphans = raw(db_path, "SELECT COUNT(*) FROM messages WHERE conversation_id = ?", old_id)
    assert orphans == [(0,)]
    assert store.get_conversation(recent_id).is_deleted

    assert store.purge_deleted() == 1
    assert raw(db_path, "SELECT id FROM conversations") == [(live_id,)]
    assert raw(db_path, "SELECT content FROM messages") == [("e",)]
    assert store.purge_deleted() == 0


# -- messages and the tree --------------------------------------------------------------------


def test_add_message_chains_from_the_current_leaf(store: ChatStore) -> None:
    conversation = store.create_conversation()
    user = store.add_message(conversation.id, "user", "What is 2+2?", metadata={"n": 1})
    assert user.parent_id is None
    assert (user.role, user.status, user.metadata) == ("user", "complete", {"n": 1})
    assert (user.sibling_index, user.sibling_count) == (0, 1)
    answer = store.add_message(conversation.id, "assistant", "4")
    assert answer.parent_id == user.id
    assert answer.seq > user.seq
    after = store.get_conversation(conversation.id)
    assert after.current_leaf_id == answer.id
    assert after.updated_at >= answer.created_at >= conversation.updated_at
    assert store.get_message(answer.id) == answer
    assert contents(store.active_branch(conversation.id)) == ["What is 2+2?", "4"]


def test_add_message_rejects_bad_arguments(store: ChatStore) -> None:
    conversation_id, (first,) = chat(store, "hi")
    other_id, _ = chat(store, "elsewhere")
    with pytest.raises(ValueError, match="Unknown role"):
        store.add_message(conversation_id, "robot", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Unknown status"):
        store.add_message(conversation_id, "user", "x", status="done")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="another conversation"):
        store.add_message(other_id, "user", "x", parent_id=first.id)
    with pytest.raises(NotFoundError, match="No message"):
        store.add_message(conversation_id, "user", "x", parent_id="missing")
    assert store.message_count(conversation_id) == 1


def test_explicit_parent_and_new_root(store: ChatStore) -> None:
    conversation_id, (question, _answer) = chat(store, "q", "a")
    follow = store.add_message(conversation_id, "assistant", "a2", parent_id=question.id)
    assert follow.parent_id == question.id
    assert (follow.sibling_index, follow.sibling_count) == (1, 2)
    root = store.add_message(conversation_id, "user", "fresh start", parent_id=None)
    assert root.parent_id is None
    assert (root.sibling_index, root.sibling_count) == (1, 2)
    assert contents(store.active_branch(conversation_id)) == ["fresh start"]


def test_streaming_message_lifecycle(store: ChatStore) -> None:
    conversation_id, (question,) = chat(store, "Tell me a joke")
    started = store.begin_streaming_message(conversation_id, metadata={"model": "gemma"})
    assert (started.role, started.status, started.content) == ("assistant", "streaming", "")
    assert started.parent_id == question.id
    assert store.get_conversation(conversation_id).current_leaf_id == started.id
    for piece in ("Why did ", "", "the chicken ", "cross the road?"):
        store.append_to_message(started.id, piece)
    assert store.get_message(started.id).content == "Why did the chicken cross the road?"
    touched = store.get_conversation(conversation_id).updated_at

    finished = store.finish_message(
        started.id, "complete", metadata={"tokens": 9, "tok_per_s": 31.5, "finish_reason": "stop"}
    )
    assert finished.status == "complete"
    assert finished.content == "Why did the chicken cross the road?"
    assert finished.metadata == {
        "model": "gemma",
        "tokens": 9,
        "tok_per_s": 31.5,
        "finish_reason": "stop",
    }
    assert store.get_conversation(conversation_id).updated_at >= touched
    with pytest.raises(ValueError, match="not streaming"):
        store.append_to_message(started.id, "more")
    with pytest.raises(ValueError, match="not streaming"):
        store.finish_message(started.id, "complete")


def test_append_is_one_update_in_its_own_transaction(store: ChatStore) -> None:
    conversation_id, _ = chat(store, "hi")
    message = store.begin_streaming_message(conversation_id)
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    try:
        store.append_to_message(message.id, "token")
    finally:
        store._conn.set_trace_callback(None)
    assert (statements[0], statements[-1]) == ("BEGIN IMMEDIATE", "COMMIT")
    # The trace repeats the statement for each trigger step it runs; it is one UPDATE.
    (update,) = {sql for sql in statements[1:-1] if not sql.startswith("--")}
    assert update.startswith("UPDATE messages SET content = content || ")


def test_finish_message_can_replace_text_and_record_errors(store: ChatStore) -> None:
    conversation_id, _ = chat(store, "hi")
    message = store.begin_streaming_message(conversation_id)
    store.append_to_message(message.id, "<think>raw")
    replaced = store.finish_message(message.id, content="clean answer")
    assert replaced.content == "clean answer"

    failing = store.begin_streaming_message(conversation_id)
    store.append_to_message(failing.id, "partial")
    failed = store.finish_message(failing.id, "error", {"error": "Out of memory"})
    assert (failed.status, failed.content, failed.metadata) == (
        "error",
        "partial",
        {"error": "Out of memory"},
    )
    with pytest.raises(ValueError, match="finishes as one of"):
        store.finish_message(store.begin_streaming_message(conversation_id).id, "streaming")


def test_append_and_finish_unknown_message(store: ChatStore) -> None:
    with pytest.raises(NotFoundError):
        store.append_to_message("missing", "x")
    with pytest.raises(NotFoundError):
        store.finish_message("missing")
    for call in (store.get_message, store.siblings, store.switch_to_sibling, store.delete_message):
        with pytest.raises(NotFoundError):
            call("missing")
    with pytest.raises(NotFoundError):
        store.add_sibling("missing", "x")


def test_edit_creates_a_sibling_branch(store: ChatStore) -> None:
    conversation_id, (question, answer) = chat(store, "Capital of Italy?", "Rome.")
    edited = store.add_sibling(question.id, "Capital of Spain?")
    assert (edited.parent_id, edited.role) == (None, "user")
    assert (edited.sibling_index, edited.sibling_count) == (1, 2)
    assert store.get_conversation(conversation_id).current_leaf_id == edited.id
    assert contents(store.active_branch(conversation_id)) == ["Capital of Spain?"]
    reply = store.begin_streaming_message(conversation_id)
    store.append_to_message(reply.id, "Madrid.")
    store.finish_message(reply.id)
    branch = store.active_branch(conversation_id)
    assert contents(branch) == ["Capital of Spain?", "Madrid."]
    assert [(m.sibling_index, m.sibling_count) for m in branch] == [(1, 2), (0, 1)]
    # The old version keeps its own continuation.
    assert store.get_message(answer.id).parent_id == question.id
    versions = store.siblings(edited.id)
    assert contents(versions) == ["Capital of Italy?", "Capital of Spain?"]
    assert [m.sibling_index for m in versions] == [0, 1]
    assert store.message_count(conversation_id) == 4


def test_regenerate_creates_a_sibling_answer(store: ChatStore) -> None:
    conversation_id, (question, first) = chat(store, "Name a colour", "Red")
    second = store.begin_streaming_message(conversation_id, parent_id=question.id)
    store.append_to_message(second.id, "Blue")
    store.finish_message(second.id)
    third = store.add_sibling(first.id, "Green")
    assert third.role == "assistant"
    assert contents(store.siblings(first.id)) == ["Red", "Blue", "Green"]
    assert [(m.sibling_index, m.sibling_count) for m in store.siblings(second.id)] == [
        (0, 3),
        (1, 3),
        (2, 3),
    ]
    assert contents(store.active_branch(conversation_id)) == ["Name a colour", "Green"]


def test_switch_to_sibling_shows_each_versions_latest_continuation(store: ChatStore) -> None:
    conversation_id, (u1, a1) = chat(store, "U1", "A1")
    u2 = store.add_sibling(u1.id, "U2")
    store.add_message(conversation_id, "assistant", "A2")
    store.add_message(conversation_id, "user", "U3")
    store.add_message(conversation_id, "assistant", "A3")
    a1b = store.begin_streaming_message(conversation_id, parent_id=u1.id)
    store.finish_message(a1b.id, content="A1b")

    assert contents(store.switch_to_sibling(u2.id)) == ["U2", "A2", "U3", "A3"]
    assert contents(store.switch_to_sibling(u1.id)) == ["U1", "A1b"]  # the newest answer
    assert contents(store.switch_to_sibling(a1.id)) == ["U1", "A1"]

    # Continue the older answer: stepping away and back returns to that newest work.
    store.add_message(conversation_id, "user", "U4")
    store.add_message(conversation_id, "assistant", "A4")
    store.switch_to_sibling(u2.id)
    branch = store.switch_to_sibling(u1.id)
    assert contents(branch) == ["U1", "A1", "U4", "A4"]
    assert store.get_conversation(conversation_id).current_leaf_id == branch[-1].id
    assert contents(store.active_branch(conversation_id)) == contents(branch)


def test_switch_to_sibling_does_not_reorder_the_sidebar(store: ChatStore) -> None:
    _, (first, _) = chat(store, "a", "b")
    store.add_sibling(first.id, "a2")
    newer = store.create_conversation("newer")
    store.switch_to_sibling(first.id)
    assert store.list_conversations()[0].id == newer.id


def test_delete_message_removes_the_subtree(store: ChatStore, db_path: Path) -> None:
    conversation_id, (u1, a1, _u2, _a2) = chat(store, "u1", "a1", "u2", "a2")
    store.add_sibling(a1.id, "a1b")
    assert store.message_count(conversation_id) == 5
    leaf = store.delete_message(a1.id)  # off the branch on screen
    assert leaf == store.get_conversation(conversation_id).current_leaf_id
    assert contents(store.active_branch(conversation_id)) == ["u1", "a1b"]
    assert store.message_count(conversation_id) == 2
    assert store.siblings(leaf or "")[0].sibling_count == 1
    assert raw(db_path, "SELECT COUNT(*) FROM messages") == [(2,)]
    assert store.delete_message(u1.id) is None
    assert store.active_branch(conversation_id) == []
    assert store.message_count(conversation_id) == 0


def test_delete_on_the_active_branch_moves_to_the_previous_version(store: ChatStore) -> None:
    conversation_id, (question, first) = chat(store, "q", "first")
    second = store.add_sibling(first.id, "second")
    store.add_message(conversation_id, "user", "follow-up on second")
    third = store.add_sibling(first.id, "third")
    # On screen: q -> third. Deleting it shows the previous version with its continuation.
    new_leaf = store.delete_message(third.id)
    branch = store.active_branch(conversation_id)
    assert contents(branch) == ["q", "second", "follow-up on second"]
    assert new_leaf == branch[-1].id
    # Deleting the first version (nothing before it) moves to the next one.
    store.switch_to_sibling(first.id)
    store.delete_message(first.id)
    assert contents(store.active_branch(conversation_id)) == ["q", "second", "follow-up on second"]
    # No versions left: the parent becomes the leaf.
    assert store.delete_message(second.id) == question.id
    assert contents(store.active_branch(conversation_id)) == ["q"]


def test_delete_message_does_not_move_an_unrelated_leaf(store: ChatStore) -> None:
    conversation_id, (_q, first) = chat(store, "q", "first")
    second = store.add_sibling(first.id, "second")
    assert store.delete_message(first.id) == second.id
    assert contents(store.active_branch(conversation_id)) == ["q", "second"]


def test_active_branch_of_an_empty_conversation(store: ChatStore) -> None:
    conversation = store.create_conversation()
    assert store.active_branch(conversation.id) == []
    assert store.message_count(conversation.id) == 0


def test_message_count_counts_every_branch(store: ChatStore) -> None:
    conversation_id, (_, answer) = chat(store, "q", "a")
    store.add_sibling(answer.id, "b")
    store.add_sibling(answer.id, "c")
    assert store.message_count(conversation_id) == 4
    assert len(store.active_branch(conversation_id)) == 2


def test_500_message_branch_loads_in_one_query(store: ChatStore) -> None:
    conversation = store.create_conversation("long")
    for i in range(500):
        store.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", f"m{i}")
    # A second branch and another conversation must not leak in.
    store.add_sibling(store.active_branch(conversation.id)[250].id, "other version")
    store.switch_to_sibling(store.siblings(store.active_branch(conversation.id)[-1].id)[0].id)
    chat(store, "noise")

    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    try:
        branch = store.active_branch(conversation.id)
    finally:
        store._conn.set_trace_callback(None)
    assert len(statements) == 1
    assert contents(branch) == [f"m{i}" for i in range(500)]
    assert [m.parent_id for m in branch[1:]] == [m.id for m in branch[:-1]]
    assert (branch[250].sibling_index, branch[250].sibling_count) == (0, 2)
    assert store.message_count(conversation.id) == 501

    # Deleting the root of a 500-deep chain must not hit a recursion limit.
    assert store.delete_message(branch[0].id) is None
    assert store.message_count(conversation.id) == 0


# -- search -----------------------------------------------------------------------------------


@pytest.fixture(params=["fts5", "like"])
def search_store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[ChatStore]:
    with ChatStore(db_path, use_fts=request.param == "fts5") as chat_store:
        assert chat_store.has_fts is (request.param == "fts5")
        yield chat_store


def test_fts5_is_used_when_available(store: ChatStore) -> None:
    assert store.has_fts  # CPython's sqlite3 ships with FTS5 on every platform we build for


def test_search_finds_titles_and_messages(search_store: ChatStore) -> None:
    store = search_store
    by_title = store.create_conversation("Holiday planning")
    by_text, _ = chat(store, "Which museums open on Monday?", "The Louvre is closed on Tuesdays.")
    chat(store, "unrelated", title="Recipes")

    hits = store.search("holiday")
    assert [hit.conversation.id for hit in hits] == [by_title.id]
    assert hits[0].message_id is None
    assert hits[0].snippet == "Holiday planning"
    assert hits[0].highlights == ((0, 7),)

    (hit,) = store.search("LOUVRE")
    assert hit.conversation.id == by_text
    assert hit.message_id == store.get_conversation(by_text).current_leaf_id
    assert "The Louvre is closed" in hit.snippet
    start, end = hit.highlights[0]
    assert hit.snippet[start:end] == "Louvre"


def test_search_requires_every_word_and_matches_prefixes(search_store: ChatStore) -> None:
    both, _ = chat(search_store, "rust borrow checker explained")
    chat(search_store, "rust on my bike")
    assert [hit.conversation.id for hit in search_store.search("borrow rust")] == [both]
    assert [hit.conversation.id for hit in search_store.search("check")] == [both]
    assert search_store.search("rust python") == []


def test_search_is_newest_first_and_limited(search_store: ChatStore) -> None:
    ids = [chat(search_store, f"llama number {i}")[0] for i in range(5)]
    search_store.add_message(ids[1], "assistant", "more llama")
    hits = search_store.search("llama")
    assert [hit.conversation.id for hit in hits] == [ids[1], ids[4], ids[3], ids[2], ids[0]]
    assert hits[0].snippet == "more llama"  # the newest matching message of that chat
    assert len(search_store.search("llama", limit=2)) == 2


def test_search_excludes_deleted_conversations(search_store: ChatStore) -> None:
    conversation_id, _ = chat(search_store, "secret plans", title="Secret")
    search_store.delete_conversation(conversation_id)
    assert search_store.search("secret") == []
    search_store.restore_conversation(conversation_id)
    assert len(search_store.search("secret")) == 1


def test_search_follows_edits(search_store: ChatStore) -> None:
    conversation_id, (message,) = chat(search_store, "zebra crossing", title="Animals")
    search_store.rename_conversation(conversation_id, "Roads")
    assert search_store.search("animals") == []
    assert [hit.snippet for hit in search_store.search("roads")] == ["Roads"]
    search_store.delete_message(message.id)
    assert search_store.search("zebra") == []


def test_streaming_text_is_searchable_once_finished(search_store: ChatStore) -> None:
    conversation_id, _ = chat(search_store, "question")
    message = search_store.begin_streaming_message(conversation_id)
    search_store.append_to_message(message.id, "photosynthesis happens")
    assert search_store.search("photosynthesis") == []
    search_store.finish_message(message.id, "stopped")
    assert len(search_store.search("photosynthesis")) == 1


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "'",
        "*",
        "foo*",
        '"unbalanced',
        "NEAR(",
        "a OR b AND",
        "-x",
        "col:val",
        "^start",
        "(((",
        "%",
        "_",
        "\\",
        "",
        "   ",
        "NOT",
        "😀 emoji",
    ],
)
def test_search_never_fails_on_special_characters(search_store: ChatStore, query: str) -> None:
    chat(search_store, 'a "quoted" text with * and % and _ and NOT and (parens)')
    hits = search_store.search(query)
    assert isinstance(hits, list)


def test_search_special_characters_match_as_plain_words(search_store: ChatStore) -> None:
    conversation_id, _ = chat(search_store, 'she said "hello world" twice')
    assert [hit.conversation.id for hit in search_store.search('"hello')] == [conversation_id]
    assert [hit.conversation.id for hit in search_store.search("world*")] == [conversation_id]
    assert search_store.search("*") == []
    assert search_store.search("100%") == []


def test_fts_ignores_accents(store: ChatStore) -> None:
    conversation_id, _ = chat(store, "Un café crème, s'il vous plaît")
    assert [hit.conversation.id for hit in store.search("cafe creme")] == [conversation_id]


def test_search_index_is_rebuilt_after_a_session_without_fts(db_path: Path) -> None:
    with ChatStore(db_path) as store:
        before, _ = chat(store, "aardvark")
    with ChatStore(db_path, use_fts=False) as store:
        during, _ = chat(store, "aardvark again", title="Aardvarks")
        store.rename_conversation(before, "Renamed")
        assert len(store.search("aardvark")) == 2
    with ChatStore(db_path) as store:
        assert store.has_fts
        assert {hit.conversation.id for hit in store.search("aardvark")} == {before, during}
        assert [hit.conversation.id for hit in store.search("renamed")] == [before]


# -- crash recovery ---------------------------------------------------------------------------


def test_recover_interrupted_marks_streaming_messages_stopped(store: ChatStore) -> None:
    conversation_id, _ = chat(store, "hi")
    message = store.begin_streaming_message(conversation_id, metadata={"model": "m"})
    store.append_to_message(message.id, "half an ans")
    (recovered,) = store.recover_interrupted()
    assert recovered.id == message.id
    assert (recovered.status, recovered.content) == ("stopped", "half an ans")
    assert recovered.metadata == {"model": "m", "interrupted": True}
    assert store.recover_interrupted() == []


CRASHING_CHILD = """
import os, sys
from pathlib import Path
from app.chats.store import ChatStore

store = ChatStore(Path(sys.argv[1]))
conversation = store.create_conversation("Story time")
store.add_message(conversation.id, "user", "Tell me a story")
message = store.begin_streaming_message(conversation.id)
store.append_to_message(message.id, "Once upon ")
store.append_to_message(message.id, "a time")
print(conversation.id, message.id, flush=True)
os._exit(1)  # killed mid-stream: no close, no finish
"""


def test_text_streamed_before_a_crash_survives(db_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.run(
        [sys.executable, "-c", CRASHING_CHILD, str(db_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env=env,
        check=False,
    )
    assert child.returncode == 1, child.stderr
    conversation_id, message_id = child.stdout.split()
    assert Path(f"{db_path}-wal").exists()  # the data is in the WAL, never checkpointed

    with ChatStore(db_path) as store:
        (recovered,) = store.recover_interrupted()
        assert recovered.id == message_id
        assert (recovered.status, recovered.content) == ("stopped", "Once upon a time")
        branch = store.active_branch(conversation_id)
        assert [(m.role, m.content, m.status) for m in branch] == [
            ("user", "Tell me a story", "complete"),
            ("assistant", "Once upon a time", "stopped"),
        ]
        assert [hit.message_id for hit in store.search("upon")] == [message_id]


# -- threads ----------------------------------------------------------------------------------


def test_concurrent_use_from_several_threads(store: ChatStore) -> None:
    errors: list[BaseException] = []
    ids: list[str] = []

    def worker(n: int) -> None:
        try:
            conversation = store.create_conversation(f"thread {n}")
            ids.append(conversation.id)
            store.add_message(conversation.id, "user", "question")
            message = store.begin_streaming_message(conversation.id)
            for i in range(40):
                store.append_to_message(message.id, f"{i} ")
                store.list_conversations()
                store.active_branch(conversation.id)
            store.finish_message(message.id)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    expected = " ".join(str(i) for i in range(40)) + " "
    for conversation_id in ids:
        assert contents(store.active_branch(conversation_id)) == ["question", expected]
    assert len(store.list_conversations()) == 4
