"""Which API family a path belongs to, and how the middleware refuses a request in its shape.

The routes of each family answer errors in their own shape (OpenAI's in app/server/errors.py,
Ollama's through ``OllamaRoute``, Anthropic's through ``AnthropicRoute``); the middleware
(security, limits) refuses requests before any route runs, through :func:`send_refusal`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

from app.server.requestlog import note_of

if TYPE_CHECKING:
    from starlette.types import Scope, Send

Protocol = Literal["openai", "ollama", "anthropic"]

# Anthropic's error types by HTTP status (https://docs.anthropic.com/en/api/errors)
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def protocol_of(path: str) -> Protocol:
    if path == "/" or path.startswith("/api/"):
        return "ollama"
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return "anthropic"
    return "openai"


def anthropic_error(status: int, message: str) -> dict[str, object]:
    fallback = "api_error" if status >= 500 else "invalid_request_error"
    kind = ANTHROPIC_ERROR_TYPES.get(status, fallback)
    return {"type": "error", "error": {"type": kind, "message": message}}


def refusal_body(path: str, status: int, message: str, code: str | None) -> bytes:
    """The body of a refusal by the middleware, in the shape of the family ``path`` is in."""
    from app.server.errors import error_bytes  # FastAPI: imported once a server runs

    protocol = protocol_of(path)
    if protocol == "ollama":
        return json.dumps({"error": message}).encode()
    if protocol == "anthropic":
        return json.dumps(anthropic_error(status, message)).encode()
    return error_bytes(status, message, code)


async def send_refusal(
    scope: Scope,
    send: Send,
    status: int,
    message: str,
    code: str | None,
    *,
    headers: list[tuple[bytes, bytes]],
) -> None:
    """Refuse a request before any route runs: ``status`` with ``message`` in the shape of the
    family its path is in, plus ``headers``. Whoever was refused may have sent anything (a
    stranger's prompt, a huge body): the request log records that it happened, not what it
    said."""
    note_of(scope).refused = True
    path = str(scope.get("path", ""))
    if protocol_of(path) != "openai":
        note_of(scope).error = message  # the log reads OpenAI's shape only
    body = refusal_body(path, status, message, code)
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start + headers})
    await send({"type": "http.response.body", "body": body})
