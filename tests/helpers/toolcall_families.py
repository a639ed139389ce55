"""Every model family's tool-call format: its real chat template's name, the functions and schemas
offered, and how its answers read. Add a family here (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.server.output import ChatOutput, Piece

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


TIME = {"type": "object", "properties": {"tz": {"type": "string"}}}


SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}


FUNCTIONS: list[dict[str, Any]] = [
    {"name": n, "description": n, "parameters": p} for n, p in SCHEMAS.items()
]


TOOLS = [{"type": "function", "function": f} for f in FUNCTIONS]


BOTH = [("get_weather", {"city": "Paris", "days": 2}), ("get_time", {})]


ONE = [("get_weather", {"city": "Paris", "days": 2})]


DS = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"


@dataclass(frozen=True)
class Family:
    templates: tuple[str, ...]
    output: str  # an answer in the family's format (after the generation prompt)
    content: str
    calls: list[tuple[str, dict[str, Any]]]
    rendered: str  # how the earlier call looks in the rendered prompt
    reasoning: str = ""


FAMILIES: dict[str, Family] = {
    "hermes": Family(
        ("Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "Qwen-QwQ-32B", "ibm-granite-granite-4.0",
         "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
         "NousResearch-Hermes-3-Llama-3.1-8B-tool_use"),
        '<think>\nThey want the weather.\n</think>\n\nLet me check.\n<tool_call>\n{"name": '
        '"get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n<tool_call>\n'
        '{"name": "get_time", "arguments": {}}\n</tool_call>',
        "Let me check.\n", BOTH, '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "They want the weather.\n",
    ),
    "qwen3_coder": Family(
        ("Qwen3-Coder", "Qwen3.5-4B", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
        "Let me call it.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        "Let me call it.\n", BOTH, "<function=get_weather>\n<parameter=city>\nParis\n</parameter>",
    ),
    "harmony": Family(
        ("openai-gpt-oss-120b",),
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", '
        '"days": 2}',
        "", ONE, 'to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}',
        "Need the weather.",
    ),
    "llama3": Family(
        ("meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
         "meta-llama-Llama-3.3-70B-Instruct"),
        '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris", "days": 2}}',
        "", ONE, '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    ),
    "mistral_nemo": Family(
        ("mistralai-Mistral-Nemo-Instruct-2407",),
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}, "id": '
        '"a1B2c3D4e"}, {"name": "get_time", "arguments": {}, "id": "f5G6h7J8k"}]',
        "", BOTH, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "',
    ),
    "mistral": Family(
        ("unsloth-mistral-Devstral-Small-2507", "Mistral-Small-3.2-24B-Instruct-2506",
         "mistralai-Ministral-3-14B-Reasoning-2512"),
        'Sure.[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris", "days": 2}'
        "[TOOL_CALLS]get_time[ARGS]{}",
        "Sure.", BOTH, "[TOOL_CALLS]get_weather[",
    ),
    "deepseek_v31": Family(
        ("deepseek-ai-DeepSeek-V3.1",),
        f'Checking.{DS}get_weather<｜tool▁sep｜>{{"city": "Paris", "days": 2}}<｜tool▁call▁end｜>'
        "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "Checking.", BOTH, '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}',
    ),
    "deepseek_r1": Family(
        ("llama-cpp-deepseek-r1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
         "deepseek-ai-DeepSeek-R1-Distill-Llama-8B"),
        f'<think>Need it.</think>\n\n{DS}function<｜tool▁sep｜>get_weather\n```json\n{{"city": '
        '"Paris", "days": 2}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>'
        "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "", BOTH, 'function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}', "Need it.",
    ),
    "glm": Family(
        ("GLM-4.6",),
        "<think>Need it.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>"
        "Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>\n"
        "<tool_call>get_time\n</tool_call>",
        "", BOTH, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>",
        "Need it.",
    ),
    "kimi_k2": Family(
        ("moonshotai-Kimi-K2", "Kimi-K2-Instruct", "Kimi-K2-Thinking"),
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_"
        'argument_begin|>{"city": "Paris", "days": 2}<|tool_call_end|><|tool_call_begin|>'
        "functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_calls_section_end|>",
        "", BOTH, 'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}',
    ),
    "granite3": Family(
        ("ibm-granite-granite-3.3-2B-Instruct",),
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}, '
        '{"name": "get_time", "arguments": {}}]',
        "", BOTH, '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    ),
    "firefunction": Family(
        ("fireworks-ai-llama-3-firefunction-v2",),
        'Checking. functools[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}, '
        '{"name": "get_time", "arguments": {}}]',
        "Checking. ", BOTH, 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    ),
    "functionary_v31": Family(
        ("meetkai-functionary-medium-v3.1",),
        '<function=get_weather>{"city": "Paris", "days": 2}</function>\n'
        "<function=get_time>{}</function>",
        "", BOTH, '<function=get_weather>{"city": "Paris"}</function>',
    ),
    "functionary_v32": Family(
        ("meetkai-functionary-medium-v3.2",),
        'all\nLet me check.>>>get_weather\n{"city": "Paris", "days": 2}>>>get_time\n{}',
        "Let me check.", BOTH, '>>>get_weather\n{"city": "Paris"}',
    ),
    "command_r7b": Family(
        ("CohereForAI-c4ai-command-r7b-12-2024-tool_use",),
        "<|START_THINKING|>Need it.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": "
        '"0", "tool_name": "get_weather", "parameters": {"city": "Paris", "days": 2}},\n    '
        '{"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}\n]<|END_ACTION|>',
        "", BOTH, '"tool_name": "get_weather", "parameters": {"city": "Paris"}', "Need it.",
    ),
}  # fmt: skip


def read(output: ChatOutput, parts: list[str]) -> list[tuple[str, int, str, str | None]]:
    """The pieces, runs of one kind (and call) joined, ids left out."""
    pieces: list[Piece] = []
    for part in parts:
        pieces += output.feed(part)
    pieces += output.finish()
    out: list[tuple[str, int, str, str | None]] = []
    for p in pieces:
        if p.kind == "tool" and p.name is not None:
            assert p.id, "the first piece of a call has its id"
            out.append(("tool", p.index, "", p.name))
        elif out and out[-1][0] == p.kind and (p.kind != "tool" or out[-1][1] == p.index):
            kind, index, text, name = out[-1]
            out[-1] = (kind, index, text + p.text, name)
        else:
            out.append((p.kind, p.index, p.text, None))
    return out
