"""The real server (uvicorn on 127.0.0.1) in front of the scripted model, and the Anthropic-shaped
messages and tools the Messages API tests send it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.scripted_model import scripted_factory
from tests.helpers.served import serving

ANTHROPIC_TOOLS: list[Any] = [
    {
        "name": "weather",
        "description": "The weather in a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    }
]


HI: list[Any] = [{"role": "user", "content": "Hi"}]
ONE_AT_A_TIME = LoadParams(n_ctx=4096, n_parallel=1)


def serve(
    max_waiting: int = 16,
    config: ServerConfig | None = None,
    params: LoadParams = ONE_AT_A_TIME,
    **model: Any,
) -> Iterator[tuple[str, Gateway]]:
    """The server in front of a scripted model (``model``: ``scripted_factory``'s options) named
    ``scripted``; yields its root URL and gateway (use with ``yield from``)."""
    worker = EngineWorker(model_factory=scripted_factory(**model))
    gateway = Gateway(worker, max_waiting=max_waiting)
    gateway.load("scripted", "scripted", params).wait(30)
    with serving(gateway, config or ServerConfig(port=0)) as runner:
        yield f"http://127.0.0.1:{runner.port}", gateway
