"""From an Anthropic Messages body to the one chat body the engine path takes
(:class:`app.server.schemas.ChatCompletionRequest`), so Anthropic's requests are checked,
bounded and planned by the same code as everyone else's (app/server/answering.py).

- ``system`` (a string or text blocks) becomes a system message;
- a user message's ``tool_result`` blocks become ``tool`` messages (an ``is_error`` result is
  marked as an error), its text and image blocks one user message (images as data-URL or URL
  ``image_url`` parts);
- an assistant's ``tool_use`` blocks become its ``tool_calls``; earlier thinking is dropped;
- ``tool_choice`` ``auto`` / ``any`` / ``tool`` / ``none`` become ``auto`` / ``required`` /
  a named function / ``none``; ``thinking`` becomes ``thinking_budget_tokens`` and a
  ``reasoning_effort`` (``disabled``: ``none``; ``adaptive``: the model's default);
  ``output_config`` its ``effort`` and ``format`` (a JSON schema the answer follows).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from app.server import schemas as openai
from app.server.anthropic import schemas
from app.server.errors import APIError, from_validation_errors

ERROR_PREFIX = "Error: "  # how an is_error tool result reads to the model


def chat_body(
    body: schemas.CountTokensRequest, model: str, *, stream: bool = False
) -> openai.ChatCompletionRequest:
    """The chat body of an Anthropic body (``model``: the name after aliases)."""
    messages: list[dict[str, Any]] = []
    system = _system_text(body.system)
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.messages:
        messages += _messages(message)
    data: dict[str, Any] = {"model": model, "messages": messages, "stream": stream}
    data["ttl"] = body.ttl
    if body.tools:
        data["tools"] = [_tool(t) for t in body.tools]
    if body.tool_choice is not None:
        data.update(_tool_choice(body.tool_choice))
    if isinstance(body.thinking, schemas.ThinkingEnabled):
        data["thinking_budget_tokens"] = body.thinking.budget_tokens
        data["reasoning_effort"] = effort(body.thinking.budget_tokens)
    elif isinstance(body.thinking, schemas.ThinkingDisabled):
        data["reasoning_effort"] = "none"
    data.update(_output_config(body.output_config))
    if isinstance(body, schemas.MessagesRequest):
        data.update(_sampling(body))
    try:
        return openai.ChatCompletionRequest.model_validate(data)
    except ValidationError as e:
        raise from_validation_errors(e.errors(include_url=False)) from None


def effort(budget_tokens: int) -> str:
    """The reasoning effort a thinking budget amounts to (for templates that take an effort,
    not a budget): Anthropic's minimum (1,024) is low, its usual 10-16k medium."""
    if budget_tokens <= 4096:
        return "low"
    return "medium" if budget_tokens <= 16384 else "high"


def _output_config(config: schemas.OutputConfig | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if config is None:
        return out
    if config.effort is not None:  # the engine's efforts end at "high"
        out["reasoning_effort"] = "high" if config.effort in ("xhigh", "max") else config.effort
    if config.format is not None:
        spec = {"name": "response", "schema": config.format.schema_}
        out["response_format"] = {"type": "json_schema", "json_schema": spec}
    return out


def _system_text(system: str | list[schemas.TextBlock] | None) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    return "\n\n".join(block.text for block in system if block.text)


def _sampling(body: schemas.MessagesRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"max_tokens": body.max_tokens}
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(body, name)
        if value is not None:
            out[name] = value
    if body.stop_sequences:
        out["stop"] = body.stop_sequences
    if body.metadata is not None and body.metadata.user_id:
        out["user"] = body.metadata.user_id
    return out


def _tool(tool: schemas.Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _tool_choice(choice: schemas.AutoChoice | schemas.AnyChoice | Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(choice, schemas.AutoChoice):
        out["tool_choice"] = "auto"
    elif isinstance(choice, schemas.AnyChoice):
        out["tool_choice"] = "required"
    elif isinstance(choice, schemas.ToolChoiceByName):
        out["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
    else:
        out["tool_choice"] = "none"
    if getattr(choice, "disable_parallel_tool_use", None):
        out["parallel_tool_calls"] = False
    return out


# ---- messages -------------------------------------------------------------------------------


def _messages(message: schemas.Message) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"role": message.role, "content": message.content}]
    if message.role == "assistant":
        return [_assistant(message.content)]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, schemas.ToolResultBlock):
            out.append(_tool_result(block))
        elif isinstance(block, schemas.TextBlock | schemas.ImageBlock):
            parts.append(_part(block))
        elif isinstance(block, schemas.ToolUseBlock):
            raise APIError(
                400,
                "A 'tool_use' block belongs in an 'assistant' message: move it there (and "
                "answer it with a 'tool_result' block in the next 'user' message).",
                param="messages",
            )
    if parts or not out:
        out.append({"role": "user", "content": _content(parts)})
    return out


def _assistant(blocks: list[Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, schemas.TextBlock | schemas.ImageBlock):
            parts.append(_part(block))
        elif isinstance(block, schemas.ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False)
            function = {"name": block.name, "arguments": arguments}
            calls.append({"id": block.id, "type": "function", "function": function})
        elif isinstance(block, schemas.ToolResultBlock):
            raise APIError(
                400,
                "A 'tool_result' block belongs in a 'user' message (the one after the "
                "assistant's 'tool_use'): move it there.",
                param="messages",
            )
    out: dict[str, Any] = {"role": "assistant", "content": _content(parts)}
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_result(block: schemas.ToolResultBlock) -> dict[str, Any]:
    content = block.content
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else []
    if isinstance(content, list):
        parts = [_part(p) for p in content]
    if block.is_error:
        parts.insert(0, {"type": "text", "text": ERROR_PREFIX})
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": _content(parts)}


def _part(block: schemas.TextBlock | schemas.ImageBlock) -> dict[str, Any]:
    if isinstance(block, schemas.TextBlock):
        return {"type": "text", "text": block.text}
    source = block.source
    if isinstance(source, schemas.Base64Source):
        url = f"data:{source.media_type};base64,{source.data}"
    else:
        url = source.url
    return {"type": "image_url", "image_url": {"url": url}}


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text parts alone as one string (what every template reads); parts when an image is
    among them."""
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts
