"""The OpenAI-compatible routes: models, chat completions, completions, embeddings.

Each generating route: parse the body (400 on any problem), resolve the model (404, or a
just-in-time load), submit one job to the shared engine queue (503 when full), then answer
the way its :class:`~app.server.answering.Answer` says (the shared steps are in
app/server/answering.py; an EngineError on the way is errors.py's to answer).
Streaming answers wait for the first token (at most ~1 s after the job starts, ~10 s while it
is queued) before sending headers, so an engine-side rejection (context overflow, a bad
grammar) is still a proper 4xx; later failures arrive as an SSE ``error`` event, and a silent
stream gets an SSE comment every ~10 s so clients do not time out. A client that disconnects
cancels its job at once, whether it is queued, reading the prompt or writing tokens.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from app.engine import types as engine
from app.engine.provider_ids import is_remote_id
from app.engine.types import Finished
from app.server import convert, schemas, shapes
from app.server.answering import (
    Answer,
    forward_remote,
    forwarder_of,
    parse,
    prepare_chat,
    resolve,
    respond,
)
from app.server.errors import APIError, model_not_found
from app.server.forward import RemoteForwarder
from app.server.gateway import Gateway
from app.server.jobs import check_constraint, collect
from app.server.output import Collected
from app.server.pieces import Piece

# Every route returns a Response itself: FastAPI's own serialisation is skipped (it is slower,
# and it toggles warning filters, which is not thread-safe when the server runs on a thread).
router = APIRouter()


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[Gateway, Depends(_gateway)]


# ---- models ---------------------------------------------------------------------------------


ForwarderDep = Annotated[RemoteForwarder, Depends(forwarder_of)]


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


@router.post("/v1/models/load", response_model=None)
async def load_model(request: Request, gateway: GatewayDep) -> Response:
    """Load a library model now (a request naming it would load it just in time): with
    ``context_length`` tokens, and with ``force`` even when the estimate says it does not fit
    (otherwise that is a 400 ``model_too_large`` with the numbers and what to try)."""
    body, note = await parse(request, schemas.LoadModelRequest)
    note.model = body.model
    loaded = await gateway.resolve(body.model, body.context_length, force=body.force, ttl=body.ttl)
    note.model = loaded.model_id
    for view in await gateway.models():
        if view.id == loaded.model_id:
            return JSONResponse(shapes.model_object(view))
    raise model_not_found(body.model)


# ---- chat and completions ------------------------------------------------------------------


class _OpenAIAnswer(Answer):
    """OpenAI's frames: ``data: {chunk}`` events, a usage chunk when asked, an error event's
    body in OpenAI's error shape, then ``data: [DONE]``."""

    def __init__(self, env: shapes.Envelope, include_usage: bool) -> None:
        self.env, self.include_usage = env, include_usage

    def reason(self, final: Finished) -> str:
        return "length" if final.reason == "length" else "stop"

    def finish(self, final: Finished) -> list[bytes]:
        frames = self.last_chunks(final)
        if self.include_usage:
            frames.append(shapes.usage_chunk(self.env, final.usage))
        return frames

    @abstractmethod
    def last_chunks(self, final: Finished) -> list[bytes]: ...

    def error(self, error: APIError) -> bytes:
        return shapes.sse(error.body())

    def closing(self) -> list[bytes]:
        return [shapes.DONE]


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request, gateway: GatewayDep) -> Response:
    if (remote := await forward_remote(request, "/chat/completions")) is not None:
        return remote
    body, note = await parse(request, schemas.ChatCompletionRequest)
    plan, model = await prepare_chat(request, gateway, body, note)
    obj = "chat.completion.chunk" if body.stream else "chat.completion"
    env = shapes.Envelope("chatcmpl-", obj, model, int(time.time()))
    answer = _ChatAnswer(env, body.include_usage, plan)
    return await respond(request, gateway.submit(plan.request), answer, note, body.stream)


class _ChatAnswer(_OpenAIAnswer):
    def __init__(self, env: shapes.Envelope, include_usage: bool, plan: convert.ChatPlan) -> None:
        super().__init__(env, include_usage)
        self.forced = plan.tool_mode in ("required", "named")
        self.output = convert.chat_output(plan)

    def opening(self) -> list[bytes]:
        content = None if self.forced else ""
        return [self._chunk({"role": "assistant", "content": content, "refusal": None})]

    def delta(self, text: str) -> list[bytes]:
        return self._pieces(self.output.feed(text))

    def last_chunks(self, final: Finished) -> list[bytes]:
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
    if (remote := await forward_remote(request, "/completions")) is not None:
        return remote
    body, note = await parse(request, schemas.CompletionRequest)
    prompt = convert.check_completion(body)
    await check_constraint((body.grammar, None, "grammar"))
    model, meta = await resolve(gateway, body.model, note, body.ttl)
    engine_request = convert.completion_request(body, prompt, model, meta)
    env = shapes.Envelope("cmpl-", "text_completion", model, int(time.time()))
    answer = _CompletionAnswer(env, body.include_usage)
    return await respond(request, gateway.submit(engine_request), answer, note, body.stream)


class _CompletionAnswer(_OpenAIAnswer):
    def delta(self, text: str) -> list[bytes]:
        return [shapes.completion_chunk(self.env, text, with_usage=self.include_usage)]

    def last_chunks(self, final: Finished) -> list[bytes]:
        reason = self.reason(final)
        return [shapes.completion_chunk(self.env, "", reason, with_usage=self.include_usage)]

    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]:
        text = final.result if isinstance(final.result, str) else ""  # the prompt too, with echo
        return shapes.completion(self.env, text, self.reason(final), final.usage)


# ---- embeddings -----------------------------------------------------------------------------


@router.post("/v1/embeddings", response_model=None)
async def embeddings(request: Request, gateway: GatewayDep) -> Response:
    if (remote := await forward_remote(request, "/embeddings")) is not None:
        return remote
    body, note = await parse(request, schemas.EmbeddingRequest)
    inputs = convert.embedding_inputs(body)
    model, _meta = await resolve(gateway, body.model, note, body.ttl)
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
