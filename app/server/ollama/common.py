"""What every Ollama route shares: Ollama-shaped errors, bodies, names, NDJSON, unloading.

Errors are ``{"error": "..."}`` with the status the OpenAI side would answer (404 unknown
model, 400 bad request, 503 busy...): :class:`OllamaRoute` rewrites the APIError or EngineError
a handler raises, and notes the message for the request log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.responses import Response

from app.engine.types import Event, Failed, Finished, LoadedModel, UnloadRequest
from app.server.catalog import CatalogError, CatalogModel, entry_for_file
from app.server.errors import APIError, ShapedErrorRoute, from_validation_errors
from app.server.gateway import Gateway
from app.server.names import alias_store, find, named_models
from app.server.requestlog import LogNote, note_of
from app.server.streaming import EventStreamResponse

Body = TypeVar("Body", bound=BaseModel)
NDJSON_HEADERS = [(b"content-type", b"application/x-ndjson"), (b"cache-control", b"no-cache")]


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class OllamaRoute(ShapedErrorRoute):
    """A route whose errors are Ollama's ``{"error": "..."}``."""

    @staticmethod
    def shape(error: APIError) -> Response:
        return error_response(error.status, error.message, error.headers)


async def parse(request: Request, cls: type[Body]) -> tuple[Body, LogNote]:
    """The body (a 400 if it is invalid) and the request log's note."""
    raw = await request.body()
    try:
        body = cls.model_validate_json(raw or b"{}")
    except ValidationError as e:
        raise from_validation_errors(e.errors(include_url=False)) from None
    note = note_of(request.scope)
    stream = getattr(body, "stream", False)
    note.stream = stream is not False and stream is not None and bool(stream)
    return body, note


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


# ---- names ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Named:
    """A model by its Ollama name, and whether (as what) it is loaded."""

    name: str
    entry: CatalogModel
    loaded: LoadedModel | None


def named(gateway: Gateway) -> list[Named]:
    """Every model (the catalog's, and loaded ones it does not list) by name. Reads the disk:
    call it off the event loop."""
    entries = list(gateway.catalog.list_models())
    loaded = gateway.loaded()
    real = {e.id: os.path.realpath(e.path) for e in entries}
    for m in loaded:
        if m.model_id not in real and os.path.realpath(m.path) not in real.values():
            entries.append(entry_for_file(m.path, m.model_id))
    by_name = named_models(entries, alias_store().load())
    out = []
    for name, entry in by_name.items():
        hit = next((m for m in reversed(loaded) if m.model_id == entry.id), None) or next(
            (m for m in reversed(loaded) if os.path.realpath(m.path) == real.get(entry.id)), None
        )
        out.append(Named(name, entry, hit))
    return out


def lookup(gateway: Gateway, name: str) -> Named | None:
    """The model ``name`` means (a name, an alias, or an id the OpenAI API accepts)."""
    models = named(gateway)
    entry = find(name, {m.name: m.entry for m in models})
    if entry is None:
        entry = next((m.entry for m in models if m.entry.id == name), None)
    if entry is None:  # a loaded model by its file's path, name or stem, as the OpenAI API
        loaded = next((m for m in models if m.loaded and _names_file(name, m.loaded)), None)
        entry = loaded.entry if loaded else None
    if entry is None:
        try:
            entry = gateway.catalog.resolve(name)
        except CatalogError:
            entry = None
    if entry is None:
        return None
    return next((m for m in models if m.entry.id == entry.id), None)


def _names_file(name: str, loaded: LoadedModel) -> bool:
    path = Path(loaded.path)
    return name in (loaded.path, path.name, path.name.removesuffix(".gguf"))


def not_found(name: str) -> APIError:
    return APIError(
        404,
        f"model '{name}' not found: GET /api/tags lists the models Ember has; POST /api/pull "
        "downloads one from Hugging Face (hf.co/OWNER/REPO:QUANT).",
        code="model_not_found",
    )


def require_model_name(name: str) -> None:
    if not name.strip():
        raise APIError(400, "model is required: name one of the models GET /api/tags lists.")


async def resolve(
    gateway: Gateway,
    name: str,
    note: LogNote,
    num_ctx: int | None = None,
    keep_alive: float | None = None,
) -> tuple[LoadedModel, CatalogModel, float]:
    """The loaded model ``name`` means (loading it if needed, with a ``num_ctx``-token
    context when given; ``keep_alive`` seconds, parsed, its time-to-live), its entry, and the
    seconds the load took (0 when it was loaded already)."""
    require_model_name(name)
    note.model = name
    found = await asyncio.to_thread(lookup, gateway, name)
    if found is None:
        raise not_found(name)
    started = time.perf_counter()
    try:
        model = await gateway.resolve(found.entry.id, num_ctx, ttl=keep_alive)
    except APIError as e:
        if e.status == 404:
            raise not_found(name) from None
        raise
    note.model = model.model_id
    return model, found.entry, (0.0 if found.loaded else time.perf_counter() - started)


async def unload(gateway: Gateway, model_id: str) -> None:
    """Unload a model (after the answers it is writing); returns when it is unloaded."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def sink(event: Event) -> None:
        if isinstance(event, Finished | Failed):
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, done)

    gateway.worker.submit(UnloadRequest(model_id), sink)
    await done


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class NDJSONResponse(EventStreamResponse):
    """Newline-delimited JSON, streamed; the job stops when the client goes away."""

    def __init__(self, chunks: AsyncIterator[bytes], on_disconnect: Callable[[], None]) -> None:
        super().__init__(chunks, on_disconnect)
        self.raw_headers = list(NDJSON_HEADERS)
