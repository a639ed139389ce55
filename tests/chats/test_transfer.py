"""Export to Markdown and JSON, and JSON import with validation, through a real ChatStore."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from app.chats.store import ChatStore
from app.chats.transfer import EXPORT_FORMAT, EXPORT_VERSION


def branched(store: ChatStore) -> str:
    """A conversation with an edited question and a regenerated answer."""
    conversation = store.create_conversation(
        "Capitals",
        model="gemma-3-270m",
        system_prompt="You are a geography tutor.",
        settings={"temperature": 0.3, "stop": ["</s>"]},
    )
    question = store.add_message(conversation.id, "user", "Capital of Italy?")
    store.add_message(conversation.id, "assistant", "Rome.", metadata={"tokens": 2})
    store.begin_streaming_message(conversation.id, parent_id=question.id)
    stopped = store.get_conversation(conversation.id).current_leaf_id or ""
    store.append_to_message(stopped, "It is Ro")
    store.finish_message(stopped, "stopped")
    store.add_sibling(question.id, "Capital of Spain?")
    store.add_message(conversation.id, "assistant", "Madrid.")
    store.switch_to_sibling(question.id)  # on screen: Italy -> the stopped answer
    return conversation.id


def shape(export: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The tree without ids: each message with its parent's position in the list."""
    messages = export["messages"]
    position = {message["id"]: index for index, message in enumerate(messages)}
    return [
        (
            None if message["parent_id"] is None else position[message["parent_id"]],
            message["role"],
            message["content"],
            message["status"],
            message["created_at"],
            message["metadata"],
        )
        for message in messages
    ]


def test_export_markdown_shows_the_branch_on_screen(store: ChatStore) -> None:
    conversation_id = branched(store)
    text = store.export_markdown(conversation_id)
    assert text.startswith("# Capitals\n")
    assert "- Model: `gemma-3-270m`" in text
    assert "## System prompt\n\nYou are a geography tutor." in text
    assert "## User\n\nCapital of Italy?" in text
    assert "## Assistant\n\nIt is Ro\n\n*(stopped before the end)*" in text
    assert "Spain" not in text
    assert "Rome." not in text
    assert text.index("## User") < text.index("## Assistant")
    assert text.endswith("\n")
    assert not text.endswith("\n\n")


def test_export_markdown_of_an_error_and_an_empty_chat(store: ChatStore) -> None:
    empty = store.create_conversation("Nothing yet")
    assert store.export_markdown(empty.id).startswith("# Nothing yet\n\n- Created: ")
    assert "## " not in store.export_markdown(empty.id)
    message = store.begin_streaming_message(empty.id)
    store.finish_message(message.id, "error", {"error": "Model crashed"})
    assert "*(error: Model crashed)*" in store.export_markdown(empty.id)


def _markdown_headings(text: str) -> list[str]:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def test_export_markdown_closes_a_code_fence_an_answer_left_open(store: ChatStore) -> None:
    """An answer stopped mid-code must not swallow the rest of the file into its code block."""
    conversation = store.create_conversation("Stopped in code")
    store.add_message(conversation.id, "user", "Write a function")
    answer = store.begin_streaming_message(conversation.id)
    store.append_to_message(answer.id, "Here:\n\n```python\ndef f():\n    return 1")
    store.finish_message(answer.id, "stopped")
    store.add_message(conversation.id, "user", "Show a Markdown file with code")
    shown = "````markdown\n# Notes\n\n```sh\nls\n```\n"  # a longer fence holding ```
    store.add_message(conversation.id, "assistant", shown)
    store.add_message(conversation.id, "user", "Thanks")
    text = store.export_markdown(conversation.id)
    assert _markdown_headings(text) == [
        "Stopped in code",
        "User",
        "Assistant",
        "User",
        "Assistant",
        "User",
    ]
    assert "    return 1\n```\n\n*(stopped before the end)*" in text
    assert "```sh\nls\n```\n````\n\n## User\n\nThanks" in text


def test_an_answer_stopped_inside_a_four_backtick_fence_is_closed_by_four(
    store: ChatStore,
) -> None:
    """The open block holds ``` lines, so a three-backtick closer would not end it."""
    conversation = store.create_conversation("Stopped in a long fence")
    store.add_message(conversation.id, "user", "Show a Markdown file with code")
    answer = store.begin_streaming_message(conversation.id)
    store.append_to_message(answer.id, "````markdown\n# Notes\n\n```sh\nls\n```\n\nMore")
    store.finish_message(answer.id, "stopped")
    store.add_message(conversation.id, "user", "Thanks")
    text = store.export_markdown(conversation.id)
    assert _markdown_headings(text) == ["Stopped in a long fence", "User", "Assistant", "User"]
    assert "```sh\nls\n```\n\nMore\n````\n\n*(stopped before the end)*" in text
    from markdown_it import MarkdownIt

    (block,) = [t for t in MarkdownIt("commonmark").parse(text) if t.type == "fence"]
    assert len(block.markup) >= 4 and block.content.endswith("```sh\nls\n```\n\nMore\n")


def test_export_markdown_leaves_closed_fences_alone(store: ChatStore) -> None:
    conversation = store.create_conversation("Closed")
    content = "A list:\n\n1. item\n\n   ```py\n   x = 1\n   ```\n\n~~~\ntilde\n~~~"
    store.add_message(conversation.id, "assistant", content)
    assert f"## Assistant\n\n{content}\n" in store.export_markdown(conversation.id)


def test_export_json_holds_the_whole_tree(store: ChatStore) -> None:
    conversation_id = branched(store)
    export = store.export_json(conversation_id)
    assert (export["format"], export["version"]) == (EXPORT_FORMAT, EXPORT_VERSION)
    assert export["conversation"]["id"] == conversation_id
    assert export["conversation"]["settings"] == {"temperature": 0.3, "stop": ["</s>"]}
    assert [m["content"] for m in export["messages"]] == [
        "Capital of Italy?",
        "Rome.",
        "It is Ro",
        "Capital of Spain?",
        "Madrid.",
    ]
    json.dumps(export)  # JSON-ready as is


def test_json_round_trip(store: ChatStore) -> None:
    conversation_id = branched(store)
    original = store.export_json(conversation_id)
    imported = store.import_json(json.loads(json.dumps(original)))

    assert imported.id != conversation_id
    copied = store.export_json(imported.id)
    old_ids = {m["id"] for m in original["messages"]}
    assert old_ids.isdisjoint(m["id"] for m in copied["messages"])
    assert shape(copied) == shape(original)
    for key in ("title", "created_at", "updated_at", "model", "system_prompt", "settings"):
        assert copied["conversation"][key] == original["conversation"][key]
    assert store.export_markdown(imported.id) == store.export_markdown(conversation_id)
    branch = store.active_branch(imported.id)
    assert [(m.sibling_index, m.sibling_count) for m in branch] == [(0, 2), (1, 2)]
    assert [m.content for m in store.siblings(branch[0].id)] == [
        "Capital of Italy?",
        "Capital of Spain?",
    ]
    # Importing again gives another copy; search finds all of them.
    store.import_json(original)
    assert len(store.search("Madrid")) == 3


def test_import_accepts_minimal_and_unordered_data(store: ChatStore) -> None:
    data = {
        "format": EXPORT_FORMAT,
        "version": 1,
        "conversation": {},
        "messages": [
            {
                "id": "b",
                "parent_id": "a",
                "role": "assistant",
                "content": "hello",
                "status": "streaming",
            },
            {"id": "a", "role": "user", "content": "hi"},
        ],
    }
    conversation = store.import_json(data)
    assert conversation.title == "Imported chat"
    branch = store.active_branch(conversation.id)
    assert [(m.role, m.content, m.status) for m in branch] == [
        ("user", "hi", "complete"),
        ("assistant", "hello", "stopped"),  # nothing is streaming it any more
    ]
    assert store.recover_interrupted() == []


def test_import_without_messages(store: ChatStore) -> None:
    data = {"format": EXPORT_FORMAT, "version": 1, "conversation": {"title": "t"}, "messages": []}
    conversation = store.import_json(data)
    assert conversation.current_leaf_id is None
    assert store.active_branch(conversation.id) == []


def _valid() -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "version": 1,
        "conversation": {"title": "ok", "current_leaf_id": "2"},
        "messages": [
            {"id": "1", "parent_id": None, "role": "user", "content": "q"},
            {"id": "2", "parent_id": "1", "role": "assistant", "content": "a"},
        ],
    }


def _with(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(_valid())
    target: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    elif value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "expected a JSON object, got a list"),
        ("text", "expected a JSON object, got a string"),
        (_with("format", "jan.thread"), "'format' is 'jan.thread'"),
        (_with("version", 2), "newer version of Ember"),
        (_with("version", True), "'version' must be a positive integer"),
        (_with("version", "1"), "'version' must be a positive integer"),
        (_with("conversation", _DELETE), "conversation: missing"),
        (_with("conversation", []), "conversation: expected an object, got a list"),
        (_with("conversation.title", 5), "conversation.title: expected a string, got a number"),
        (_with("conversation.settings", [1]), "conversation.settings: expected an object"),
        (_with("conversation.created_at", "yesterday"), "conversation.created_at: expected a unix"),
        (_with("conversation.current_leaf_id", "9"), "current_leaf_id: no message has the id '9'"),
        (_with("messages", {}), "messages: expected a list, got an object"),
        (_with("messages.0", "hi"), r"messages\[0\]: expected a JSON object, got a string"),
        (_with("messages.1.id", _DELETE), r"messages\[1\].id: missing"),
        (_with("messages.1.id", ""), r"messages\[1\].id: must not be empty"),
        (_with("messages.1.id", "1"), r"messages\[1\].id: '1' is used by messages\[0\] too"),
        (_with("messages.1.role", "bot"), r"messages\[1\].role: expected one of .*'bot'"),
        (_with("messages.1.status", "done"), r"messages\[1\].status: expected one of"),
        (_with("messages.1.content", _DELETE), r"messages\[1\].content: missing"),
        (_with("messages.1.content", ["a"]), r"messages\[1\].content: expected a string"),
        (_with("messages.1.parent_id", "x"), r"messages\[1\].parent_id: no message has the id 'x'"),
        (_with("messages.0.parent_id", "2"), "form a cycle"),
        (_with("messages.1.metadata", [1]), r"messages\[1\].metadata: expected an object"),
        (_with("messages.1.created_at", float("nan")), r"messages\[1\].created_at"),
        (_with("messages.1.created_at", True), r"messages\[1\].created_at"),
    ],
)
def test_import_rejects_bad_data_with_a_clear_message(
    store: ChatStore, data: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.import_json(data)
    assert store.list_conversations() == []


def test_the_valid_base_of_the_bad_inputs_imports(store: ChatStore) -> None:
    conversation = store.import_json(_valid())
    assert [m.content for m in store.active_branch(conversation.id)] == ["q", "a"]
