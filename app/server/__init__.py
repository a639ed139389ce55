"""The OpenAI- and Ollama-compatible APIs (no Qt).

Public entry points: :func:`app.server.app.create_app`, :class:`app.server.runner.ServerRunner`
(uvicorn on its own thread), :class:`app.server.gateway.Gateway` (the bridge to the shared
EngineWorker), :class:`app.server.requestlog.RequestLog` (what the GUI's request log shows) and
:class:`app.server.config.ServerConfig`.
"""
