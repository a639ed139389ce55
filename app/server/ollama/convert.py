"""From Ollama request bodies to the OpenAI routes' request bodies, so both APIs share one
conversion to engine requests (app/server/convert.py) and one set of bounds before llama.cpp.

A value the OpenAI schema refuses is answered with the Ollama name of the field
(``options.temperature``), not the OpenAI one.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from app.engine import durations
from app.server import schemas as openai
from app.server.errors import APIError, from_validation_errors
from app.server.ollama.images import image_parts, keep_decoded
from app.server.ollama.schemas import ChatBody, Format, GenerateBody, KeepAlive, Options

# OpenAI field -> where the Ollama body has it
_OPTION_FIELDS = {
    "max_tokens": "options.num_predict",
    "stop": "options.stop",
    "response_format": "format",
    **{
        name: f"options.{name}"
        for name in (
            "temperature",
            "top_k",
            "top_p",
            "min_p",
            "typical_p",
            "repeat_penalty",
            "repeat_last_n",
            "presence_penalty",
            "frequency_penalty",
            "seed",
            "mirostat",
            "mirostat_tau",
            "mirostat_eta",
        )
    },
}
Body = TypeVar("Body", bound=BaseModel)


def keep_alive_seconds(value: KeepAlive) -> float | None:
    """Ollama's ``keep_alive``: seconds (a number, or a Go duration such as "5m" or "1h30m");
    0 unloads after the request, negative keeps the model loaded; None when not given. A 400
    for anything else (app/engine/durations.py's one parser)."""
    try:
        return durations.seconds_of(value)
    except durations.DurationError as e:
        raise APIError(
            400,
            f"Invalid 'keep_alive': {e} 0 unloads the model after the request, -1 keeps it loaded.",
            param="keep_alive",
        ) from None


def unloads(value: KeepAlive) -> bool:
    return keep_alive_seconds(value) == 0


def _sampling(options: Options | None) -> dict[str, Any]:
    """The OpenAI body's sampling fields for Ollama's ``options``."""
    if options is None:
        return {}
    out: dict[str, Any] = {
        k: v
        for k, v in options.model_dump(exclude_none=True).items()
        if k not in ("num_ctx", "num_predict", "seed")
    }
    if options.num_predict is not None and options.num_predict > 0:
        out["max_tokens"] = options.num_predict  # -1, -2 (and 0): until the context is full
    if options.seed is not None and options.seed >= 0:  # -1: a random seed
        out["seed"] = options.seed
    if options.stop is not None:
        out["stop"] = options.stop or None
    return out


def _format(fmt: Format) -> dict[str, Any] | None:
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        if not fmt:
            raise APIError(400, "Invalid 'format': the JSON schema is empty.", param="format")
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    return None


THINK_LEVELS = ("low", "medium", "high")


def reasoning_effort(think: bool | str | None) -> str | None:
    """Ollama's ``think`` as a reasoning effort: true thinks (at the medium effort, which
    turns thinking on where a template has it off by default), false does not ("none"), and
    "low" / "medium" / "high" are the effort; left out, the model's default."""
    if think is None:
        return None
    if isinstance(think, bool):
        return "medium" if think else "none"
    if think in THINK_LEVELS:
        return think
    raise APIError(
        400,
        f"Invalid 'think': {str(think)[:40]!r}. Use true, false, or one of "
        f"{', '.join(THINK_LEVELS)}.",
        param="think",
    )


def _validate(cls: type[Body], data: dict[str, Any]) -> Body:
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        error = from_validation_errors(e.errors(include_url=False))
    param = error.param or ""
    head = param.split(".", 1)[0].split("[", 1)[0]
    ollama = _OPTION_FIELDS.get(head)
    if ollama is not None:
        renamed = ollama + param[len(head) :]
        error = APIError(400, error.message.replace(f"'{param}'", f"'{renamed}'"), param=renamed)
    raise error


# ---- chat -----------------------------------------------------------------------------------


def chat_body(body: ChatBody) -> openai.ChatCompletionRequest:
    """The OpenAI body for /api/chat; each message's ``images`` become its image parts (each
    checked here: a 400 naming ``messages[i].images[j]``)."""
    messages: list[dict[str, Any]] = []
    decoded: list[bytes] = []
    for i, m in enumerate(body.messages or []):
        content: str | list[dict[str, Any]] = m.content or ""
        if m.images:
            content = image_parts(m.images, m.content or "", f"messages[{i}].images", decoded)
        msg: dict[str, Any] = {"role": m.role, "content": content}
        if m.role == "tool" and m.tool_name:
            msg["name"] = m.tool_name
        if m.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": f"call_{i}_{j}",
                    "type": "function",
                    "function": {
                        "name": c.function.name,
                        "arguments": json.dumps(c.function.arguments, ensure_ascii=False),
                    },
                }
                for j, c in enumerate(m.tool_calls)
            ]
        messages.append(msg)
    data: dict[str, Any] = {
        "model": body.model,
        "messages": messages,
        "stream": bool(body.stream is not False),
        **_sampling(body.options),
    }
    if body.tools:
        data["tools"] = body.tools
    if (effort := reasoning_effort(body.think)) is not None:
        data["reasoning_effort"] = effort
    if (fmt := _format(body.format)) is not None:
        data["response_format"] = fmt
    converted = _validate(openai.ChatCompletionRequest, data)
    keep_decoded(converted, decoded)
    return converted


# ---- generate -------------------------------------------------------------------------------


def check_generate(body: GenerateBody) -> None:
    """What /api/generate refuses before a model is resolved."""
    if body.images and (body.raw or body.suffix is not None):
        raise APIError(
            400,
            "'images' go with a templated prompt: leave out 'raw' and 'suffix' (the model's "
            "chat template places the images), or send the request without 'images'.",
            param="images",
        )
    if body.template:
        raise APIError(
            400,
            "Ember does not run Ollama's Go templates: leave 'template' out (the model's own "
            "chat template is used), or send raw: true with the prompt already formatted.",
            param="template",
        )
    if body.context:
        raise APIError(
            400,
            "'context' (token ids of an earlier answer) is not supported: send the "
            "conversation as messages to /api/chat instead.",
            param="context",
        )


def generate_chat_body(body: GenerateBody) -> openai.ChatCompletionRequest:
    """A templated /api/generate: the system prompt and the prompt as a chat."""
    messages: list[dict[str, Any]] = []
    if body.system:
        messages.append({"role": "system", "content": body.system})
    decoded: list[bytes] = []
    content: str | list[dict[str, Any]] = body.prompt or ""
    if body.images:
        content = image_parts(body.images, body.prompt or "", "images", decoded)
    messages.append({"role": "user", "content": content})
    data: dict[str, Any] = {
        "model": body.model,
        "messages": messages,
        "stream": bool(body.stream is not False),
        **_sampling(body.options),
    }
    if (effort := reasoning_effort(body.think)) is not None:
        data["reasoning_effort"] = effort
    if (fmt := _format(body.format)) is not None:
        data["response_format"] = fmt
    converted = _validate(openai.ChatCompletionRequest, data)
    keep_decoded(converted, decoded)
    return converted


def generate_completion_body(body: GenerateBody) -> openai.CompletionRequest:
    """A raw /api/generate, or one with a suffix (fill-in-the-middle): the prompt as it is.
    A JSON ``format`` becomes the body's grammar (a schema is added by the route)."""
    data: dict[str, Any] = {
        "model": body.model,
        "prompt": body.prompt or "",
        "stream": bool(body.stream is not False),
        **_sampling(body.options),
    }
    if body.suffix is not None:
        data["suffix"] = body.suffix
    return _validate(openai.CompletionRequest, data)


def completion_format(fmt: Format) -> tuple[str | None, dict[str, Any] | None]:
    """The grammar or schema a raw /api/generate's ``format`` asks for."""
    from app.server.convert import JSON_OBJECT_GBNF

    if fmt == "json":
        return JSON_OBJECT_GBNF, None
    converted = _format(fmt)
    return None, (converted["json_schema"]["schema"] if converted else None)
