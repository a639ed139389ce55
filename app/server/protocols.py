"""Which API family a path belongs to, and how the middleware refuses a request in its shape.

The routes of each family answer errors in their own shape (OpenAI's in app/server/errors.py,
Ollama's through ``OllamaRoute``, Anthropic's through ``AnthropicRoute``); the middleware
(security, limits) refuses requests before any route runs, through :func:`refusal_body`.
"""

from __future__ import annotations

import json
from typing import Literal

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
    kind = ANTHROPIC_ERROR_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
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
