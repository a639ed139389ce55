"""Earlier calls and tool results, shaped the way a family's chat template expects them.

Templates read ``message.tool_calls[i].function.arguments`` as an object (Hugging Face's
convention: most ``|tojson`` or ``|items`` it), except those that concatenate it as text
(Functionary v3.2, one of DeepSeek R1's): :func:`template_shape` finds which by rendering
a probe, once per template. Mistral's templates refuse call ids that are not nine letters or digits,
so ids are mapped to such ids, the same way for a call and its result. A result without a
``name`` gets its call's (GPT-OSS and others print it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
from typing import Any, Literal, NamedTuple

from app.engine.templates import ChatTemplate
from app.engine.types import ChatMessage
from app.server.toolcalls.formats import ToolFormat

Style = Literal["object", "string"]
_PROBE_ID = "abcdefghi"  # nine letters: Mistral's templates refuse other ids

_ALNUM = string.ascii_letters + string.digits


def call_as_text(name: str, arguments: str) -> str:
    """An earlier call, written the way Ember's tool prompt asks for calls (for templates
    that cannot render ``tool_calls`` themselves)."""
    try:
        args: Any = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        args = arguments
    call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>{call}</tool_call>"


def for_template(
    messages: list[ChatMessage], template_source: str | None, fmt: ToolFormat
) -> list[ChatMessage]:
    """``messages`` (earlier calls as OpenAI's ``tool_calls``, arguments as JSON text) as
    the model's template takes them: calls in the shape it renders them in, or, if it
    renders none, written into the content the way the model writes them."""
    renders = "tool_calls" in (template_source or "")
    shape = template_shape(template_source, fmt.arguments) if renders else None
    write = fmt.call_text or call_as_text
    out: list[ChatMessage] = []
    for m in messages:
        calls = m.get("tool_calls")
        if not calls:
            out.append(m)
            continue
        msg: ChatMessage = {k: v for k, v in m.items() if k != "tool_calls"}  # type: ignore[assignment]
        functions = [(str(c.get("id") or ""), c.get("function") or {}) for c in calls]
        if shape is not None:
            msg["tool_calls"] = [
                template_call(
                    fmt, i, str(f.get("name")), str(f.get("arguments") or ""), shape.arguments
                )
                for i, f in functions
            ]
        else:
            written = "\n".join(
                write(str(f.get("name")), str(f.get("arguments") or "")) for _, f in functions
            )
            msg["content"] = f"{m.get('content') or ''}\n{written}".strip()
        out.append(msg)
    return results_named(fmt, out, shape.empty) if shape is not None else out


def call_id(fmt: ToolFormat, given: str) -> str:
    if fmt.ids != "alnum9" or (len(given) == 9 and given.isascii() and given.isalnum()):
        return given
    digest = int.from_bytes(hashlib.sha256(given.encode()).digest()[:8], "big")
    out = []
    for _ in range(9):
        digest, i = divmod(digest, len(_ALNUM))
        out.append(_ALNUM[i])
    return "".join(out)


class TemplateShape(NamedTuple):
    """How a template wants an earlier call: its arguments as an object or a string, and
    the content of a message that is only calls (None or "": templates differ)."""

    arguments: Style
    empty: str | None


@functools.lru_cache(maxsize=16)
def template_shape(template_source: str | None, default: Style) -> TemplateShape:
    """The :class:`TemplateShape` ``template_source`` renders a call in, found by rendering a
    probe once per template (one DeepSeek R1 template applies ``tojson`` to the arguments,
    another concatenates them; GPT-OSS's fails on a none content, another R1 renders calls
    only then). The format's default if no probe shows the call."""
    fallback = TemplateShape(default, "")
    if not template_source:
        return fallback
    other: Style = "string" if default == "object" else "object"
    for style in (default, other):
        for empty in (None, ""):
            if _shows_call(template_source, style, empty):
                return TemplateShape(style, empty)
    return fallback


def _shows_call(template_source: str, style: Style, empty: str | None) -> bool:
    args: Any = {"probe_key": "probe_value"}
    given = args if style == "object" else json.dumps(args)
    messages: list[ChatMessage] = [
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": empty,
            "tool_calls": [
                {
                    "id": _PROBE_ID,
                    "type": "function",
                    "function": {"name": "probe_tool", "arguments": given},
                },
            ],
        },
        {"role": "tool", "tool_call_id": _PROBE_ID, "name": "probe_tool", "content": "ok"},
    ]
    try:
        text = ChatTemplate(template_source).render(messages).text
    except Exception:  # a template that refuses this shape (or the probe)
        return False
    return "probe_value" in text


def arguments(style: Style, text: str) -> Any:
    if style == "string":
        return text or "{}"
    try:
        return json.loads(text or "{}")
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        return text


def template_call(
    fmt: ToolFormat, given_id: str, name: str, args: str, style: Style | None = None
) -> dict[str, Any]:
    """An earlier call for the template: arguments in ``style`` (default: the format's)."""
    return {
        "id": call_id(fmt, given_id),
        "type": "function",
        "function": {"name": name, "arguments": arguments(style or fmt.arguments, args)},
    }


def results_named(
    fmt: ToolFormat, messages: list[ChatMessage], empty: str | None = ""
) -> list[ChatMessage]:
    """Tool results with their call's id mapped as the calls' are, and its name if missing;
    the empty content of a message of calls as the template wants it (``empty``)."""
    names: dict[str, str] = {}
    out: list[ChatMessage] = []
    for message in messages:
        for c in message.get("tool_calls") or ():
            names[str(c.get("id"))] = str((c.get("function") or {}).get("name", ""))
        m = message
        if m.get("tool_calls") and not m.get("content"):
            m = {**m, "content": empty}
        if m.get("role") == "tool" and "tool_call_id" in m:
            m = {**m, "tool_call_id": call_id(fmt, m["tool_call_id"])}
            if "name" not in m and m["tool_call_id"] in names:
                m["name"] = names[m["tool_call_id"]]
        out.append(m)
    return out
