"""The errors a remote OpenAI-compatible server's answers become, each with the HTTP status
Ember's own API answers with when it forwards the request, and a stable code."""

from __future__ import annotations

from app.engine.types import BadRequestError, ContextOverflowError, EngineError, ModelNotFoundError


class RemoteError(EngineError):
    """A remote server failed a request. ``status`` is the HTTP status Ember's own API should
    answer with when it forwards the request; ``upstream_status`` is what the server said."""

    code = "remote_error"
    status = 502

    def __init__(self, message: str, upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.upstream_status = upstream_status


class RemoteUnreachableError(RemoteError):
    code = "remote_unreachable"


class RemoteTimeoutError(RemoteError):
    code = "remote_timeout"
    status = 504


class RemoteAuthError(RemoteError):
    code = "remote_auth"


class RemoteModelNotFoundError(RemoteError, ModelNotFoundError):  # APIs answer it with 404
    code = "remote_model_not_found"
    status = 404


class RemoteBadRequestError(RemoteError, BadRequestError):
    code = "remote_bad_request"
    status = 400


class RemoteContextOverflowError(RemoteError, ContextOverflowError):
    code = "remote_context_overflow"
    status = 400


class RemoteRateLimitError(RemoteError):
    code = "remote_rate_limited"
    status = 429


class RemoteServerError(RemoteError):
    code = "remote_server_error"


class RemoteConnectionLostError(RemoteError):
    code = "remote_connection_lost"
