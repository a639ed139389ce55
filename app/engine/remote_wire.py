"""What goes over the wire to an OpenAI-compatible server and back: base URLs, request bodies,
server-sent events, error bodies, ``Retry-After`` and the pieces of an answer.

Pure functions over dicts, strings and httpx responses; the engine (:mod:`app.engine.remote`)
does the I/O.
"""

from __future__ import annotations

import email.utils
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from app.engine.types import ChatRequest, CompletionRequest, SamplingParams, ToolCallDelta, Usage

if TYPE_CHECKING:
    import httpx

_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")


def normalize_base_url(url: str) -> str:
    """The API root, ending in its version segment: ``http://host:8000`` and
    ``http://host:8000/v1/`` both become ``http://host:8000/v1``.

    A path that already has a version segment (``/v1``, ``/v1beta/openai``) is kept; a pasted
    endpoint (``…/v1/chat/completions``) is cut back to its root; no scheme means ``http``.
    """
    text = url.strip()
    if not text:
        raise ValueError("The base URL is empty.")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL.")
    path = parts.path.rstrip("/")
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    if not any(_is_version(seg) for seg in path.split("/")):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _is_version(segment: str) -> bool:
    return len(segment) >= 2 and segment[0] == "v" and segment[1].isdigit()


# ---- request bodies --------------------------------------------------------------------------


def sampling_fields(sampling: SamplingParams, *, chat: bool, llama_extras: bool) -> dict[str, Any]:
    """Our sampling parameters as OpenAI request fields.

    ``llama_extras`` adds the fields llama.cpp, vLLM, SGLang, LM Studio and Ollama understand
    (top_k, min_p, repeat penalty, mirostat, grammar); OpenAI itself rejects unknown fields.
    """
    s = sampling
    body: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p}
    if s.max_tokens is not None:
        body["max_tokens"] = s.max_tokens
    elif not chat and llama_extras:
        body["max_tokens"] = None  # vLLM, llama.cpp: until the context is full (not 16)
    if s.stop:
        body["stop"] = list(s.stop)
    if s.seed is not None:
        body["seed"] = s.seed
    if s.presence_penalty:
        body["presence_penalty"] = s.presence_penalty
    if s.frequency_penalty:
        body["frequency_penalty"] = s.frequency_penalty
    if s.logit_bias:
        body["logit_bias"] = {str(k): v for k, v in s.logit_bias.items()}
    if s.json_schema is not None and chat:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": s.json_schema},
        }
    if not llama_extras:
        return body
    body["top_k"] = s.top_k
    body["min_p"] = s.min_p
    if s.typical_p != 1.0:
        body["typical_p"] = s.typical_p
    if s.repeat_penalty != 1.0:
        body["repeat_penalty"] = s.repeat_penalty  # llama.cpp's name
        body["repetition_penalty"] = s.repeat_penalty  # vLLM's and SGLang's
        body["repeat_last_n"] = s.repeat_last_n
    if s.mirostat_mode:
        body["mirostat"] = body["mirostat_mode"] = s.mirostat_mode
        body["mirostat_tau"] = s.mirostat_tau
        body["mirostat_eta"] = s.mirostat_eta
    if s.grammar:
        body["grammar"] = s.grammar
    if s.json_schema is not None and not chat:
        body["json_schema"] = s.json_schema  # llama-server's field for completions
    return body


def request_body(
    request: ChatRequest | CompletionRequest, model: str, *, stream: bool, llama_extras: bool
) -> dict[str, Any]:
    """The JSON body for ``/chat/completions`` or ``/completions``."""
    chat = isinstance(request, ChatRequest)
    body: dict[str, Any] = {"model": model, "stream": stream}
    if isinstance(request, ChatRequest):
        body["messages"] = [dict(m) for m in request.messages]
        if request.tools:
            body["tools"] = request.tools
    else:
        body["prompt"] = request.prompt
        if request.suffix is not None:
            body["suffix"] = request.suffix
        if request.echo:
            body["echo"] = True
    body.update(sampling_fields(request.sampling, chat=chat, llama_extras=llama_extras))
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


# ---- server-sent events and answers ---------------------------------------------------------


def iter_sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The ``data`` of each server-sent event (multi-line data joined by newlines); comments,
    ``event:``/``id:`` fields and keep-alive pings are skipped."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value.removeprefix(" "))
    if data:  # a last event without its blank line: lenient, like browsers are not
        yield "\n".join(data)


def error_message(response: httpx.Response) -> str:
    """The human part of an error body: OpenAI's ``{"error": {"message"}}``, FastAPI's
    ``{"detail"}``, Ollama's and TGI's ``{"error": "…"}``, or the text itself."""
    try:
        data = response.json()
    except ValueError:
        return clip(response.text.strip()) or response.reason_phrase
    return message_of(data) or clip(response.text.strip()) or response.reason_phrase


def message_of(data: Any) -> str:
    if isinstance(data, str):
        return clip(data)
    if not isinstance(data, dict):
        return ""
    for key in ("error", "detail", "message"):
        value = data.get(key)
        if isinstance(value, dict):
            return message_of(value)
        if isinstance(value, str) and value:
            return clip(value)
        if isinstance(value, list) and value:
            return clip(
                "; ".join(str(v.get("msg", v)) if isinstance(v, dict) else str(v) for v in value)
            )
    return ""


def clip(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_after_seconds(response: httpx.Response, now: datetime | None = None) -> float | None:
    """``Retry-After`` (seconds or an HTTP date) or OpenAI's ``retry-after-ms``, if any."""
    ms = response.headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def model_ids(data: Any) -> list[str]:
    items = (data.get("data") or data.get("models") or []) if isinstance(data, dict) else data
    ids: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            ids.append(item)
        elif isinstance(item, dict):
            value = item.get("id") or item.get("name") or item.get("model")
            if isinstance(value, str) and value not in ids:
                ids.append(value)
    return ids


def usage_of(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        cached_tokens=int(cached or 0),
    )


def tool_call_delta(job_id: str, tc: dict[str, Any]) -> ToolCallDelta:
    fn = tc.get("function") or {}
    return ToolCallDelta(
        job_id,
        index=int(tc.get("index") or 0),
        id=tc.get("id"),
        name=fn.get("name"),
        arguments=fn.get("arguments") or "",
    )
