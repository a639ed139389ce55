"""Conversation export (Markdown, JSON) and validation of JSON imports. No database access.

The JSON export is the whole message tree::

    {"format": "ember.conversation", "version": 1,
     "conversation": {"id", "title", "created_at", "updated_at", "model", "system_prompt",
                      "settings", "current_leaf_id"},
     "messages": [{"id", "parent_id", "role", "content", "status", "created_at", "metadata"}]}

Messages are listed parents first, siblings in order. On import only ``format``, ``version``,
``conversation`` and each message's ``id``, ``parent_id``, ``role`` and ``content`` are
required; missing times default to now, a missing status to "complete".
"""

from __future__ import annotations

import heapq
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from app.chats import attachments
from app.chats.models import ROLES, STATUSES, Conversation, Message, Role, Status
from app.chats.tool_messages import markdown_lines

EXPORT_FORMAT = "ember.conversation"
EXPORT_VERSION = 1

# A line that can close a fence: up to three spaces, the fence, nothing but blanks after it.
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")

_ROLE_HEADINGS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


@dataclass(frozen=True, slots=True)
class ImportedMessage:
    old_id: str
    old_parent_id: str | None
    role: Role
    content: str
    status: Status
    created_at: float
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ImportedConversation:
    """Validated import data; ``messages`` are ordered parents first."""

    title: str
    created_at: float
    updated_at: float
    model: str | None
    system_prompt: str
    settings: dict[str, Any]
    current_leaf_old_id: str | None
    messages: list[ImportedMessage]


def to_markdown(conversation: Conversation, branch: Sequence[Message]) -> str:
    """The branch on screen as a readable Markdown document."""
    created = datetime.fromtimestamp(conversation.created_at).strftime("%Y-%m-%d %H:%M")
    lines = [f"# {conversation.title}", ""]
    if conversation.model:
        lines.append(f"- Model: `{conversation.model}`")
    lines += [f"- Created: {created}", ""]
    if conversation.system_prompt:
        lines += ["## System prompt", "", close_open_fence(conversation.system_prompt.strip()), ""]
    for message in branch:
        lines += [f"## {_ROLE_HEADINGS[message.role]}", ""]
        calls_and_results = markdown_lines(message)
        if message.role == "tool":
            lines += calls_and_results
            fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", message.content))])
            lines += [fence, message.content.strip(), fence, ""]
            continue
        if message.content:
            lines += [close_open_fence(message.content.strip()), ""]
        lines += calls_and_results
        lines += attachments.markdown_lines(message)
        if message.status == "stopped":
            lines += ["*(stopped before the end)*", ""]
        elif message.status == "error":
            error = message.metadata.get("error")
            lines += [f"*(error: {error})*" if error else "*(error)*", ""]
        elif message.status == "streaming":
            lines += ["*(still being written)*", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def close_open_fence(text: str) -> str:
    """``text`` with a code fence left open at its end closed (an answer stopped mid-code):
    in a Markdown file an open fence swallows everything after it, the next messages too.

    The closing fence repeats the opening one (same character, same length), so a block opened
    with four backticks to hold ``` lines is closed by four. Only a top-level fence can run on:
    one inside a list or a quote ends with its container.
    """
    if "```" not in text and "~~~" not in text:
        return text
    from markdown_it import MarkdownIt  # not needed to run the store, only to export

    blocks = [t for t in MarkdownIt("commonmark").parse(text) if t.level == 0]
    last = blocks[-1] if blocks else None
    if last is None or last.type != "fence" or last.map is None:
        return text
    lines = text.split("\n")
    start, end = last.map
    closer = _FENCE_LINE.match(lines[end - 1]) if start < end - 1 <= len(lines) - 1 else None
    marker = last.markup
    if closer and closer.group(1)[0] == marker[0] and len(closer.group(1)) >= len(marker):
        return text
    return f"{text}\n{marker}"


def to_json(conversation: Conversation, messages: Sequence[Message]) -> dict[str, Any]:
    """The whole tree; ``messages`` must be in ``seq`` order (which puts parents first)."""
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "conversation": {
            "id": conversation.id,
            "title": conversation.title,
            "created_at": conversation.created_at,
            "updated_at": conversation.updated_at,
            "model": conversation.model,
            "system_prompt": conversation.system_prompt,
            "settings": conversation.settings,
            "current_leaf_id": conversation.current_leaf_id,
        },
        "messages": [
            {
                "id": message.id,
                "parent_id": message.parent_id,
                "role": message.role,
                "content": message.content,
                "status": message.status,
                "created_at": message.created_at,
                "metadata": message.metadata,
            }
            for message in messages
        ],
    }


def parse_import(data: object) -> ImportedConversation:
    """Check an export (as loaded by ``json.load``); raise ValueError saying what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError(f"Not an Ember conversation: expected a JSON object, got {_kind(data)}.")
    if data.get("format") != EXPORT_FORMAT:
        raise ValueError(
            f"Not an Ember conversation: 'format' is {data.get('format')!r}, "
            f"expected {EXPORT_FORMAT!r}."
        )
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"'version' must be a positive integer, got {version!r}.")
    if version > EXPORT_VERSION:
        raise ValueError(
            f"This conversation was exported by a newer version of Ember (format version "
            f"{version}; this version reads up to {EXPORT_VERSION}). Update Ember to import it."
        )
    conversation = _field(data, "conversation", "", Mapping, required=True)
    raw_messages = _field(data, "messages", "", list, required=True)
    now = time.time()
    messages = _ordered_messages(
        [_parse_message(raw, f"messages[{index}]", now) for index, raw in enumerate(raw_messages)]
    )
    known_ids = {message.old_id for message in messages}
    leaf = _field(conversation, "current_leaf_id", "conversation.", str)
    if leaf is not None and leaf not in known_ids:
        raise ValueError(f"conversation.current_leaf_id: no message has the id {leaf!r}.")
    if leaf is None and messages:
        leaf = messages[-1].old_id  # the newest message; it has no children
    created_at = _time_field(conversation, "created_at", "conversation.", now)
    return ImportedConversation(
        title=_field(conversation, "title", "conversation.", str) or "Imported chat",
        created_at=created_at,
        updated_at=_time_field(conversation, "updated_at", "conversation.", created_at),
        model=_field(conversation, "model", "conversation.", str),
        system_prompt=_field(conversation, "system_prompt", "conversation.", str) or "",
        settings=dict(_field(conversation, "settings", "conversation.", Mapping) or {}),
        current_leaf_old_id=leaf,
        messages=messages,
    )


def _parse_message(raw: object, where: str, now: float) -> ImportedMessage:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {_kind(raw)}.")
    prefix = f"{where}."
    message_id = _field(raw, "id", prefix, str, required=True)
    if not message_id:
        raise ValueError(f"{where}.id: must not be empty.")
    role = _field(raw, "role", prefix, str, required=True)
    if role not in ROLES:
        raise ValueError(f"{where}.role: expected one of {', '.join(ROLES)}; got {role!r}.")
    status = _field(raw, "status", prefix, str) or "complete"
    if status not in STATUSES:
        raise ValueError(f"{where}.status: expected one of {', '.join(STATUSES)}; got {status!r}.")
    if status == "streaming":  # nothing is writing it any more
        status = "stopped"
    return ImportedMessage(
        old_id=message_id,
        old_parent_id=_field(raw, "parent_id", prefix, str),
        role=cast(Role, role),
        content=_field(raw, "content", prefix, str, required=True),
        status=cast(Status, status),
        created_at=_time_field(raw, "created_at", prefix, now),
        metadata=dict(_field(raw, "metadata", prefix, Mapping) or {}),
    )


def _ordered_messages(messages: list[ImportedMessage]) -> list[ImportedMessage]:
    """Parents before children, otherwise keeping the given order; reject broken trees."""
    by_id: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message.old_id in by_id:
            first = by_id[message.old_id]
            raise ValueError(
                f"messages[{index}].id: {message.old_id!r} is used by messages[{first}] too."
            )
        by_id[message.old_id] = index
    children: dict[int, list[int]] = {}
    ready: list[int] = []
    for index, message in enumerate(messages):
        parent = message.old_parent_id
        if parent is None:
            ready.append(index)
        elif parent not in by_id:
            raise ValueError(f"messages[{index}].parent_id: no message has the id {parent!r}.")
        else:
            children.setdefault(by_id[parent], []).append(index)
    heapq.heapify(ready)
    ordered: list[ImportedMessage] = []
    while ready:
        index = heapq.heappop(ready)
        ordered.append(messages[index])
        for child in children.get(index, ()):
            heapq.heappush(ready, child)
    if len(ordered) != len(messages):
        placed = {message.old_id for message in ordered}
        stuck = [message.old_id for message in messages if message.old_id not in placed]
        raise ValueError(
            f"messages: the parent_id links form a cycle; these messages never reach a first "
            f"message: {', '.join(repr(message_id) for message_id in stuck[:5])}."
        )
    return ordered


def _field(
    mapping: Mapping[str, Any],
    key: str,
    prefix: str,
    kind: type,
    *,
    required: bool = False,
) -> Any:
    value = mapping.get(key)
    if value is None:
        if required:
            raise ValueError(f"{prefix}{key}: missing (expected {_type_name(kind)}).")
        return None
    if not isinstance(value, kind):
        raise ValueError(f"{prefix}{key}: expected {_type_name(kind)}, got {_kind(value)}.")
    return value


def _time_field(mapping: Mapping[str, Any], key: str, prefix: str, default: float) -> float:
    value = mapping.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{prefix}{key}: expected a unix time in seconds, got {value!r}.")
    return float(value)


def _type_name(kind: type) -> str:
    if kind is Mapping:
        return "an object"
    if kind is list:
        return "a list"
    return "a string" if kind is str else kind.__name__


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__
