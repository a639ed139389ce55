"""The FastAPI application factory.

``create_app(gateway, config, request_log)`` builds one app: the OpenAI routes (Responses
included, its store in EMBER_HOME: app/server/responses), Anthropic's (``/v1/messages``:
app/server/routes/anthropic.py), Ollama's (``/``, ``/api/...``: app/server/ollama),
``/health``, OpenAI-shaped errors for all but Ollama's routes (they answer
``{"error": "..."}``) and Anthropic's (``{"type": "error", ...}``), and the ASGI middleware
(outermost first): request log, then the bound on requests in flight (app/server/limits.py),
then security (Host, Origin/CORS, API key, body size and the budget of bodies held at once).
No state lives in module globals.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.responses import Response

from app import __version__
from app.server.config import ServerConfig
from app.server.errors import install_handlers
from app.server.forward import RemoteForwarder
from app.server.gateway import Gateway
from app.server.limits import ConcurrencyMiddleware, RequestLimits
from app.server.ollama.manage import router as ollama_manage_router
from app.server.ollama.routes import router as ollama_router
from app.server.requestlog import RequestLog, RequestLogMiddleware
from app.server.responses.store import ResponseKeeper
from app.server.routes.anthropic import router as anthropic_router
from app.server.routes.openai import router as openai_router
from app.server.routes.responses import router as responses_router
from app.server.security import SecurityMiddleware


def create_app(
    gateway: Gateway,
    config: ServerConfig | None = None,
    request_log: RequestLog | None = None,
    forwarder: RemoteForwarder | None = None,
    limits: RequestLimits | None = None,
) -> FastAPI:
    config = config or ServerConfig()
    limits = limits if limits is not None else RequestLimits()
    app = FastAPI(
        title="Ember API",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.gateway = gateway
    app.state.config = config
    app.state.forwarder = forwarder or RemoteForwarder()
    app.state.limits = limits
    app.state.responses = ResponseKeeper()  # EMBER_HOME/responses.db, opened on use
    install_handlers(app)

    @app.get("/health", response_model=None)
    async def health() -> Response:
        """Answers as soon as the server accepts requests (a model may still be loading)."""
        return JSONResponse({"status": "ok"})

    app.include_router(openai_router)
    app.include_router(anthropic_router)
    app.include_router(responses_router)
    app.include_router(ollama_router)
    app.include_router(ollama_manage_router)
    app.add_middleware(SecurityMiddleware, config=config, limits=limits)
    app.add_middleware(ConcurrencyMiddleware, limits=limits)
    if request_log is not None:
        app.add_middleware(
            RequestLogMiddleware, request_log=request_log, body_chars=config.log_body_chars
        )
    return app
