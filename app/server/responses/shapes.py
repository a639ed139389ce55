"""The Responses API's objects as plain dicts: the response, its output items, usage, and the
SSE frame of a stream event (``event: TYPE`` then ``data: {...}``, as OpenAI sends them)."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from app.engine.types import Usage
from app.server.responses.schemas import ResponsesRequest


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(24)


def event_frame(data: dict[str, Any]) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return b"event: " + data["type"].encode() + b"\ndata: " + text.encode() + b"\n\n"


def usage_body(usage: Usage, reasoning_tokens: int) -> dict[str, Any]:
    """Responses' usage; with a ``prediction`` (an extension: chat completions' field), its
    ``output_tokens_details`` also say how many predicted tokens were accepted and rejected."""
    details: dict[str, Any] = {"reasoning_tokens": min(reasoning_tokens, usage.completion_tokens)}
    if usage.predicted:
        details["accepted_prediction_tokens"] = usage.accepted_tokens
        details["rejected_prediction_tokens"] = usage.drafted_tokens - usage.accepted_tokens
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": details,
        "total_tokens": usage.total_tokens,
    }


@dataclass(slots=True)
class ResponseMeta:
    """What a response echoes of its request, and its id."""

    model: str
    body: ResponsesRequest
    id: str = field(default_factory=lambda: new_id("resp_"))
    created_at: int = field(default_factory=lambda: int(time.time()))

    def response(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        *,
        error: dict[str, Any] | None = None,
        incomplete: str | None = None,
    ) -> dict[str, Any]:
        body = self.body
        fmt = body.text.format if body.text and body.text.format else None
        text: dict[str, Any] = {
            "format": fmt.model_dump(by_alias=True, exclude_none=True) if fmt else {"type": "text"}
        }
        tool_choice: Any = body.tool_choice or "auto"
        if not isinstance(tool_choice, str):
            tool_choice = tool_choice.model_dump()
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "max_tool_calls": body.max_tool_calls,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "previous_response_id": body.previous_response_id,
            "reasoning": {
                "effort": body.reasoning.effort if body.reasoning else None,
                "summary": None,
            },
            "store": body.storing,
            "temperature": body.temperature if body.temperature is not None else 1.0,
            "text": text,
            "tool_choice": tool_choice,
            "tools": [t.model_dump(exclude_none=True) for t in body.tools or []],
            "top_p": body.top_p if body.top_p is not None else 1.0,
            "truncation": body.truncation or "disabled",
            "usage": usage,
            "user": body.user,
            "metadata": body.metadata or {},
        }


# ---- output items ---------------------------------------------------------------------------


def message_item(item_id: str, status: str, text: str | None) -> dict[str, Any]:
    content = [] if text is None else [output_text(text)]
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def reasoning_item(item_id: str, status: str, text: str | None) -> dict[str, Any]:
    content = [] if text is None else [reasoning_text(text)]
    return {"id": item_id, "type": "reasoning", "status": status, "summary": [], "content": content}


def reasoning_text(text: str) -> dict[str, Any]:
    return {"type": "reasoning_text", "text": text}


def call_item(item_id: str, status: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def failure(code: str | None, message: str) -> dict[str, Any]:
    return {"code": code or "server_error", "message": message}
