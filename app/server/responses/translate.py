"""From a Responses body (and the stored conversation before it) to the chat body every
generating route takes (:class:`app.server.schemas.ChatCompletionRequest`).

The conversation is a list of items, the earlier responses' input and output items followed by
this request's input: :func:`chat_messages` renders a stored conversation exactly as it renders
the same items resent by a client, so ``previous_response_id`` gives the prompt a client would
get by resending everything (and the prefix cache finds it). ``instructions`` go first as the
system message; as with OpenAI, an earlier response's instructions are not carried over.
Consecutive assistant items (text, calls) become one assistant message; reasoning items are not
rendered, as chat completions' ``reasoning_content`` is not.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from app.engine.provider_ids import is_remote_id
from app.server import schemas as chat
from app.server.errors import APIError, from_validation_errors
from app.server.responses.schemas import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    Item,
    MessageItem,
    OutputText,
    Part,
    ReasoningItem,
    Refusal,
    ResponsesRequest,
    TextFormatJsonObject,
    TextFormatJsonSchema,
)


def check_request(body: ResponsesRequest) -> None:
    """What this server refuses before anything is looked up."""
    if body.model and is_remote_id(body.model):
        raise APIError(
            400,
            f"The model `{body.model}` is on a remote provider, and /v1/responses is answered by "
            "the models on this computer (its responses are stored here). Use "
            "/v1/chat/completions with that model, which Ember forwards to the provider, or a "
            "local model here.",
            param="model",
            code="model_not_supported",
        )
    if body.top_logprobs or any("logprobs" in i for i in body.include or ()):
        raise APIError(400, "logprobs are not supported by this server.", param="top_logprobs")
    for name, unsupported in (
        ("background", body.background),
        ("conversation", body.conversation),
        ("prompt", body.prompt),
    ):
        if unsupported:
            raise APIError(
                400,
                f"'{name}' is not supported by this server: send the input (and "
                "previous_response_id to continue) in the request itself.",
                param=name,
                code="unsupported_parameter",
            )


def chat_body(
    body: ResponsesRequest, history: list[Item], items: list[Item]
) -> chat.ChatCompletionRequest:
    """The chat body for ``body``: ``history`` (the stored conversation) then ``items``."""
    messages = chat_messages([*history, *items])
    if body.instructions:
        messages.insert(0, {"role": "system", "content": body.instructions})
    fields: dict[str, Any] = {
        "model": body.model,
        "ttl": body.ttl,
        "messages": messages,
        "stream": body.stream,
        "max_completion_tokens": body.max_output_tokens,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "seed": body.seed,
        "top_k": body.top_k,
        "min_p": body.min_p,
        "repeat_penalty": body.repeat_penalty,
        "logit_bias": body.logit_bias,
        "parallel_tool_calls": body.parallel_tool_calls,
        "reasoning_effort": body.reasoning.effort if body.reasoning else None,
        "response_format": _response_format(body),
        "prediction": body.prediction.model_dump() if body.prediction else None,
    }
    if body.tools:
        fields["tools"] = [
            {"type": "function", "function": t.model_dump(exclude_none=True, exclude={"type"})}
            for t in body.tools
        ]
    if isinstance(body.tool_choice, str):
        fields["tool_choice"] = body.tool_choice
    elif body.tool_choice is not None:
        fields["tool_choice"] = {"type": "function", "function": {"name": body.tool_choice.name}}
    try:
        return chat.ChatCompletionRequest.model_validate(
            {k: v for k, v in fields.items() if v is not None}
        )
    except ValidationError as e:
        error = from_validation_errors(e.errors(include_url=False))
        error.message = error.message.replace("'messages", "'input")
        raise as_responses_error(error) from None


# the chat body's parameters, as a Responses client named them
_PARAMS = {
    "messages": "input",
    "response_format": "text.format",
    "max_completion_tokens": "max_output_tokens",
    "reasoning_effort": "reasoning.effort",
}


def as_responses_error(error: APIError) -> APIError:
    """``error`` (of the chat path) naming the Responses parameter; a message's index is not
    an item's (instructions and the stored conversation come first), so only ``input``."""
    for chat_param, param in _PARAMS.items():
        if error.param and error.param.startswith(chat_param):
            error.param = param
    return error


def _response_format(body: ResponsesRequest) -> dict[str, Any] | None:
    fmt = body.text.format if body.text else None
    if isinstance(fmt, TextFormatJsonObject):
        return {"type": "json_object"}
    if isinstance(fmt, TextFormatJsonSchema):
        spec = {"name": fmt.name, "schema": fmt.schema_, "strict": fmt.strict}
        return {"type": "json_schema", "json_schema": spec}
    return None


def chat_messages(items: list[Item]) -> list[dict[str, Any]]:
    """Chat messages for a conversation's items, in order (see the module's docstring)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, ReasoningItem):
            continue
        if isinstance(item, MessageItem) and item.role == "assistant":
            turn = _assistant_turn(out, for_text=True)
            turn["content"] = (turn["content"] or "") + _text(item.content)
        elif isinstance(item, MessageItem):
            out.append({"role": item.role, "content": _content(item.content)})
        elif isinstance(item, FunctionCallItem):
            turn = _assistant_turn(out, for_text=False)
            call = {"name": item.name, "arguments": item.arguments}
            turn.setdefault("tool_calls", []).append(
                {"id": item.call_id, "type": "function", "function": call}
            )
        elif isinstance(item, FunctionCallOutputItem):
            content = item.output if isinstance(item.output, str) else _content(item.output)
            out.append({"role": "tool", "tool_call_id": item.call_id, "content": content})
    return out


def _assistant_turn(out: list[dict[str, Any]], *, for_text: bool) -> dict[str, Any]:
    """The assistant message the next assistant item joins: the last message if it is the
    assistant's (text after its calls starts a new one), else a new one."""
    last = out[-1] if out else None
    if last is not None and last["role"] == "assistant" and not (for_text and "tool_calls" in last):
        return last
    turn: dict[str, Any] = {"role": "assistant", "content": None}
    out.append(turn)
    return turn


def _text(content: str | list[Part]) -> str:
    if isinstance(content, str):
        return content
    return "".join(_part_text(p) for p in content if not isinstance(p, InputImage))


def _part_text(part: Part) -> str:
    if isinstance(part, InputText | OutputText):
        return part.text
    if isinstance(part, Refusal):
        return part.refusal
    return ""


def _content(content: str | list[Part]) -> str | list[dict[str, Any]]:
    """A message's content: its text when it has no image, else chat content parts."""
    if isinstance(content, str):
        return content
    if not any(isinstance(p, InputImage) for p in content):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for p in content:
        if isinstance(p, InputImage):
            parts.append(_image_part(p))
        elif text := _part_text(p):
            parts.append({"type": "text", "text": text})
    return parts


def _image_part(part: InputImage) -> dict[str, Any]:
    if not part.image_url:
        raise APIError(
            400,
            "An input_image needs 'image_url' (a data URL, or an http(s) URL if the server "
            "allows them); this server has no Files API for 'file_id'.",
            param="input",
            code="invalid_image",
        )
    image: dict[str, Any] = {"url": part.image_url}
    if part.detail and part.detail != "original":
        image["detail"] = part.detail
    return {"type": "image_url", "image_url": image}
