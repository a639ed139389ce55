"""Earlier calls and tool results, shaped the way a family's chat template expects them.

Templates read ``message.tool_calls[i].function.arguments`` as an object (Hugging Face's
convention: most ``|tojson`` or ``|items`` it), except those that concatenate it as text
(Functionary v3.2). Mistral's templates refuse call ids that are not nine letters or digits,
so ids are mapped to such ids, the same way for a call and its result. A result without a
``name`` gets its call's (GPT-OSS and others print it).
"""

from __future__ import annotations

import hashlib
import json
import string
from typing import Any

from app.engine.types import ChatMessage
from app.server.toolcalls.formats import ToolFormat

_ALNUM = string.ascii_letters + string.digits


def call_id(fmt: ToolFormat, given: str) -> str:
    if fmt.ids != "alnum9" or (len(given) == 9 and given.isascii() and given.isalnum()):
        return given
    digest = int.from_bytes(hashlib.sha256(given.encode()).digest()[:8], "big")
    out = []
    for _ in range(9):
        digest, i = divmod(digest, len(_ALNUM))
        out.append(_ALNUM[i])
    return "".join(out)


def arguments(fmt: ToolFormat, text: str) -> Any:
    if fmt.arguments == "string":
        return text or "{}"
    try:
        return json.loads(text or "{}")
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        return text


def template_call(fmt: ToolFormat, given_id: str, name: str, args: str) -> dict[str, Any]:
    return {
        "id": call_id(fmt, given_id),
        "type": "function",
        "function": {"name": name, "arguments": arguments(fmt, args)},
    }


def results_named(fmt: ToolFormat, messages: list[ChatMessage]) -> list[ChatMessage]:
    """Tool results with their call's id mapped as the calls' are, and its name if missing;
    a call's empty content as "" (GPT-OSS's and Devstral's templates fail on none), as
    llama.cpp does for templates that render calls."""
    names: dict[str, str] = {}
    out: list[ChatMessage] = []
    for message in messages:
        for c in message.get("tool_calls") or ():
            names[str(c.get("id"))] = str((c.get("function") or {}).get("name", ""))
        m = message
        if m.get("tool_calls") and m.get("content") is None:
            m = {**m, "content": ""}
        if m.get("role") == "tool" and "tool_call_id" in m:
            m = {**m, "tool_call_id": call_id(fmt, m["tool_call_id"])}
            if "name" not in m and m["tool_call_id"] in names:
                m["name"] = names[m["tool_call_id"]]
        out.append(m)
    return out
