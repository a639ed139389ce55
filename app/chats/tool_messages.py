"""Tool calls and their results in a conversation, as the store keeps them.

A model's call is an assistant message whose metadata holds ``tool_calls`` (OpenAI's shape:
``[{"id", "type": "function", "function": {"name", "arguments"}}]``); its text, if it wrote
any, is the message's content. Each result is a ``tool`` message under it: its content is
what the model was given, its metadata says which call it answers (``tool_call_id``, ``name``,
``server``, ``tool``), what the person decided (``decision``: once, always, deny) and the result
for people (``output``: text, is_error, truncated, images). Both survive a restart and go into
exports like any message; regenerating or editing makes a sibling branch as for any answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.chats.models import Message
from app.engine.types import ChatMessage

TOOL_CALLS = "tool_calls"


def call_metadata(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Metadata of an assistant message that calls tools."""
    return {TOOL_CALLS: tool_calls}


def result_metadata(
    *,
    tool_call_id: str,
    name: str,
    server: str,
    tool: str,
    decision: str | None,
    output: dict[str, Any] | None,
) -> dict[str, Any]:
    """Metadata of a tool message: which call it answers and what came back."""
    return {
        "tool_call_id": tool_call_id,
        "name": name,
        "server": server,
        "tool": tool,
        "decision": decision,
        "output": output,
    }


def tool_calls(message: Message) -> list[dict[str, Any]]:
    """The calls an assistant message made (empty when it made none)."""
    calls = message.metadata.get(TOOL_CALLS)
    if message.role != "assistant" or not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, dict) and isinstance(c.get("function"), dict)]


def chat_message(message: Message) -> ChatMessage:
    """A stored message as the engine takes it, calls and results included."""
    out: ChatMessage = {"role": message.role, "content": message.content}
    calls = tool_calls(message)
    if calls:
        out["tool_calls"] = calls
        out["content"] = message.content or None
    if message.role == "tool":
        call_id = message.metadata.get("tool_call_id")
        name = message.metadata.get("name")
        if isinstance(call_id, str):
            out["tool_call_id"] = call_id
        if isinstance(name, str):
            out["name"] = name
    return out


def chat_messages(messages: Sequence[Message]) -> list[ChatMessage]:
    return [chat_message(m) for m in messages]


def markdown_lines(message: Message) -> list[str]:
    """What an export shows of a call or a result, beyond the message's text."""
    lines: list[str] = []
    for call in tool_calls(message):
        function = call["function"]
        lines += [
            f"**Tool call:** `{function.get('name', '?')}`",
            "",
            "```json",
            _pretty(str(function.get("arguments") or "{}")),
            "```",
            "",
        ]
    if message.role == "tool":
        meta = message.metadata
        where = f" on {meta['server']}" if meta.get("server") else ""
        decided = {"deny": " (denied)", "always": " (always allowed)"}.get(
            str(meta.get("decision")), ""
        )
        lines += [f"**Result of** `{meta.get('name', '?')}`{where}{decided}:", ""]
    return lines


def _pretty(text: str) -> str:
    import json

    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except ValueError:
        return text
