"""The real server (uvicorn on 127.0.0.1) in front of the real test model, as tests/server's
fixtures serve it: the model's id, its context, and what a test gets."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ollama

from app.engine.worker import EngineWorker
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.runner import ServerRunner

MODEL_ID = "gemma"

# A tool offered to the served model, as Chat Completions' ``tools`` lists it ...
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]}},
            "required": ["city"],
        },
    },
}
# ... and as the Responses API lists it: the same function, flat
RESPONSES_WEATHER = {"type": "function", **WEATHER["function"]}


N_CTX = 2048


@dataclass
class Served:
    runner: ServerRunner
    gateway: Gateway
    worker: EngineWorker
    library_dir: Path

    @property
    def base_url(self) -> str:
        url = self.runner.base_url
        assert url is not None
        return url

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")


@contextmanager
def serving(
    gateway: Gateway, config: ServerConfig | None = None, **options: Any
) -> Iterator[ServerRunner]:
    """The real server (uvicorn on 127.0.0.1, on a free port unless ``config`` says) in front
    of ``gateway`` for the block; then it stops, and the gateway's worker shuts down."""
    runner = ServerRunner(gateway, config or ServerConfig(port=0), **options)
    runner.start()
    try:
        yield runner
    finally:
        runner.stop()
        gateway.worker.shutdown()


def ollama_names(client: ollama.Client) -> list[str]:
    """The names of the models the server lists to Ollama's client (``ollama list``)."""
    return [m.model or "" for m in client.list().models]
