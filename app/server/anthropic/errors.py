"""Anthropic-shaped errors: ``{"type": "error", "error": {"type", "message"}}``.

:class:`AnthropicRoute` rewrites the APIError or EngineError a handler raises (the same ones
the OpenAI routes answer) and notes the message for the request log. A full queue is
Anthropic's ``overloaded_error`` with its status, 529, which clients retry.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.responses import Response

from app.server.errors import APIError, ShapedErrorRoute
from app.server.protocols import anthropic_error

OVERLOADED = 529  # Anthropic's status for overloaded_error


def error_response(error: APIError) -> Response:
    status = OVERLOADED if error.code == "queue_full" else error.status
    body = anthropic_error(status, error.message)
    return JSONResponse(body, status_code=status, headers=error.headers)


class AnthropicRoute(ShapedErrorRoute):
    """A route whose errors are Anthropic's."""

    shape = staticmethod(error_response)
