"""The Ollama-compatible routes on Ember's server (the same port, security and request log as
the OpenAI routes): ``/`` and ``/api/version``, the model list and details (``/api/tags``,
``/api/show``, ``/api/ps``), answers (``/api/chat``, ``/api/generate``), embeddings
(``/api/embed``, ``/api/embeddings``). Pulling, deleting and copying are in manage.py.

Every generating request becomes the OpenAI routes' request body first (convert.py), so it
is checked, bounded and turned into an engine job by the same code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.responses import Response

from app.engine import types as engine
from app.engine.gguf import EMBEDDING_ARCHITECTURES
from app.server import convert as openai_convert
from app.server import schemas as openai_schemas
from app.server.errors import APIError
from app.server.gateway import Gateway, model_meta
from app.server.jobs import check_constraint, collect
from app.server.ollama import convert, shapes
from app.server.ollama.answers import ChatAnswer, GenerateAnswer, respond
from app.server.ollama.common import (
    Named,
    OllamaRoute,
    gateway_of,
    lookup,
    named,
    not_found,
    parse,
    require_model_name,
    resolve,
    unload,
)
from app.server.ollama.schemas import (
    ChatBody,
    EmbedBody,
    EmbeddingsBody,
    GenerateBody,
    KeepAlive,
    ModelBody,
    Options,
)
from app.server.requestlog import LogNote

# The version of Ollama's API these routes follow (clients check it before using newer fields).
OLLAMA_VERSION = "0.12.6"

router = APIRouter(route_class=OllamaRoute)


# ---- who is there ---------------------------------------------------------------------------


@router.api_route("/", methods=["GET", "HEAD"], response_model=None)
async def root() -> Response:
    return PlainTextResponse("Ollama is running")


@router.api_route("/api/version", methods=["GET", "HEAD"], response_model=None)
async def version() -> Response:
    return JSONResponse({"version": OLLAMA_VERSION})


# ---- models ---------------------------------------------------------------------------------


def _tags(gateway: Gateway) -> list[dict[str, Any]]:
    return [shapes.tag_entry(m.name, m.entry, shapes.header(m.entry.path)) for m in named(gateway)]


@router.get("/api/tags", response_model=None)
async def tags(request: Request) -> Response:
    models = await asyncio.to_thread(_tags, gateway_of(request))
    return JSONResponse({"models": models})


def _ps(gateway: Gateway) -> list[dict[str, Any]]:
    residents = {r.model.model_id: r for r in gateway.residency.snapshot()}
    seen: set[str] = set()
    out = []
    for m in named(gateway):  # a model's own name comes before its aliases
        resident = residents.get(m.loaded.model_id) if m.loaded is not None else None
        if resident is not None and resident.model.model_id not in seen:
            seen.add(resident.model.model_id)
            out.append(shapes.ps_entry(m.name, m.entry, resident, shapes.header(m.entry.path)))
    return out


@router.get("/api/ps", response_model=None)
async def ps(request: Request) -> Response:
    return JSONResponse({"models": await asyncio.to_thread(_ps, gateway_of(request))})


def _show(gateway: Gateway, name: str, verbose: bool) -> dict[str, Any] | None:
    found = lookup(gateway, name)
    if found is None:
        return None
    info = shapes.header(found.entry.path)
    embedding_only = bool(info and info.architecture in EMBEDDING_ARCHITECTURES)
    return shapes.show(
        found.name, found.entry, info, found.loaded, embedding_only=embedding_only, verbose=verbose
    )


@router.post("/api/show", response_model=None)
async def show(request: Request) -> Response:
    body, note = await parse(request, ModelBody)
    require_model_name(body.model)
    note.model = body.model
    shown = await asyncio.to_thread(_show, gateway_of(request), body.model, body.verbose)
    if shown is None:
        raise not_found(body.model)
    return JSONResponse(shown)


# ---- an empty request loads (or unloads) ----------------------------------------------------


async def _load_or_unload(
    request: Request,
    name: str,
    keep_alive: KeepAlive,
    note: LogNote,
    field: str,
    *,
    num_ctx: int | None,
) -> Response:
    """Ollama's way to load a model ahead (or, with keep_alive 0, to unload it)."""
    gateway = gateway_of(request)
    head = {"model": name, "created_at": shapes.iso()}
    empty: dict[str, Any] = (
        {"message": {"role": "assistant", "content": ""}} if field == "message" else {field: ""}
    )
    if convert.unloads(keep_alive):
        require_model_name(name)
        found: Named | None = await asyncio.to_thread(lookup, gateway, name)
        if found is None:
            raise not_found(name)
        if found.loaded is not None:
            await unload(gateway, found.loaded.model_id)
        return JSONResponse({**head, **empty, "done_reason": "unload", "done": True})
    await resolve(gateway, name, note, num_ctx, convert.keep_alive_seconds(keep_alive))
    return JSONResponse({**head, **empty, "done_reason": "load", "done": True})


def _after(request: Request, model_id: str, keep_alive: KeepAlive) -> Any:
    if not convert.unloads(keep_alive):
        return None
    gateway = gateway_of(request)

    async def unload_model() -> None:
        await unload(gateway, model_id)

    return unload_model


# ---- chat and generate ----------------------------------------------------------------------


@router.post("/api/chat", response_model=None)
async def chat(request: Request) -> Response:
    started = time.perf_counter()
    body, note = await parse(request, ChatBody)
    keep_alive = convert.keep_alive_seconds(body.keep_alive)  # a 400 before any load
    if not body.messages:
        return await _load_or_unload(
            request, body.model, body.keep_alive, note, "message", num_ctx=_num_ctx(body.options)
        )
    # off the event loop: decoding and checking 16 images' data can take a second
    openai_body = await asyncio.to_thread(convert.chat_body, body)
    openai_convert.check_chat(openai_body)
    await check_constraint(_as_format(openai_convert.chat_constraint(openai_body)))
    gateway = gateway_of(request)
    model, _entry, load_seconds = await resolve(
        gateway, body.model, note, _num_ctx(body.options), keep_alive
    )
    plan = await asyncio.to_thread(_plan_chat, openai_body, model)
    answer = ChatAnswer(body.model, started, load_seconds, plan)
    after = _after(request, model.model_id, body.keep_alive)
    stream = gateway.submit(plan.request)
    return await respond(
        request, stream, answer, note, streaming=body.stream is not False, after=after
    )


def _plan_chat(
    body: openai_schemas.ChatCompletionRequest, model: engine.LoadedModel
) -> openai_convert.ChatPlan:
    """The chat job of ``body`` (reads the model's header, may build tool grammars: off the
    event loop)."""
    return openai_convert.plan_chat(body, model, model_meta(model.path))


def _num_ctx(options: Options | None) -> int | None:
    """The context a request asks for, used when it loads the model (as Ollama does)."""
    return options.num_ctx if options is not None else None


def _as_format(constraint: openai_convert.Constraint) -> openai_convert.Constraint:
    grammar, schema, param = constraint
    return grammar, schema, "format" if param == "response_format" else param


@router.post("/api/generate", response_model=None)
async def generate(request: Request) -> Response:
    started = time.perf_counter()
    body, note = await parse(request, GenerateBody)
    keep_alive = convert.keep_alive_seconds(body.keep_alive)
    convert.check_generate(body)
    if not body.prompt and body.suffix is None:
        return await _load_or_unload(
            request, body.model, body.keep_alive, note, "response", num_ctx=_num_ctx(body.options)
        )
    gateway = gateway_of(request)
    streaming = body.stream is not False
    if body.raw or body.suffix is not None:
        completion = convert.generate_completion_body(body)
        prompt = openai_convert.check_completion(completion)
        grammar, schema = convert.completion_format(body.format)
        await check_constraint((grammar, schema, "format"))
        model, _entry, load_seconds = await resolve(
            gateway, body.model, note, _num_ctx(body.options), keep_alive
        )
        meta = await asyncio.to_thread(model_meta, model.path)
        job = openai_convert.completion_request(completion, prompt, model, meta)
        # Ollama generates until the context is full unless num_predict says otherwise
        job.sampling = dataclasses.replace(
            job.sampling, max_tokens=completion.max_tokens, grammar=grammar, json_schema=schema
        )
        answer = GenerateAnswer(body.model, started, load_seconds, None)
        request_: engine.Request = job
    else:
        openai_body = await asyncio.to_thread(convert.generate_chat_body, body)
        openai_convert.check_chat(openai_body)
        await check_constraint(_as_format(openai_convert.chat_constraint(openai_body)))
        model, _entry, load_seconds = await resolve(
            gateway, body.model, note, _num_ctx(body.options), keep_alive
        )
        plan = await asyncio.to_thread(_plan_chat, openai_body, model)
        answer = GenerateAnswer(body.model, started, load_seconds, plan)
        request_ = plan.request
    after = _after(request, model.model_id, body.keep_alive)
    stream = gateway.submit(request_)
    return await respond(request, stream, answer, note, streaming=streaming, after=after)


# ---- embeddings -----------------------------------------------------------------------------


async def _embed(
    request: Request, name: str, inputs: list[str], note: LogNote, keep_alive: float | None
) -> tuple[list[list[float]], engine.Finished, float]:
    texts = openai_convert.embedding_inputs(
        openai_schemas.EmbeddingRequest(input=inputs, model=name)
    )
    gateway = gateway_of(request)
    model, _entry, load_seconds = await resolve(gateway, name, note, None, keep_alive)
    stream = gateway.submit(engine.EmbeddingRequest(texts, model.model_id))
    _texts, final = await collect(stream, request)
    note.prompt_tokens = final.usage.prompt_tokens
    return final.result, final, load_seconds


def _shorten(vectors: list[list[float]], dimensions: int | None) -> list[list[float]]:
    """Keep the first ``dimensions`` of each vector, normalized again (as Ollama does)."""
    if dimensions is None or not vectors or dimensions == len(vectors[0]):
        return vectors
    if dimensions > len(vectors[0]):
        raise APIError(
            400,
            f"This model's embeddings have {len(vectors[0])} dimensions; 'dimensions' can "
            "only ask for fewer.",
            param="dimensions",
        )
    out = []
    for v in vectors:
        cut = v[:dimensions]
        norm = math.sqrt(sum(x * x for x in cut)) or 1.0
        out.append([x / norm for x in cut])
    return out


@router.post("/api/embed", response_model=None)
async def embed(request: Request) -> Response:
    started = time.perf_counter()
    body, note = await parse(request, EmbedBody)
    keep_alive = convert.keep_alive_seconds(body.keep_alive)
    inputs = [body.input] if isinstance(body.input, str) else list(body.input or [])
    if not inputs:
        await resolve(gateway_of(request), body.model, note, None, keep_alive)
        return JSONResponse({"model": body.model, "embeddings": []})
    require_model_name(body.model)
    vectors, final, load_seconds = await _embed(request, body.model, inputs, note, keep_alive)
    return JSONResponse(
        {
            "model": body.model,
            "embeddings": _shorten(vectors, body.dimensions),
            "total_duration": shapes.ns(time.perf_counter() - started),
            "load_duration": shapes.ns(load_seconds),
            "prompt_eval_count": final.usage.prompt_tokens,
        }
    )


@router.post("/api/embeddings", response_model=None)
async def embeddings(request: Request) -> Response:
    body, note = await parse(request, EmbeddingsBody)
    keep_alive = convert.keep_alive_seconds(body.keep_alive)
    if not body.prompt:
        await resolve(gateway_of(request), body.model, note, None, keep_alive)
        return JSONResponse({"embedding": []})
    require_model_name(body.model)
    vectors, _final, _load = await _embed(request, body.model, [body.prompt], note, keep_alive)
    return JSONResponse({"embedding": vectors[0]})
