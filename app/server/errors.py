"""OpenAI-shaped errors: every failure answers ``{"error": {"message", "type", "param", "code"}}``.

Routes raise :class:`APIError` or let an EngineError through (:func:`from_engine_error`
translates it); validation errors (pydantic, FastAPI) and unknown routes are rewritten by the
handlers that :func:`install_handlers` registers. No traceback or server path reaches a body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.engine.types import (
    BadRequestError,
    ContextOverflowError,
    EngineCrashedError,
    EngineError,
    ModelFileError,
    ModelNotFoundError,
    ModelNotLoadedError,
    ModelTooLargeError,
    OutOfMemoryError,
    QueueFullError,
)
from app.server.requestlog import note_of

log = logging.getLogger(__name__)

JSON_TOO_DEEP_MESSAGE = (
    "The JSON body is nested too deeply: this server reads arrays and objects up to about 200 "
    "levels inside each other. Flatten the deepest part (a JSON schema, a tool's parameters)."
)
JSON_PARSE_MESSAGE = (
    "We could not parse the JSON body of your request. The API expects a JSON payload "
    "(Content-Type: application/json), but what was sent was not valid JSON."
)

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    503: "server_error",
}


class APIError(Exception):
    """An error answered with ``status`` and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type or _TYPE_BY_STATUS.get(status, "server_error")
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(
    message: str, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_bytes(status: int, message: str, code: str | None = None) -> bytes:
    """An error body for middleware that answers before FastAPI is involved."""
    body = error_body(message, _TYPE_BY_STATUS.get(status, "server_error"), None, code)
    return json.dumps(body).encode()


def model_not_found(name: str, detail: str | None = None) -> APIError:
    message = f"The model `{name}` does not exist or is not in Ember's library."
    hint = detail or "GET /v1/models lists the models this server can use."
    return APIError(404, f"{message} {hint}", code="model_not_found", param="model")


def from_engine_error(error: EngineError) -> APIError:
    """The HTTP answer to an engine failure: the user's fault is a 4xx, ours a 5xx."""
    message = error.message
    if isinstance(error, QueueFullError):
        return APIError(503, message, code="queue_full", headers={"Retry-After": "2"})
    if isinstance(error, ContextOverflowError):
        return APIError(400, message, code="context_length_exceeded", param="messages")
    if isinstance(error, ModelNotLoadedError):
        return APIError(400, message, code="model_not_loaded", param="model")
    if isinstance(error, ModelNotFoundError):
        return APIError(404, message, code="model_not_found", param="model")
    if isinstance(error, BadRequestError):
        return APIError(400, message, code="invalid_request")
    if isinstance(error, ModelTooLargeError):  # refused before loading: the request can change
        return APIError(400, message, code="model_too_large", param="model")
    if isinstance(error, OutOfMemoryError):
        return APIError(500, message, code="out_of_memory", type="server_error")
    if isinstance(error, ModelFileError):
        return APIError(500, message, code=error.code, type="server_error")
    if isinstance(error, EngineCrashedError) and "shutting down" in message:
        return APIError(503, message, code="shutting_down", type="server_error")
    if isinstance(error, EngineCrashedError):
        # The details (native messages, paths) are in the server's log, not in the answer.
        log.error("Engine failure answered with 500: %s", message)
        return APIError(
            500,
            "The engine failed while processing the request; Ember's log has the details. "
            "Try again; if it keeps failing, reload the model.",
            code=error.code,
            type="server_error",
        )
    return APIError(500, message, code=error.code, type="server_error")


# ---- validation errors ----------------------------------------------------------------------


def param_path(loc: Sequence[int | str]) -> str | None:
    """``("messages", 0, "role")`` -> ``"messages[0].role"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("body", "query", "path", "header"):
            # pydantic names union members after their type; they are not part of the path
            if part in ("function-after", "function-before", "function-wrap") or part.startswith(
                ("str", "list[", "dict[", "int", "float", "bool", "tagged-union")
            ):
                continue
            out += f".{part}" if out else part
    return out or None


def from_validation_errors(errors: Sequence[Any]) -> APIError:
    """The first pydantic/FastAPI error, phrased the way OpenAI phrases its own."""
    if not errors:
        return APIError(400, "The request is invalid.")
    first = errors[0]
    kind = str(first.get("type", ""))
    if kind == "json_invalid" and "recursion limit" in str(first.get("msg", "")):
        return APIError(400, JSON_TOO_DEEP_MESSAGE)  # valid JSON, so say what is wrong with it
    if kind in ("json_invalid", "json_type"):
        return APIError(400, JSON_PARSE_MESSAGE)
    loc = tuple(first.get("loc", ()))
    param = param_path(loc)
    if kind == "model_attributes_type" and param is None:
        return APIError(400, "The request body must be a JSON object.")
    if kind == "missing":
        if param is None:
            return APIError(400, JSON_PARSE_MESSAGE)
        return APIError(
            400,
            f"Missing required parameter: '{param}'.",
            param=param,
            code="missing_required_parameter",
        )
    if kind == "too_short" and first.get("input") == []:
        return APIError(
            400,
            f"Invalid '{param}': empty array. Expected an array with at least 1 item.",
            param=param,
            code="empty_array",
        )
    message = str(first.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    if kind == "value_error":
        return APIError(400, f"Invalid '{param}': {message}", param=param, code="invalid_value")
    received = first.get("input")
    shown = json.dumps(received)[:80] if _jsonable(received) else type(received).__name__
    code = "invalid_type" if kind.endswith("_type") or "parsing" in kind else "invalid_value"
    return APIError(400, f"Invalid '{param}': {message} (got {shown}).", param=param, code=code)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# ---- handlers -------------------------------------------------------------------------------


async def _on_api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response()


async def _on_engine_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngineError)
    return from_engine_error(exc).response()


async def _on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError | ValidationError) else []
    return from_validation_errors(errors).response()


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        error = APIError(404, f"Invalid URL ({request.method} {request.url.path})")
    elif exc.status_code == 405:
        error = APIError(405, f"Method not allowed ({request.method} {request.url.path})")
    else:
        error = APIError(exc.status_code, str(exc.detail))
    if exc.headers:
        error.headers.update(exc.headers)
    return error.response()


async def _on_unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("Unexpected error in a request", exc_info=exc)
    error = APIError(
        500, "The server had an error while processing your request.", type="server_error"
    )
    # Starlette drops the connection after an unhandled error: say so, or a keep-alive
    # client's next request on it fails with a reset instead of this answer's error
    error.headers["Connection"] = "close"
    return error.response()


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(APIError, _on_api_error)
    app.add_exception_handler(EngineError, _on_engine_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(ValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)


class ShapedErrorRoute(APIRoute):
    """A route that answers an APIError or EngineError in its protocol's own shape
    (``shape``), and notes the error in the request log: Ollama's and Anthropic's routes."""

    @staticmethod
    def shape(error: APIError) -> Response:
        return error.response()

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        shape = self.shape

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except APIError as e:
                error = e
            except EngineError as e:
                error = from_engine_error(e)
            note_of(request.scope).error = error.message
            return shape(error)

        return route
