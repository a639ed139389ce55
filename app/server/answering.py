"""The steps every generating route shares, whatever protocol it speaks.

A protocol is an adapter (app/server/routes/openai.py, anthropic.py, responses.py; Ollama's in
app/server/ollama): it parses its body, turns it into the one chat body the engine path takes
(:class:`app.server.schemas.ChatCompletionRequest`), and writes the engine's events in its own
wire shape through an :class:`Answer`. Everything between is here, once: the remote forward,
parsing into pydantic (a 400 on any problem), the checks before a model is resolved (images,
constraints), resolving (a just-in-time load, or a 404), planning the engine request
(:func:`prepare_chat`), and the stream loop (:func:`respond`): headers wait for the first
token, a silent stream gets the protocol's keep-alive, a failure mid-stream its error event,
and a client that goes away cancels the job.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.responses import Response

from app.engine import types as engine
from app.engine.provider_ids import REMOTE_ID_SEPARATOR, is_remote_id
from app.engine.types import Delta, Event, Failed, Finished
from app.server import convert, schemas
from app.server.catalog import ModelMeta
from app.server.errors import APIError, from_engine_error, from_validation_errors
from app.server.forward import RemoteForwarder
from app.server.gateway import Gateway, JobStream, model_meta
from app.server.images import fetch_image_urls
from app.server.jobs import (
    KEEPALIVE,
    TICK,
    cancelled,
    check_constraint,
    collect,
    first_events,
    next_event,
)
from app.server.requestlog import LogNote, note_of
from app.server.streaming import EventStreamResponse

Body = TypeVar("Body", bound=BaseModel)


class Answer(ABC):
    """How one protocol writes a generating route's answer: the frames of a stream (opening,
    one or more per piece of text, the end, keep-alives, a failure) or a whole body."""

    include_usage: bool = False

    def opening(self) -> list[bytes]:
        """Frames sent before the first token (after the headers)."""
        return []

    @abstractmethod
    def delta(self, text: str) -> list[bytes]: ...

    @abstractmethod
    def finish(self, final: Finished) -> list[bytes]:
        """The frames that end a stream that finished (usage included, if the protocol
        sends it)."""

    @abstractmethod
    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]: ...

    @abstractmethod
    def error(self, error: APIError) -> bytes:
        """The frame of a failure after the headers went out."""

    def keepalive(self) -> bytes:
        return KEEPALIVE

    def closing(self) -> list[bytes]:
        """Frames after everything else, also after a failure (OpenAI's ``[DONE]``)."""
        return []


# ---- before the engine ----------------------------------------------------------------------


def forwarder_of(request: Request) -> RemoteForwarder:
    forwarder: RemoteForwarder = request.app.state.forwarder
    return forwarder


async def forward_remote(request: Request, path: str) -> Response | None:
    """A request naming ``provider::model`` goes to that provider (see app/server/forward.py)."""
    raw = await request.body()
    if REMOTE_ID_SEPARATOR.encode() not in raw:
        return None  # a local request: parsed once, by parse()
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        return None  # parse() answers with the proper 400
    if not isinstance(data, dict) or not is_remote_id(str(data.get("model") or "")):
        return None
    note_of(request.scope).model = str(data["model"])
    return await forwarder_of(request).forward(path, data)


async def parse(request: Request, cls: type[Body]) -> tuple[Body, LogNote]:
    """The body (a 400 if it is invalid) and the request log's note, which records ``stream``."""
    try:
        body = cls.model_validate_json(await request.body())
    except ValidationError as e:
        raise from_validation_errors(e.errors(include_url=False)) from None
    note = note_of(request.scope)
    note.stream = bool(getattr(body, "stream", False))
    return body, note


async def resolve(
    gateway: Gateway, name: str | None, note: LogNote, ttl: float | None = None
) -> tuple[engine.LoadedModel, ModelMeta]:
    note.model = name
    model = await gateway.resolve(name, ttl=ttl)
    note.model = model.model_id
    return model, await asyncio.to_thread(model_meta, model.path)


async def prepare_chat(
    request: Request, gateway: Gateway, body: schemas.ChatCompletionRequest, note: LogNote
) -> tuple[convert.ChatPlan, engine.LoadedModel]:
    """Everything between a chat body and its engine request: image URLs fetched (if the
    server allows them), the checks that need no model, the constraint checked, the model
    resolved, the request planned. Every adapter's chat goes through here."""
    config = request.app.state.config
    await fetch_image_urls(body.messages, config.image_urls, local=config.image_urls_local)
    # off the event loop: decoding and checking 16 images' data can take a second
    await asyncio.to_thread(convert.check_chat, body)
    await check_constraint(convert.chat_constraint(body))
    model, meta = await resolve(gateway, body.model, note, body.ttl)
    # off the event loop: the lazy tool-call grammar is converted from the tools' schemas
    # (then cached), and the template is rendered once to see if it opens reasoning
    return await asyncio.to_thread(convert.plan_chat, body, model, meta), model


# ---- the answer -----------------------------------------------------------------------------


async def respond(
    request: Request, stream: JobStream, answer: Answer, note: LogNote, streaming: bool | None
) -> Response:
    """Stream the job's answer (see the module's docstring), or send it whole."""
    if streaming:
        early = await first_events(stream, request)
        return EventStreamResponse(sse(stream, early, answer, note), stream.cancel)
    texts, final = await collect(stream, request)
    note_usage(note, final)
    return JSONResponse(answer.whole(texts, final))


async def sse(
    stream: JobStream, early: list[Event], answer: Answer, note: LogNote
) -> AsyncIterator[bytes]:
    try:
        for chunk in answer.opening():
            yield chunk
        while (event := await next_event(stream, early)) is not None:
            if event is TICK:
                yield answer.keepalive()
            elif isinstance(event, Delta):
                for chunk in answer.delta(event.text):
                    yield chunk
            elif isinstance(event, Finished):
                if event.reason == "cancelled":
                    yield stream_error(answer, cancelled(), note)
                    break
                for chunk in answer.finish(event):
                    yield chunk
                note_usage(note, event)
            elif isinstance(event, Failed):
                yield stream_error(answer, from_engine_error(event.error), note)
        for chunk in answer.closing():
            yield chunk
    finally:
        stream.cancel()


def stream_error(answer: Answer, error: APIError, note: LogNote) -> bytes:
    note.error = error.message
    return answer.error(error)


def note_usage(note: LogNote, final: Finished) -> None:
    note.prompt_tokens = final.usage.prompt_tokens
    note.completion_tokens = final.usage.completion_tokens
