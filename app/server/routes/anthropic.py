"""The Anthropic Messages routes: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

An adapter, as every protocol is (app/server/answering.py): parse the Anthropic body (a 400
in Anthropic's shape on any problem), map the model name through the user's aliases, turn the
body into the one chat body (app/server/anthropic/convert.py), plan it with the shared steps,
submit one job, and write the answer as Anthropic's message or events
(app/server/anthropic/answer.py). Errors are Anthropic's (app/server/anthropic/errors.py); a
Claude model name that is neither a local model nor an alias gets a 404 saying how to set one.
The key may come as ``x-api-key`` or as a Bearer token; ``anthropic-version`` and
``anthropic-beta`` are accepted and not needed.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from app.engine import types as engine
from app.engine.provider_ids import is_remote_id
from app.server import convert, schemas
from app.server.aliases import resolve_alias
from app.server.answering import parse, prepare_chat, respond
from app.server.anthropic import convert as anthropic_convert
from app.server.anthropic import schemas as anthropic
from app.server.anthropic.answer import MessagesAnswer
from app.server.anthropic.errors import AnthropicRoute
from app.server.errors import APIError
from app.server.gateway import Gateway
from app.server.jobs import collect
from app.server.requestlog import LogNote

router = APIRouter(route_class=AnthropicRoute)


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


@router.post("/v1/messages", response_model=None)
async def messages(request: Request) -> Response:
    body, note = await parse(request, anthropic.MessagesRequest)
    gateway = _gateway(request)
    plan, _model = await _prepare(request, gateway, body, note, stream=bool(body.stream))
    answer = MessagesAnswer(body.model, plan, body.stop_sequences or [])
    return await respond(request, gateway.submit(plan.request), answer, note, body.stream)


@router.post("/v1/messages/count_tokens", response_model=None)
async def count_tokens(request: Request) -> Response:
    """The prompt's tokens as the model's template and tokenizer make them (the tools and
    system prompt included), without generating."""
    body, note = await parse(request, anthropic.CountTokensRequest)
    gateway = _gateway(request)
    plan, model = await _prepare(request, gateway, body, note, stream=False)
    rendered = gateway.submit(engine.RenderPromptRequest(plan.request))
    _texts, final = await collect(rendered, request)
    tokenized = gateway.submit(engine.TokenizeRequest(str(final.result), model.model_id))
    _texts, counted = await collect(tokenized, request)
    return JSONResponse({"input_tokens": counted.usage.prompt_tokens})


async def _prepare(
    request: Request,
    gateway: Gateway,
    body: anthropic.CountTokensRequest,
    note: LogNote,
    *,
    stream: bool,
) -> tuple[convert.ChatPlan, engine.LoadedModel]:
    name = resolve_alias(body.model, request.app.state.config.model_aliases)
    if is_remote_id(name):
        raise APIError(
            400,
            f"`{name}` is a remote provider's model: Ember forwards those on /v1/chat/completions "
            "only. Use a local model here.",
            param="model",
        )
    # off the event loop: a body may carry 16 images' data
    chat: schemas.ChatCompletionRequest = await asyncio.to_thread(
        anthropic_convert.chat_body, body, name, stream=stream
    )
    try:
        return await prepare_chat(request, gateway, chat, note)
    except APIError as e:
        if e.status == 404 and e.code == "model_not_found":
            raise model_not_found(body.model, name) from None
        raise


def model_not_found(sent: str, name: str) -> APIError:
    shown = sent if sent == name else f"{sent}` (an alias of `{name}`"
    if sent.strip().lower().startswith("claude") and sent == name:
        head = f"There is no model `{sent}` here: Ember runs local models, not Claude."
    else:
        head = f"The model `{shown}` does not exist or is not in Ember's library."
    return APIError(
        404,
        f"{head} Set the model to one of the ids GET /v1/models lists (Claude Code: "
        "ANTHROPIC_MODEL or /model), or map this name to a local model under Settings > Server "
        f"> Model aliases (or `ember serve --alias {sent}=MODEL`).",
        code="model_not_found",
        param="model",
    )
