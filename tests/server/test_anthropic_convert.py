"""From Anthropic bodies to the one chat body (unit tests of app/server/anthropic/convert.py),
and model aliases (app/server/aliases.py)."""

from __future__ import annotations

from typing import Any

import pytest

from app.server import schemas as openai
from app.server.aliases import AliasError, parse_alias, parse_aliases_text, resolve_alias
from app.server.anthropic import schemas
from app.server.anthropic.convert import chat_body
from app.server.errors import APIError


def convert(**body: Any) -> openai.ChatCompletionRequest:
    data = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}
    return chat_body(schemas.MessagesRequest.model_validate({**data, **body}), "m")


def test_system_blocks_tool_use_and_tool_results_become_chat_messages() -> None:
    body = convert(
        system=[{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"c": "Oslo"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "w", "input": {"c": "Lima"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [{"type": "text", "text": "down"}],
                        "is_error": True,
                    },
                    {"type": "text", "text": "And?"},
                ],
            },
        ],
    )
    roles = [(m.role, m.text()) for m in body.messages]
    assert roles == [
        ("system", "One.\n\nTwo."),
        ("user", "Weather?"),
        ("assistant", "Looking."),  # earlier thinking is not shown again
        ("tool", "Sunny"),
        ("tool", "Error: down"),
        ("user", "And?"),
    ]
    calls = body.messages[2].tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("toolu_1", "w", '{"c": "Oslo"}'),
        ("toolu_2", "w", '{"c": "Lima"}'),
    ]
    assert [m.tool_call_id for m in body.messages[3:5]] == ["toolu_1", "toolu_2"]


TOOLS = [{"name": "w", "input_schema": {"type": "object", "properties": {}}}]


@pytest.mark.parametrize(
    ("choice", "expected", "parallel"),
    [
        ({"type": "auto"}, "auto", None),
        ({"type": "any", "disable_parallel_tool_use": True}, "required", False),
        ({"type": "none"}, "none", None),
    ],
)
def test_tool_choice(choice: Any, expected: str, parallel: bool | None) -> None:
    body = convert(tools=TOOLS, tool_choice=choice)
    assert body.tool_choice == expected and body.parallel_tool_calls is parallel
    assert body.tools and body.tools[0].function.parameters == TOOLS[0]["input_schema"]


def test_a_named_tool_choice_is_a_named_function() -> None:
    body = convert(tools=TOOLS, tool_choice={"type": "tool", "name": "w"})
    assert isinstance(body.tool_choice, openai.NamedToolChoice)
    assert body.tool_choice.function.name == "w"


def test_sampling_thinking_and_output_config() -> None:
    body = convert(
        temperature=0.5,
        top_p=0.9,
        top_k=20,
        stop_sequences=["END"],
        metadata={"user_id": "u"},
        thinking={"type": "enabled", "budget_tokens": 10000},
    )
    assert (body.temperature, body.top_p, body.top_k, body.stop, body.user) == (
        0.5,
        0.9,
        20,
        ["END"],
        "u",
    )
    assert body.max_tokens == 10
    assert body.thinking_budget_tokens == 10000 and body.reasoning_effort == "medium"
    assert convert(thinking={"type": "disabled"}).reasoning_effort == "none"
    adaptive = convert(thinking={"type": "adaptive"})
    assert adaptive.reasoning_effort is None and adaptive.thinking_budget_tokens is None
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    shaped = convert(
        output_config={"effort": "max", "format": {"type": "json_schema", "schema": schema}}
    )
    assert shaped.reasoning_effort == "high"
    assert isinstance(shaped.response_format, openai.JsonSchemaFormat)
    assert shaped.response_format.json_schema.schema_ == schema


def test_images_become_image_url_parts() -> None:
    body = convert(
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
                    },
                    {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                    {"type": "text", "text": "Both?"},
                ],
            }
        ]
    )
    parts = body.messages[0].content
    assert isinstance(parts, list)
    assert [p.image_url.url for p in parts if p.image_url] == [
        "data:image/png;base64,QUJD",
        "https://x.test/a.png",
    ]


def test_blocks_in_the_wrong_role_are_refused() -> None:
    with pytest.raises(APIError, match="belongs in an 'assistant' message"):
        convert(
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "1", "name": "w", "input": {}}],
                }
            ]
        )


def test_aliases() -> None:
    aliases = [("claude-sonnet-4-5", "qwen"), ("claude-*", "small"), ("claude-opus-*", "big")]
    assert resolve_alias("Claude-Sonnet-4-5", aliases) == "qwen"
    assert resolve_alias("claude-opus-4-1", aliases) == "big"  # the longer pattern wins
    assert resolve_alias("claude-haiku-4-5", aliases) == "small"
    assert resolve_alias("gemma", aliases) == "gemma"
    assert parse_alias(" claude-x = hf.co/a/b:Q4_K_M ") == ("claude-x", "hf.co/a/b:Q4_K_M")
    assert parse_aliases_text("a=b\n\n c = d \n") == {"a": "b", "c": "d"}
    for bad in ("nothing", "=model", "name=", "x" * 300 + "=m"):
        with pytest.raises(AliasError):
            parse_alias(bad)
