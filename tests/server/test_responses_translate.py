"""From Responses items to the chat body (app/server/responses/translate.py): every item type,
how assistant items join into one message, the options' chat names, and the rule
previous_response_id depends on: stored items render as the same items resent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from app.server.errors import APIError
from app.server.responses.schemas import Item, ResponsesRequest
from app.server.responses.translate import chat_body, chat_messages, check_request

ITEMS = TypeAdapter(list[Item])


def messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return chat_messages(ITEMS.validate_python(items))


def test_every_item_type() -> None:
    out = messages(
        [
            {"role": "developer", "content": "Be kind."},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Look: "},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,AA",
                        "detail": "low",
                    },
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "hm"}],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me check."}],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "one"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "two"}],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "No."}],
            },
        ]
    )
    assert out == [
        {"role": "developer", "content": "Be kind."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look: "},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,AA", "detail": "low"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "assistant", "content": "No."},
    ]


def test_text_after_calls_starts_a_new_assistant_message() -> None:
    out = messages(
        [
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "message", "role": "assistant", "content": "Done."},
        ]
    )
    assert [m.get("tool_calls") is not None for m in out] == [True, False]
    assert out[0]["content"] is None and out[1]["content"] == "Done."


def test_a_string_and_its_parts_render_alike() -> None:
    """The store keeps a message's text as a part; resent as a string it is the same prompt."""
    as_string = messages(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    )
    as_parts = messages(
        [
            {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Yo", "annotations": []}],
            },
        ]
    )
    assert as_string == as_parts


def test_options_become_the_chat_bodys() -> None:
    body = ResponsesRequest.model_validate(
        {
            "model": "m",
            "input": "Hi",
            "instructions": "Short answers.",
            "max_output_tokens": 7,
            "temperature": 0.5,
            "top_p": 0.9,
            "parallel_tool_calls": False,
            "reasoning": {"effort": "high"},
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": "x",
                    "schema": {"type": "object"},
                    "strict": True,
                }
            },
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "f"},
        }
    )
    chat = chat_body(body, [], body.items())
    assert chat.messages[0].role == "system" and chat.messages[0].content == "Short answers."
    assert chat.messages[1].role == "user" and chat.messages[1].text() == "Hi"
    assert chat.max_completion_tokens == 7 and chat.temperature == 0.5 and chat.top_p == 0.9
    assert chat.parallel_tool_calls is False and chat.reasoning_effort == "high"
    assert chat.response_format is not None
    assert json.loads(chat.response_format.model_dump_json(by_alias=True))["json_schema"][
        "schema"
    ] == {"type": "object"}
    assert chat.tools is not None and chat.tools[0].function.name == "f"
    assert chat.tool_choice is not None and not isinstance(chat.tool_choice, str)
    assert chat.tool_choice.function.name == "f"


def test_history_comes_before_the_input_and_instructions_first() -> None:
    history = ITEMS.validate_python(
        [{"role": "user", "content": "A"}, {"role": "assistant", "content": "B"}]
    )
    body = ResponsesRequest.model_validate({"input": "C", "instructions": "I"})
    chat = chat_body(body, history, body.items())
    assert [(m.role, m.text()) for m in chat.messages] == [
        ("system", "I"),
        ("user", "A"),
        ("assistant", "B"),
        ("user", "C"),
    ]


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"model": "lab::m"}, "model"),
        ({"background": True}, "background"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"include": ["message.output_text.logprobs"]}, "top_logprobs"),
    ],
)
def test_refused_before_anything_is_looked_up(fields: dict[str, Any], param: str) -> None:
    body = ResponsesRequest.model_validate({"input": "Hi", **fields})
    with pytest.raises(APIError) as e:
        check_request(body)
    assert e.value.status == 400 and e.value.param == param


def test_codexs_include_is_accepted() -> None:
    check_request(
        ResponsesRequest.model_validate({"input": "Hi", "include": ["reasoning.encrypted_content"]})
    )


def test_an_image_by_file_id_is_a_400() -> None:
    with pytest.raises(APIError) as e:
        messages([{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}])
    assert e.value.code == "invalid_image" and "Files API" in e.value.message
