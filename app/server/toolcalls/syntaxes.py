"""How each family writes its calls, as readers (see ``reader.py``): one small function per
family, built from the reader's primitives. The shapes follow llama.cpp's parsers
(``common/chat.cpp``) and its tests of real outputs."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from app.server.toolcalls.reader import (
    HEAD_CAP,
    KEY_CAP,
    NAME_CAP,
    VALUE_CAP,
    Broken,
    Reader,
    Step,
    attempt,
    calls_in_text,
)

NAME_KEYS = ("name",)
ARG_KEYS = ("arguments", "parameters")


# ---- JSON call objects ----------------------------------------------------------------------


def call_object(
    r: Reader, names: tuple[str, ...] = NAME_KEYS, arg_keys: tuple[str, ...] = ARG_KEYS
) -> Step:
    """``{"name": "f", "arguments": {...}}``, keys in any order, others skipped: the name
    begins the call, the arguments stream (or wait for the name, if they come first)."""
    yield from r.expect("{")
    pending: str | None = None
    named = False
    while True:
        yield from r.space()
        key = yield from r.json_string(KEY_CAP)
        yield from r.space()
        yield from r.expect(":")
        yield from r.space()
        if key in names and not named:
            r.accept((yield from r.json_string(NAME_CAP)))
            named = True
            if pending is not None:
                r.args(pending)
        elif key in arg_keys and named:
            yield from r.json_args()
        elif key in arg_keys:
            pending = yield from _whole_arguments(r)
        else:  # "id", "type", "tool_call_id"...
            yield from r.json_value(stream=False, cap=HEAD_CAP)
        yield from r.space()
        sep = yield from r.first_of((",", "}"))
        if sep is None:
            raise Broken("not an object")
        if sep == "}":
            break
    if not named:
        raise Broken("no name")


def _whole_arguments(r: Reader) -> Step:
    head = yield from r.peek(1)
    if head == '"':
        text = yield from r.json_string(VALUE_CAP)
        return str(text)
    if head != "{":
        raise Broken("arguments are not an object")
    return (yield from r.json_value(stream=False))


def call_list(
    r: Reader, names: tuple[str, ...] = NAME_KEYS, arg_keys: tuple[str, ...] = ARG_KEYS
) -> Step:
    """``[{call}, {call}]`` (or one call object without the list)."""
    yield from r.space()
    if not (yield from r.literal("[")):
        yield from call_object(r, names, arg_keys)
        return
    yield from list_items(r, names, arg_keys)


def list_items(
    r: Reader, names: tuple[str, ...] = NAME_KEYS, arg_keys: tuple[str, ...] = ARG_KEYS
) -> Step:
    """The calls of a list whose ``[`` was read, and its ``]``."""
    first = True
    while True:
        yield from r.space()
        if (yield from r.literal("]")):
            return
        if not first:
            yield from r.expect(",")
            yield from r.space()
            r.mark()
        yield from call_object(r, names, arg_keys)
        r.end_call()
        first = False


def _fenced(r: Reader, body: Step) -> Step:
    """``body``, maybe in a Markdown code fence."""
    yield from r.space()
    fence = yield from r.first_of(("```json", "```"))
    yield from r.space()
    yield from body
    yield from r.space()
    if fence:
        yield from r.literal("```")
        yield from r.space()


# ---- families -------------------------------------------------------------------------------


def _hermes_call(r: Reader, opener: str) -> Step:
    yield from _fenced(r, call_object(r))
    yield from r.literal("</tool_call>")


hermes = calls_in_text(("<tool_call>",), _hermes_call)


def _bare_json(r: Reader, lists: bool) -> Step:
    """Calls as the whole answer's start: ``{call}`` (``;``-separated), or ``[calls]``."""
    yield from r.space()
    head = yield from r.peek(1)
    if head == "[" and lists:
        yield from call_list(r)
        return
    if head != "{":
        raise Broken("not a call")
    while True:
        yield from call_object(r)
        r.end_call()
        yield from r.space()
        if not (yield from r.literal(";")):
            return
        yield from r.space()
        r.mark()


def _python_tag_call(r: Reader, opener: str) -> Step:
    yield from r.space()
    yield from call_object(r)


def llama3(r: Reader) -> Step:
    yield from attempt(r, r.pos, _bare_json(r, lists=False), rewind=True)
    yield from calls_in_text(("<|python_tag|>",), _python_tag_call)(r)


def _generic_call(r: Reader, opener: str) -> Step:
    if opener == "<tool_call>":
        yield from _hermes_call(r, opener)
    else:
        yield from _fenced(r, call_list(r))


def generic(r: Reader) -> Step:
    """Models whose format is not known (or without a template: the tool prompt asks for
    ``<tool_call>``): the common shapes, and calls as bare JSON at the start."""
    yield from attempt(r, r.pos, _fenced(r, _bare_json(r, lists=True)), rewind=True)
    yield from calls_in_text(("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"), _generic_call)(r)


def _mistral_list(r: Reader, opener: str) -> Step:
    yield from call_list(r)


mistral_nemo = calls_in_text(("[TOOL_CALLS]",), _mistral_list)


def _mistral_call(r: Reader, opener: str) -> Step:
    marker = yield from r.name_until(("[ARGS]", "[CALL_ID]"))
    if marker == "[CALL_ID]":
        yield from r.until(("[ARGS]",), 64)
    yield from r.json_args()


mistral = calls_in_text(("[TOOL_CALLS]",), _mistral_call)


def _firefunction_list(r: Reader, opener: str) -> Step:
    yield from list_items(r)


firefunction = calls_in_text(("functools[",), _firefunction_list)

_granite_call = _mistral_list
granite3 = calls_in_text(("<|tool_call|>",), _granite_call)


def section(r: Reader, call_open: str, call: Any, close: str) -> Step:
    """Calls after one another, each after ``call_open``, until ``close``."""
    while True:
        yield from call(r)
        r.end_call()
        yield from r.space()
        r.mark()
        if (yield from r.first_of((call_open, close))) != call_open:
            return


DS_CALLS, DS_CALL, DS_SEP = "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>"
DS_END, DS_CALLS_END = "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"


def _deepseek_section(call: Any) -> Any:
    def read(r: Reader, opener: str) -> Step:
        if opener == DS_CALLS:
            yield from r.space()
            yield from r.expect(DS_CALL)
        yield from section(r, DS_CALL, call, DS_CALLS_END)

    return read


def _v31_call(r: Reader) -> Step:
    yield from r.name_until((DS_SEP,))
    yield from r.space()
    yield from r.json_args()
    yield from r.space()
    yield from r.literal(DS_END)


def _r1_call(r: Reader) -> Step:
    yield from r.literal("function")
    yield from r.expect(DS_SEP)
    yield from r.name_until(("\n",))
    yield from _fenced(r, r.json_args())
    yield from r.literal(DS_END)


deepseek_v31 = calls_in_text((DS_CALLS, DS_CALL), _deepseek_section(_v31_call))
deepseek_r1 = calls_in_text((DS_CALLS, DS_CALL), _deepseek_section(_r1_call))

KIMI_CALLS, KIMI_CALL = "<|tool_calls_section_begin|>", "<|tool_call_begin|>"
KIMI_ARGS, KIMI_END, KIMI_CALLS_END = (
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
)


def _kimi_call(r: Reader) -> Step:
    yield from r.space()
    yield from r.literal("functions.")
    if (yield from r.name_until((":", KIMI_ARGS))) == ":":
        yield from r.until((KIMI_ARGS,), 16)
    yield from r.space()
    yield from r.json_args()
    yield from r.space()
    yield from r.literal(KIMI_END)


def _kimi_section(r: Reader, opener: str) -> Step:
    if opener == KIMI_CALLS:
        yield from r.space()
        yield from r.expect(KIMI_CALL)
    yield from section(r, KIMI_CALL, _kimi_call, KIMI_CALLS_END)


kimi_k2 = calls_in_text((KIMI_CALLS, KIMI_CALL), _kimi_section)


def _functionary_call(r: Reader, opener: str) -> Step:
    yield from r.name_until((">",))
    yield from r.json_args()
    yield from r.literal("</function>")


functionary_v31 = calls_in_text(("<function=",), _functionary_call)


def _v32_call(r: Reader, name: str) -> Step:
    r.accept(name)
    yield from r.space()
    yield from r.json_args()


def functionary_v32(r: Reader) -> Step:
    """``all\ntext`` or ``NAME\n{args}`` messages, each after ``>>>`` (the prompt writes
    the first one's)."""
    while True:
        start = r.pos
        r.mark()
        try:
            recipient, _ = yield from r.until(("\n",), NAME_CAP)
        except Broken:  # not a recipient line: the rest is text
            r.pinned = False
            r.emit("content", r.buf[start : r.pos])
            yield from r.text_until(())
            return
        r.pinned = False
        if recipient.strip() != "all":
            yield from attempt(r, start, _v32_call(r, recipient.strip()))
        if (yield from r.text_until((">>>",))) is None:
            return


def command_r7b(r: Reader) -> Step:
    """``<|START_THINKING|>`` reasoning, ``<|START_RESPONSE|>`` text, and
    ``<|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>``."""
    markers = ("<|START_ACTION|>", "<|START_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>")
    while True:
        found = yield from r.text_until(markers)
        if found is None:
            return
        if found[0] == "<|START_THINKING|>":
            yield from r.text_until(("<|END_THINKING|>",), "reasoning")
        elif found[0] == "<|START_ACTION|>":
            yield from attempt(r, found[1], _r7b_action(r))


def _r7b_action(r: Reader) -> Step:
    yield from call_list(r, ("tool_name",), ("parameters",))
    yield from r.space()
    yield from r.literal("<|END_ACTION|>")


# ---- XML-style parameters -------------------------------------------------------------------


def _param_kind(r: Reader, tool: str, key: str) -> str:
    """ "string" (streamed as text) or "json" (read whole, kept as JSON if it is JSON)."""
    schema = r.tools.get(tool) or {}
    prop = (schema.get("properties") or {}).get(key) if isinstance(schema, dict) else None
    kind = prop.get("type") if isinstance(prop, dict) else None
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        return "string"
    return "json"


def _typed(value: str) -> str:
    try:
        return json.dumps(json.loads(value), ensure_ascii=False)
    except (ValueError, RecursionError):
        return json.dumps(value, ensure_ascii=False)


class XmlShape(NamedTuple):
    opener: str  # before a parameter's name
    key_end: str  # after it
    value_open: str  # before its value ("": one newline)
    closers: tuple[str, ...]  # after its value
    done: str  # after the last parameter


def xml_params(r: Reader, tool: str, shape: XmlShape) -> Step:
    """``opener KEY key_end value_open VALUE closer`` repeated until ``done``, as a JSON
    object: text parameters stream, others are read whole."""
    opener, key_end, value_open, closers, done = shape
    first = True
    while True:
        yield from r.space()
        nxt = yield from r.first_of((opener, done))
        if nxt != opener:
            break
        key, _ = yield from r.until((key_end,), KEY_CAP)
        if value_open:
            yield from r.space()
            yield from r.expect(value_open)
        else:
            yield from r.literal("\n")
        r.args(("{" if first else ", ") + json.dumps(key.strip(), ensure_ascii=False) + ": ")
        first = False
        if _param_kind(r, tool, key.strip()) == "string":
            yield from r.string_until(closers)
        elif (yield from r.peek(1)) in ("{", "["):  # an object or a list: JSON, streamed
            yield from r.string_until(closers, quoted=False)
        else:  # a number, true, false, null (or text where they belong): short, read whole
            value, _ = yield from r.until(closers, VALUE_CAP)
            r.args(_typed(value.strip()))
    if not first:
        r.args("}")


_QWEN = XmlShape("<parameter=", ">", "", ("\n</parameter>", "</parameter>"), "</function>")
_GLM = XmlShape("<arg_key>", "</arg_key>", "<arg_value>", ("</arg_value>",), "</tool_call>")


def _qwen3_coder_call(r: Reader, opener: str) -> Step:
    if opener == "<tool_call>":
        yield from r.space()
        yield from r.expect("<function=")
    yield from r.name_until((">",))
    yield from xml_params(r, r.current_name, _QWEN)
    yield from r.space()
    yield from r.literal("</tool_call>")


qwen3_coder = calls_in_text(("<tool_call>", "<function="), _qwen3_coder_call)


def _glm_call(r: Reader, opener: str) -> Step:
    yield from r.space()
    marker = yield from r.name_until(("\n", "<arg_key>", "</tool_call>"))
    if marker == "</tool_call>":
        return
    name = r.current_name
    if marker == "<arg_key>":
        r.pos -= len("<arg_key>")
    yield from xml_params(r, name, _GLM)


glm = calls_in_text(("<tool_call>",), _glm_call)


# ---- harmony (GPT-OSS) ----------------------------------------------------------------------

_ENDS = ("<|end|>", "<|call|>", "<|return|>", "<|start|>")
_RECIPIENT = re.compile(r"to=(\S+?)(?:<\||\s|$)")
_CHANNEL = re.compile(r"<\|channel\|>(\w+)")


def harmony(r: Reader) -> Step:
    """Messages: ``<|channel|>analysis<|message|>…<|end|>`` (reasoning), ``final`` (text),
    ``commentary to=functions.NAME … <|message|>{args}<|call|>`` (a call), each after
    ``<|start|>assistant`` (the prompt writes the first one's)."""
    while True:
        yield from r.literal("<|start|>")
        yield from r.literal("assistant")
        r.mark()  # the header's text is kept until it is read
        head = yield from r.first_of(("<|channel|>", " to="))
        if head is None:  # no header: text up to the next message
            r.pinned = False
            found = yield from r.text_until(_ENDS)
        else:
            try:
                header, _ = yield from r.until(("<|message|>",), HEAD_CAP)
            except Broken:
                r.pinned = False
                r.emit("content", r.buf[r.call_start : r.pos])
                yield from r.text_until(())
                return
            r.pinned = False
            found = yield from _harmony_body(r, head + header)
        if found is None:
            return


def _harmony_body(r: Reader, header: str) -> Step:
    recipient = _RECIPIENT.search(header)
    channel = _CHANNEL.search(header)
    target = recipient.group(1) if recipient else ""
    if target.startswith("functions.") and r.begin_call(target[len("functions.") :]):
        try:
            yield from r.space()
            yield from r.json_args()
        except Broken:
            pass
        r.end_call()
        return (yield from r.text_until(_ENDS))
    if target.startswith("functions."):  # not one of the tools: the message as written
        r.emit("content", header + "<|message|>")
    reasoning = channel is not None and channel.group(1) == "analysis" and not target
    return (yield from r.text_until(_ENDS, "reasoning" if reasoning else "content"))
