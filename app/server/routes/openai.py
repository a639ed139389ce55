"""The OpenAI-compatible routes: models, chat completions, completions, embeddings.

Each generating route: parse the body (400 on any problem), resolve the model (404, or a
just-in-time load), submit one job to the shared engine queue (503 when full), then answer
the way the route's :class:`_Answer` says (an EngineError on the way is errors.py's to answer).
Streaming answers wait for the first token (at most ~1 s after the job starts, ~10 s while it
is queued) before sending headers, so an engine-side rejection (context overflow, a bad
grammar) is still a proper 4xx; later failures arrive as an SSE ``error`` event, and a silent
stream gets an SSE comment every ~10 s so clients do not time out. A client that disconnects
cancels its job at once, whether it is queued, reading the prompt or writing tokens.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.responses import Response

from app.engine import types as engine
from app.engine.providers import REMOTE_ID_SEPARATOR, is_remote_id
from app.engine.types import Delta, Event, Failed, Finished
from app.server import convert, schemas, shapes
from app.server.catalog import ModelMeta
from app.server.errors import (
    APIError,
    from_engine_error,
    from_validation_errors,
    model_not_found,
)
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
from app.server.output import ChatOutput, Collected, Piece
from app.server.requestlog import LogNote, note_of
from app.server.streaming import EventStreamResponse

# Every route returns a Response itself: FastAPI's own serialisation is skipped (it is slower,
# and it toggles warning filters, which is not thread-safe when the server runs on a thread).
router = APIRouter()
Body = TypeVar("Body", bound=BaseModel)


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[Gateway, Depends(_gateway)]


# ---- models ---------------------------------------------------------------------------------


def _forwarder(request: Request) -> RemoteForwarder:
    forwarder: RemoteForwarder = request.app.state.forwarder
    return forwarder


ForwarderDep = Annotated[RemoteForwarder, Depends(_forwarder)]


@router.get("/v1/models", response_model=None)
async def list_models(gateway: GatewayDep, forwarder: ForwarderDep) -> Response:
    views = await gateway.models()
    data = [shapes.model_object(v) for v in views] + await forwarder.models()
    return JSONResponse({"object": "list", "data": data})


@router.get("/v1/models/{model_id:path}", response_model=None)
async def get_model(model_id: str, gateway: GatewayDep, forwarder: ForwarderDep) -> Response:
    for view in await gateway.models():
        if view.id == model_id:
            return JSONResponse(shapes.model_object(view))
    if is_remote_id(model_id):
        for obj in await forwarder.models():
            if obj["id"] == model_id:
                return JSONResponse(obj)
    raise model_not_found(model_id)


# ---- chat and completions ------------------------------------------------------------------


class _Answer(ABC):
    """How a generating route's text becomes its answer: the chunks of a stream (which _sse
    frames with keep-alives, errors, the usage chunk and DONE) or a whole body."""

    def __init__(self, env: shapes.Envelope, include_usage: bool) -> None:
        self.env, self.include_usage = env, include_usage

    def opening(self) -> list[bytes]:
        return []

    def reason(self, final: Finished) -> str:
        return "length" if final.reason == "length" else "stop"

    @abstractmethod
    def delta(self, text: str) -> list[bytes]: ...

    @abstractmethod
    def finish(self, final: Finished) -> list[bytes]: ...

    @abstractmethod
    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]: ...


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request, gateway: GatewayDep) -> Response:
    if (remote := await _forward_remote(request, "/chat/completions")) is not None:
        return remote
    body, note = await _parse(request, schemas.ChatCompletionRequest)
    config = request.app.state.config
    await fetch_image_urls(body.messages, config.image_urls, local=config.image_urls_local)
    # off the event loop: decoding and checking 16 images' data can take a second
    await asyncio.to_thread(convert.check_chat, body)
    await check_constraint(convert.chat_constraint(body))
    model, meta = await _resolve(gateway, body.model, note)
    plan = convert.plan_chat(body, model, meta)
    obj = "chat.completion.chunk" if body.stream else "chat.completion"
    env = shapes.Envelope("chatcmpl-", obj, model, int(time.time()))
    answer = _ChatAnswer(env, body.include_usage, plan)
    return await _respond(request, gateway.submit(plan.request), answer, note, body.stream)


class _ChatAnswer(_Answer):
    def __init__(self, env: shapes.Envelope, include_usage: bool, plan: convert.ChatPlan) -> None:
        super().__init__(env, include_usage)
        self.forced = plan.tool_mode in ("required", "named")
        self.output = ChatOutput(
            tool_mode=plan.tool_mode,
            tool_names=plan.tool_names,
            reasoning=not plan.constrained,
            reasoning_open=plan.reasoning_open,
        )

    def opening(self) -> list[bytes]:
        content = None if self.forced else ""
        return [self._chunk({"role": "assistant", "content": content, "refusal": None})]

    def delta(self, text: str) -> list[bytes]:
        return self._pieces(self.output.feed(text))

    def finish(self, final: Finished) -> list[bytes]:
        return [*self._pieces(self.output.finish()), self._chunk({}, self.reason(final))]

    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]:
        collected = Collected()
        for text in texts:
            collected.add(self.output.feed(text))
        collected.add(self.output.finish())
        return shapes.chat_completion(self.env, collected, self.reason(final), final.usage)

    def reason(self, final: Finished) -> str:  # after output.finish(), which may end a call
        if final.reason != "length" and self.output.tool_calls:
            return "tool_calls"
        return super().reason(final)

    def _chunk(self, delta: dict[str, Any], reason: str | None = None) -> bytes:
        return shapes.chat_chunk(self.env, delta, reason, with_usage=self.include_usage)

    def _pieces(self, pieces: list[Piece]) -> list[bytes]:
        return [self._chunk(shapes.piece_delta(p)) for p in pieces]


@router.post("/v1/completions", response_model=None)
async def completions(request: Request, gateway: GatewayDep) -> Response:
    if (remote := await _forward_remote(request, "/completions")) is not None:
        return remote
    body, note = await _parse(request, schemas.CompletionRequest)
    prompt = convert.check_completion(body)
    await check_constraint((body.grammar, None, "grammar"))
    model, meta = await _resolve(gateway, body.model, note)
    engine_request = convert.completion_request(body, prompt, model, meta)
    env = shapes.Envelope("cmpl-", "text_completion", model, int(time.time()))
    answer = _CompletionAnswer(env, body.include_usage)
    return await _respond(request, gateway.submit(engine_request), answer, note, body.stream)


class _CompletionAnswer(_Answer):
    def delta(self, text: str) -> list[bytes]:
        return [shapes.completion_chunk(self.env, text, with_usage=self.include_usage)]

    def finish(self, final: Finished) -> list[bytes]:
        reason = self.reason(final)
        return [shapes.completion_chunk(self.env, "", reason, with_usage=self.include_usage)]

    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]:
        text = final.result if isinstance(final.result, str) else ""  # the prompt too, with echo
        return shapes.completion(self.env, text, self.reason(final), final.usage)


# ---- embeddings -----------------------------------------------------------------------------


@router.post("/v1/embeddings", response_model=None)
async def embeddings(request: Request, gateway: GatewayDep) -> Response:
    if (remote := await _forward_remote(request, "/embeddings")) is not None:
        return remote
    body, note = await _parse(request, schemas.EmbeddingRequest)
    inputs = convert.embedding_inputs(body)
    model, _meta = await _resolve(gateway, body.model, note)
    stream = gateway.submit(engine.EmbeddingRequest(inputs, model.model_id))
    _texts, final = await collect(stream, request)
    vectors: list[list[float]] = final.result
    if body.dimensions is not None and vectors and body.dimensions != len(vectors[0]):
        raise APIError(
            400,
            f"This model's embeddings have {len(vectors[0])} dimensions; 'dimensions' cannot "
            "change that.",
            param="dimensions",
        )
    note.prompt_tokens = final.usage.prompt_tokens
    as_base64 = body.encoding_format == "base64"
    return JSONResponse(
        shapes.embedding_list(vectors, model.model_id, final.usage.prompt_tokens, as_base64)
    )


# ---- shared steps ---------------------------------------------------------------------------


async def _forward_remote(request: Request, path: str) -> Response | None:
    """A request naming ``provider::model`` goes to that provider (see app/server/forward.py)."""
    raw = await request.body()
    if REMOTE_ID_SEPARATOR.encode() not in raw:
        return None  # a local request: parsed once, by _parse
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        return None  # _parse answers with the proper 400
    if not isinstance(data, dict) or not is_remote_id(str(data.get("model") or "")):
        return None
    note_of(request.scope).model = str(data["model"])
    return await _forwarder(request).forward(path, data)


async def _parse(request: Request, cls: type[Body]) -> tuple[Body, LogNote]:
    """The body (a 400 if it is invalid) and the request log's note, which records ``stream``."""
    try:
        body = cls.model_validate_json(await request.body())
    except ValidationError as e:
        raise from_validation_errors(e.errors(include_url=False)) from None
    note = note_of(request.scope)
    note.stream = bool(getattr(body, "stream", False))
    return body, note


async def _resolve(
    gateway: Gateway, name: str | None, note: LogNote
) -> tuple[engine.LoadedModel, ModelMeta]:
    note.model = name
    model = await gateway.resolve(name)
    note.model = model.model_id
    return model, await asyncio.to_thread(model_meta, model.path)


async def _respond(
    request: Request, stream: JobStream, answer: _Answer, note: LogNote, streaming: bool | None
) -> Response:
    """Stream the job's answer (see the module's docstring), or send it whole."""
    if streaming:
        early = await first_events(stream, request)
        return EventStreamResponse(_sse(stream, early, answer, note), stream.cancel)
    texts, final = await collect(stream, request)
    _note_usage(note, final)
    return JSONResponse(answer.whole(texts, final))


async def _sse(
    stream: JobStream, early: list[Event], answer: _Answer, note: LogNote
) -> AsyncIterator[bytes]:
    try:
        for chunk in answer.opening():
            yield chunk
        while (event := await next_event(stream, early)) is not None:
            if event is TICK:
                yield KEEPALIVE
            elif isinstance(event, Delta):
                for chunk in answer.delta(event.text):
                    yield chunk
            elif isinstance(event, Finished):
                if event.reason == "cancelled":
                    yield _stream_error(cancelled(), note)
                    break
                for chunk in answer.finish(event):
                    yield chunk
                if answer.include_usage:
                    yield shapes.usage_chunk(answer.env, event.usage)
                _note_usage(note, event)
            elif isinstance(event, Failed):
                yield _stream_error(from_engine_error(event.error), note)
        yield shapes.DONE
    finally:
        stream.cancel()


def _stream_error(error: APIError, note: LogNote) -> bytes:
    note.error = error.message
    return shapes.sse(error.body())


def _note_usage(note: LogNote, final: Finished) -> None:
    note.prompt_tokens = final.usage.prompt_tokens
    note.completion_tokens = final.usage.completion_tokens
