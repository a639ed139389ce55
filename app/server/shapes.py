"""Response bodies, built as plain dicts so every field (and every explicit ``null``) is
exactly where OpenAI puts it. Streaming chunks are serialised compactly, one per SSE event."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import string
import struct
from typing import Any

from app import __version__
from app.engine.types import LoadedModel, Usage
from app.server.gateway import ModelView
from app.server.output import Collected
from app.server.pieces import Piece

_ALPHABET = string.ascii_letters + string.digits
DONE = b"data: [DONE]\n\n"


def new_id(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(29))


def fingerprint(model: LoadedModel) -> str:
    """Changes when the backend configuration that affects outputs changes."""
    key = f"{__version__}|{model.path}|{model.n_ctx}|{model.params.cache_type_k}"
    return "fp_" + hashlib.sha256(key.encode()).hexdigest()[:10]


def sse(data: dict[str, Any]) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return b"data: " + text.encode() + b"\n\n"


def usage_body(usage: Usage, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": completion_details(usage, reasoning_tokens),
    }


def completion_details(usage: Usage, reasoning_tokens: int = 0) -> dict[str, Any]:
    """OpenAI's ``completion_tokens_details``: with a ``prediction``, how many of its drafted
    tokens the answer took and how many it did not (speculative decoding's counts; drafts by
    prompt lookup are not prediction tokens)."""
    predicted = usage.predicted
    return {
        "reasoning_tokens": reasoning_tokens,
        "accepted_prediction_tokens": usage.accepted_tokens if predicted else 0,
        "rejected_prediction_tokens": usage.drafted_tokens - usage.accepted_tokens
        if predicted
        else 0,
    }


class Envelope:
    """The fields every object of one response shares."""

    def __init__(self, prefix: str, obj: str, model: LoadedModel, created: int) -> None:
        self.id = new_id(prefix)
        self.object = obj
        self.created = created
        self.model = model.model_id
        self.fingerprint = fingerprint(model)

    def wrap(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": choices,
            **extra,
        }


# ---- chat -----------------------------------------------------------------------------------


def chat_message(collected: Collected) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": collected.content if collected.content or not collected.calls else None,
        "refusal": None,
    }
    if collected.reasoning:
        message["reasoning_content"] = collected.reasoning.strip()
    if collected.calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in collected.calls
        ]
    return message


def chat_completion(
    env: Envelope, collected: Collected, finish_reason: str, usage: Usage
) -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": chat_message(collected),
        "logprobs": None,
        "finish_reason": finish_reason,
    }
    return env.wrap([choice], usage=usage_body(usage))


def piece_delta(piece: Piece) -> dict[str, Any]:
    if piece.kind == "content":
        return {"content": piece.text}
    if piece.kind == "reasoning":
        return {"reasoning_content": piece.text}
    call: dict[str, Any] = {"index": piece.index}
    if piece.id is not None:
        call["id"] = piece.id
        call["type"] = "function"
        call["function"] = {"name": piece.name or "", "arguments": piece.text}
    else:
        call["function"] = {"arguments": piece.text}
    return {"tool_calls": [call]}


def chat_chunk(
    env: Envelope,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    *,
    with_usage: bool,
) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    extra = {"usage": None} if with_usage else {}
    return sse(env.wrap([choice], **extra))


def usage_chunk(env: Envelope, usage: Usage) -> bytes:
    return sse(env.wrap([], usage=usage_body(usage)))


# ---- completions ----------------------------------------------------------------------------


def completion(env: Envelope, text: str, finish_reason: str, usage: Usage) -> dict[str, Any]:
    choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}
    return env.wrap([choice], usage=usage_body(usage))


def completion_chunk(
    env: Envelope, text: str, finish_reason: str | None = None, *, with_usage: bool
) -> bytes:
    choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}
    extra = {"usage": None} if with_usage else {}
    return sse(env.wrap([choice], **extra))


# ---- embeddings and models ------------------------------------------------------------------


def embedding_list(
    vectors: list[list[float]], model_id: str, prompt_tokens: int, as_base64: bool
) -> dict[str, Any]:
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": _b64(v) if as_base64 else v,
        }
        for i, v in enumerate(vectors)
    ]
    return {
        "object": "list",
        "data": data,
        "model": model_id,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def _b64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def model_object(view: ModelView) -> dict[str, Any]:
    return {
        "id": view.id,
        "object": "model",
        "created": view.created,
        "owned_by": view.owned_by,
        "state": "loaded" if view.loaded else "not-loaded",
        "context_length": view.context_length,
        "max_context_length": view.max_context_length,
        "capabilities": list(view.capabilities),
        **_residency(view),
    }


def _residency(view: ModelView) -> dict[str, Any]:
    """A loaded model's memory and time-to-live (Ember's extra fields; ``expires_at`` in
    seconds since the epoch, null while it stays loaded)."""
    r = view.resident
    if r is None:
        return {}
    expires = None if r.expires_at is None else int(r.expires_at)
    return {"memory_bytes": r.memory_bytes, "ttl": r.ttl, "expires_at": expires}
