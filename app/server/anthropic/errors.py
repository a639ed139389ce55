"""Anthropic-shaped errors: ``{"type": "error", "error": {"type", "message"}}``.

:class:`AnthropicRoute` rewrites the APIError or EngineError a handler raises (the same ones
the OpenAI routes answer) and notes the message for the request log. A full queue is
Anthropic's ``overloaded_error`` with its status, 529, which clients retry.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.responses import Response

from app.engine.types import EngineError
from app.server.errors import APIError, from_engine_error
from app.server.protocols import anthropic_error
from app.server.requestlog import note_of

OVERLOADED = 529  # Anthropic's status for overloaded_error


def error_response(error: APIError) -> Response:
    status = OVERLOADED if error.code == "queue_full" else error.status
    body = anthropic_error(status, error.message)
    return JSONResponse(body, status_code=status, headers=error.headers)


class AnthropicRoute(APIRoute):
    """A route whose errors are Anthropic's."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except APIError as e:
                error = e
            except EngineError as e:
                error = from_engine_error(e)
            note_of(request.scope).error = error.message
            return error_response(error)

        return route
