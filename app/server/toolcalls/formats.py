"""The table of tool-call formats: how each family is recognised from its chat template, how
its answers are read, where its calls open (lazy-grammar triggers), its call grammar, and the
message shape its template expects for earlier calls.

Detection works as llama.cpp's ``common/chat.cpp`` does: marker strings in the template's
source, first match wins (so the more specific formats come first). A template that renders
tools in no known format gets :data:`GENERIC`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from app.server.toolcalls import grammar as g
from app.server.toolcalls import syntaxes as s
from app.server.toolcalls.grammar import WS, CallShape, Tool, alternatives, json_lit, lit
from app.server.toolcalls.reader import Syntax

NL = "\n"


@dataclass(frozen=True, slots=True)
class ToolFormat:
    name: str
    label: str  # the family, for people (README, logs)
    markers: tuple[str, ...]  # all of these in the template's source
    syntax: Syntax
    shape: CallShape  # the grammar of its calls, from the first trigger on
    # Regular expressions (app.engine.triggers), given the tools' names. The grammar starts
    # at a match (its first group, if any) and must accept the matched text.
    triggers: Callable[[list[str]], tuple[str, ...]]
    absent: tuple[str, ...] = ()  # and none of these
    params: bool = False  # its arguments are XML-style parameters (their rules are needed)
    arguments: Literal["object", "string"] = "object"  # earlier calls' arguments, as rendered
    ids: Literal["any", "alnum9"] = "any"  # the call ids its template accepts
    own_reasoning: bool = False  # its syntax reads reasoning itself (no <think> splitter)
    # An earlier call (name, arguments JSON) as the model writes it, for a template that
    # renders no tool_calls (None: the tool prompt's <tool_call> shape)
    call_text: Callable[[str, str], str] | None = None
    # The tools described in a system message, in the model's own words, for a template
    # that renders no tool definitions (DeepSeek's; None: the generic tool prompt)
    tools_prompt: Callable[[list[dict[str, Any]]], str] | None = None

    def detects(self, source: str) -> bool:
        return all(m in source for m in self.markers) and not any(a in source for a in self.absent)


def _words(*words: str) -> Callable[[list[str]], tuple[str, ...]]:
    patterns = tuple(re.escape(w) for w in words)
    return lambda _names: patterns


# ---- grammar shapes -------------------------------------------------------------------------


def _hermes(tools: list[Tool], many: bool) -> str:
    calls = alternatives([g.call_object(t) for t in tools])
    return g.repeated(f'"<tool_call>" {WS} {calls} {WS} "</tool_call>"', many)


def _llama3(tools: list[Tool], many: bool) -> str:  # one call a turn
    typed = f'( "\\"type\\"" {WS} ":" {WS} "\\"function\\"" {WS} "," {WS} )?'
    calls = [g.call_object(t, "parameters", first=typed) for t in tools]
    return f'( "<|python_tag|>" {WS} )? {alternatives(calls)} {WS}'


def _json_list(tools: list[Tool], many: bool, opener: str, extra: str = "") -> str:
    call = alternatives([g.call_object(t, extra=extra) for t in tools])
    rest = g.more(f'"," {WS} {call}', many)
    return f'{lit(opener)} {WS} "[" {WS} {call} {rest} {WS} "]" {WS}'


def _nemo(tools: list[Tool], many: bool) -> str:
    call_id = f'( "," {WS} "\\"id\\"" {WS} ":" {WS} "\\"" [a-zA-Z0-9]{{9}} "\\"" {WS} )?'
    return _json_list(tools, many, "[TOOL_CALLS]", call_id)


def _firefunction(tools: list[Tool], many: bool) -> str:
    call = alternatives([g.call_object(t) for t in tools])
    rest = g.more(f'"," {WS} {call}', many)
    return f'"functools[" {WS} {call} {rest} {WS} "]" {WS}'


def _granite3(tools: list[Tool], many: bool) -> str:
    return _json_list(tools, many, "<|tool_call|>")


def _r7b(tools: list[Tool], many: bool) -> str:
    calls = alternatives(
        [
            f'"{{" {WS} "\\"tool_call_id\\"" {WS} ":" {WS} "\\"" [0-9]{{1,4}} "\\"" {WS} "," {WS} '
            f'"\\"tool_name\\"" {WS} ":" {WS} {json_lit(t.name)} {WS} "," {WS} '
            f'"\\"parameters\\"" {WS} ":" {WS} {t.args} {WS} "}}"'
            for t in tools
        ]
    )
    rest = g.more(f'"," {WS} {calls}', many)
    listed = f'"[" {WS} {calls} {rest} {WS} "]"'
    return f'"<|START_ACTION|>" {WS} {listed} {WS} "<|END_ACTION|>"'


def _mistral(tools: list[Tool], many: bool) -> str:
    call_id = '( "[CALL_ID]" [a-zA-Z0-9]{9} )?'
    calls = alternatives([f'{lit(t.name)} {call_id} "[ARGS]" {t.args}' for t in tools])
    return f'( "[TOOL_CALLS]" {calls} ){"+" if many else ""} {WS}'


def _section(
    tools: list[Tool], many: bool, begin: str, end: str, call: Callable[[Tool], str]
) -> str:
    calls = alternatives([call(t) for t in tools])
    return f"{lit(begin)} {WS} {calls} {g.more(calls, many)} {WS} {lit(end)} {WS}"


def _deepseek_v31(tools: list[Tool], many: bool) -> str:
    def call(t: Tool) -> str:
        return f"{lit(s.DS_CALL)} {lit(t.name)} {lit(s.DS_SEP)} {t.args} {lit(s.DS_END)}"

    return _section(tools, many, s.DS_CALLS, s.DS_CALLS_END, call)


def _deepseek_r1(tools: list[Tool], many: bool) -> str:
    def call(t: Tool) -> str:
        return (
            f"{lit(s.DS_CALL + 'function' + s.DS_SEP + t.name)} {lit(NL + '```json' + NL)}"
            f' {t.args} {WS} "```" {lit(s.DS_END)}'
        )

    return _section(tools, many, s.DS_CALLS, s.DS_CALLS_END, call)


def _kimi(tools: list[Tool], many: bool) -> str:
    def call(t: Tool) -> str:
        return (
            f'{lit(s.KIMI_CALL + "functions." + t.name)} ":" [0-9]{{1,3}} '
            f"{lit(s.KIMI_ARGS)} {t.args} {lit(s.KIMI_END)}"
        )

    return _section(tools, many, s.KIMI_CALLS, s.KIMI_CALLS_END, call)


def _functionary_v31(tools: list[Tool], many: bool) -> str:
    calls = alternatives(
        [f'{lit("<function=" + t.name + ">")} {t.args} "</function>"' for t in tools]
    )
    return g.repeated(calls, many)


def _functionary_v32(tools: list[Tool], many: bool) -> str:
    calls = alternatives([f"{lit(t.name + NL)} {t.args}" for t in tools])
    rest = g.more(f'">>>" {calls}', many, sep="")
    return f'">>>"? {calls} {rest} {WS}'


def _names_at_line_start(names: list[str]) -> tuple[str, ...]:
    alt = "|".join(re.escape(n) for n in names)
    return (rf"^((?:{alt})\n)", rf"(>>>(?:{alt})\n)")


def _harmony(tools: list[Tool], many: bool) -> str:  # one call a message
    tail = '( " <|constrain|>json" | " json" | "<|constrain|>json" )?'
    a = alternatives([f'{lit(t.name)} {tail} "<|message|>" {t.args}' for t in tools])
    b = alternatives(
        [f'{lit(t.name)} "<|channel|>commentary" {tail} "<|message|>" {t.args}' for t in tools]
    )
    return f'( "<|channel|>commentary to=functions." {a} | " to=functions." {b} ) {WS}'


def _xml_value(p: g.Param) -> str:
    return g.XML_TEXT if p.text else p.rule


def _qwen3_coder(tools: list[Tool], many: bool) -> str:
    def param(p: g.Param) -> str:
        head, tail = lit(f"<parameter={p.key}>{NL}"), lit(f"{NL}</parameter>{NL}")
        return f"{head} {_xml_value(p)} {tail}"

    calls = alternatives([f"{lit(t.name + '>' + NL)} {g.xml_params(t, param)}" for t in tools])
    call = f'( "<tool_call>" {WS} )? "<function=" {calls} {WS} "</function>" {WS} "</tool_call>"'
    return g.repeated(call, many) + "\n" + g.xml_text_rule("p").rstrip()


def _glm(tools: list[Tool], many: bool) -> str:
    def param(p: g.Param) -> str:
        return (
            f'{lit("<arg_key>" + p.key + "</arg_key>")} {WS} "<arg_value>" {_xml_value(p)} '
            f'"</arg_value>" {WS}'
        )

    calls = alternatives([f"{lit(t.name)} {WS} {g.xml_params(t, param)}" for t in tools])
    call = g.repeated(f'"<tool_call>" {calls} "</tool_call>"', many)
    return call + "\n" + g.xml_text_rule("a").rstrip()


def _granite_text(name: str, arguments: str) -> str:
    try:
        args = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        args = arguments
    return "<|tool_call|>" + json.dumps([{"name": name, "arguments": args}], ensure_ascii=False)


def _deepseek_prompt(example: str) -> Callable[[list[dict[str, Any]]], str]:
    """DeepSeek's tool prompt (from its model cards): its templates render no tools."""

    def prompt(tools: list[dict[str, Any]]) -> str:
        described = "".join(
            f"\n### {f.get('name')}\nDescription: {f.get('description', '')}\n\n"
            f"Parameters: {json.dumps(f.get('parameters') or {}, ensure_ascii=False)}\n"
            for f in (t.get("function", t) for t in tools)
        )
        return (
            f"## Tools\n\nYou have access to the following tools:\n{described}\n"
            "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
            f"{example}\n\nWhere:\n- `tool_call_name` must be an exact match to one of the "
            "available tools\n- `tool_call_arguments` must be valid JSON that strictly follows "
            "the tool's Parameters Schema\n- For multiple tool calls, chain them directly "
            "without separators or spaces"
        )

    return prompt


_V31_EXAMPLE = (
    f"{s.DS_CALLS}{s.DS_CALL}tool_call_name{s.DS_SEP}tool_call_arguments{s.DS_END}"
    f"{{{{additional_tool_calls}}}}{s.DS_CALLS_END}"
)
_R1_EXAMPLE = (
    f"{s.DS_CALLS}{s.DS_CALL}function{s.DS_SEP}tool_call_name\n```json\ntool_call_arguments\n"
    f"```{s.DS_END}{{{{additional_tool_calls}}}}{s.DS_CALLS_END}"
)


# ---- the table ------------------------------------------------------------------------------

HERMES = ToolFormat(
    "hermes",
    "Hermes 2 Pro / 3, Qwen2.5, Qwen3, QwQ, Granite 4: <tool_call>{JSON}</tool_call>",
    ("<tool_call>",),
    s.hermes,
    _hermes,
    _words("<tool_call>"),
)

FORMATS: tuple[ToolFormat, ...] = (
    ToolFormat(
        "harmony",
        "GPT-OSS harmony channels (commentary to=functions.NAME)",
        ("<|channel|>",),
        s.harmony,
        _harmony,
        _words("<|channel|>commentary to=functions.", " to=functions."),
        own_reasoning=True,
    ),
    ToolFormat(
        "functionary_v32",
        "Functionary v3.2 (>>>NAME)",
        (">>>all",),
        s.functionary_v32,
        _functionary_v32,
        _names_at_line_start,
        arguments="string",
    ),
    ToolFormat(
        "kimi_k2",
        "Kimi K2 (<|tool_calls_section_begin|>)",
        ("<|tool_calls_section_begin|>",),
        s.kimi_k2,
        _kimi,
        _words(s.KIMI_CALLS),
    ),
    ToolFormat(
        "command_r7b",
        "Command R7B (<|START_ACTION|>)",
        ("<|START_ACTION|>", "<|START_THINKING|>"),
        s.command_r7b,
        _r7b,
        _words("<|START_ACTION|>"),
        own_reasoning=True,
    ),
    ToolFormat(
        "deepseek_r1",
        "DeepSeek R1 (<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME)",
        (s.DS_CALLS, "```json"),
        s.deepseek_r1,
        _deepseek_r1,
        _words(s.DS_CALLS),
        tools_prompt=_deepseek_prompt(_R1_EXAMPLE),
    ),
    ToolFormat(
        "deepseek_v31",
        "DeepSeek V3.1 (<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>)",
        (s.DS_CALLS,),
        s.deepseek_v31,
        _deepseek_v31,
        _words(s.DS_CALLS),
        tools_prompt=_deepseek_prompt(_V31_EXAMPLE),
    ),
    ToolFormat(
        "mistral",
        "Mistral Small 3.2, Magistral, Devstral ([TOOL_CALLS]NAME[ARGS])",
        ("[TOOL_CALLS]", "[ARGS]"),
        s.mistral,
        _mistral,
        _words("[TOOL_CALLS]"),
        ids="alnum9",
    ),
    ToolFormat(
        "mistral_nemo",
        "Mistral Nemo and older ([TOOL_CALLS][JSON])",
        ("[TOOL_CALLS]",),
        s.mistral_nemo,
        _nemo,
        _words("[TOOL_CALLS]"),
        ids="alnum9",
    ),
    ToolFormat(
        "qwen3_coder",
        "Qwen3-Coder, Qwen3.5, Nemotron 3 (<function=NAME><parameter=P>)",
        ("<tool_call>", "<function=", "<parameter="),
        s.qwen3_coder,
        _qwen3_coder,
        _words("<tool_call>", "<function="),
        params=True,
    ),
    ToolFormat(
        "glm",
        "GLM-4.5 / 4.6 (<tool_call>NAME<arg_key>)",
        ("<tool_call>", "<arg_key>"),
        s.glm,
        _glm,
        _words("<tool_call>"),
        params=True,
    ),
    ToolFormat(
        "functionary_v31",
        "Functionary v3.1 (<function=NAME>{JSON}</function>)",
        ("<function=", "<|start_header_id|>"),
        s.functionary_v31,
        _functionary_v31,
        _words("<function="),
    ),
    ToolFormat(
        "firefunction",
        "FireFunction v2 (functools[JSON])",
        (" functools[",),
        s.firefunction,
        _firefunction,
        _words("functools["),
    ),
    ToolFormat(
        "granite3",
        "Granite 3.x (<|tool_call|>[JSON])",
        ("<|tool_call|>",),
        s.granite3,
        _granite3,
        _words("<|tool_call|>"),
        call_text=_granite_text,
    ),
    HERMES,
    ToolFormat(
        "llama3",
        "Llama 3.1 / 3.2 / 3.3 (JSON, <|python_tag|>)",
        ("<|start_header_id|>", "ipython"),
        s.llama3,
        _llama3,
        lambda _n: (r"<\|python_tag\|>", r'^\s*(\{[ \t\r\n]{0,16}"(?:type|name)")'),
    ),
)

# Templates that render tools in no known way, and models without a template (the tool
# prompt asks for <tool_call>): the common shapes are read, the Hermes one is constrained.
GENERIC = ToolFormat(
    "generic",
    "other templates: <tool_call>, [TOOL_CALLS], <|python_tag|> or bare JSON",
    (),
    s.generic,
    _hermes,
    _words("<tool_call>"),
)

BY_NAME = {f.name: f for f in (*FORMATS, GENERIC)}


def detect(template_source: str | None) -> ToolFormat:
    """The tool-call format of the model whose chat template is ``template_source``."""
    source = template_source or ""
    return next((f for f in FORMATS if f.detects(source)), GENERIC)
