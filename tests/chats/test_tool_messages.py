"""Tool calls and results in the conversation store: saved as messages, read back after a
restart as the engine takes them, in both exports, kept across an import, and on branches."""

from __future__ import annotations

import json
from pathlib import Path

from app.chats.store import ChatStore
from app.chats.tool_messages import call_metadata, chat_messages, result_metadata

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_current_time", "arguments": '{"timezone": "UTC"}'},
}
RESULT = '{\n  "timezone": "UTC",\n  "datetime": "2026-12-03T13:15:00+00:00"\n}'


def _chat_with_a_call(store: ChatStore) -> str:
    conversation = store.create_conversation("Time", model="m.gguf")
    store.add_message(conversation.id, "user", "What time is it?")
    store.add_message(conversation.id, "assistant", "", metadata=call_metadata([CALL]))
    store.add_message(
        conversation.id,
        "tool",
        RESULT,
        metadata=result_metadata(
            tool_call_id="call_1",
            name="get_current_time",
            server="time",
            tool="get_current_time",
            decision="once",
            output={"text": RESULT, "is_error": False, "truncated": False, "images": []},
        ),
    )
    store.add_message(conversation.id, "assistant", "It is 13:15 UTC.")
    return conversation.id


def test_calls_and_results_survive_a_restart_as_the_engine_takes_them(db_path: Path) -> None:
    with ChatStore(db_path) as store:
        conversation_id = _chat_with_a_call(store)
    with ChatStore(db_path) as store:  # a restart
        messages = chat_messages(store.active_branch(conversation_id))
    assert messages == [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {
            "role": "tool",
            "content": RESULT,
            "tool_call_id": "call_1",
            "name": "get_current_time",
        },
        {"role": "assistant", "content": "It is 13:15 UTC."},
    ]


def test_the_markdown_export_shows_the_call_and_its_result(store: ChatStore) -> None:
    text = store.export_markdown(_chat_with_a_call(store))
    assert '**Tool call:** `get_current_time`\n\n```json\n{\n  "timezone": "UTC"\n}\n```' in text
    assert "## Tool\n\n**Result of** `get_current_time` on time:\n\n```\n{" in text
    assert '"datetime": "2026-12-03T13:15:00+00:00"\n}\n```' in text
    assert text.index("Tool call") < text.index("Result of") < text.index("It is 13:15 UTC.")


def test_a_result_with_backticks_cannot_break_out_of_its_block(store: ChatStore) -> None:
    conversation = store.create_conversation("x")
    store.add_message(conversation.id, "tool", "```\n# not a heading\n```", metadata={"name": "t"})
    text = store.export_markdown(conversation.id)
    assert "````\n```\n# not a heading\n```\n````" in text


def test_the_json_export_and_import_keep_calls_and_results(store: ChatStore) -> None:
    exported = store.export_json(_chat_with_a_call(store))
    tool = next(m for m in exported["messages"] if m["role"] == "tool")
    assert tool["metadata"]["output"]["text"] == RESULT
    assert tool["metadata"]["decision"] == "once"
    imported = store.import_json(json.loads(json.dumps(exported)))
    messages = chat_messages(store.active_branch(imported.id))
    assert messages[1]["tool_calls"] == [CALL]
    assert messages[2]["tool_call_id"] == "call_1"


def test_a_regenerated_answer_keeps_the_branch_with_the_calls(store: ChatStore) -> None:
    conversation_id = _chat_with_a_call(store)
    question = store.active_branch(conversation_id)[0]
    store.begin_streaming_message(conversation_id, parent_id=question.id)
    assert [m.role for m in store.active_branch(conversation_id)] == ["user", "assistant"]
    first_answer = store.siblings(store.active_branch(conversation_id)[1].id)[0]
    branch = store.switch_to_sibling(first_answer.id)
    assert [m.role for m in branch] == ["user", "assistant", "tool", "assistant"]
    assert chat_messages(branch)[1]["tool_calls"] == [CALL]
