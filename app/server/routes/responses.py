"""OpenAI's Responses API: ``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``,
``GET /v1/responses/{id}/input_items``.

A thin adapter (app/server/responses/): the body and the stored conversation of
``previous_response_id`` become the chat body (``translate``), which takes the steps every
generating route takes (app/server/answering.py: checks, model, plan, the stream loop), and the
answer is written as the Responses API writes it (``answer``). Errors have OpenAI's shape, as
on the other OpenAI routes. Models of remote providers (``provider::model``) are refused: their
responses would be stored here while the provider answered them.
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError
from starlette.responses import Response

from app.server import convert
from app.server.answering import prepare_chat, respond
from app.server.errors import APIError, from_validation_errors
from app.server.gateway import Gateway
from app.server.requestlog import LogNote, note_of
from app.server.responses import translate
from app.server.responses.answer import ResponsesAnswer
from app.server.responses.schemas import RESPONSE_ID, Item, ResponsesRequest, without_tags
from app.server.responses.shapes import ResponseMeta, new_id
from app.server.responses.store import (
    ConversationTooLargeError,
    MissingResponseError,
    ResponseKeeper,
)

router = APIRouter()

_ITEMS = TypeAdapter(list[Item])
_ID_PREFIX = {
    "message": "msg_",
    "function_call": "fc_",
    "function_call_output": "fco_",
    "reasoning": "rs_",
}


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def _keeper(request: Request) -> ResponseKeeper:
    keeper: ResponseKeeper = request.app.state.responses
    return keeper


GatewayDep = Annotated[Gateway, Depends(_gateway)]
KeeperDep = Annotated[ResponseKeeper, Depends(_keeper)]


@router.post("/v1/responses", response_model=None)
async def create_response(request: Request, gateway: GatewayDep, keeper: KeeperDep) -> Response:
    body, note = await _parse(request)
    translate.check_request(body)
    items = body.items()
    history = await _conversation(keeper, body.previous_response_id)
    chat_body = translate.chat_body(body, history, items)
    try:
        plan, model = await prepare_chat(request, gateway, chat_body, note)
    except APIError as e:
        raise translate.as_responses_error(e) from None
    save = None
    if body.storing:
        stored_input = [_stored(item) for item in items]

        def save(response: dict[str, Any]) -> None:
            keeper.save_soon(body.previous_response_id, stored_input, response)

    answer = ResponsesAnswer(ResponseMeta(model.model_id, body), convert.chat_output(plan), save)
    try:
        return await respond(request, gateway.submit(plan.request), answer, note, body.stream)
    except APIError as e:  # before the headers: a context overflow names the input
        raise translate.as_responses_error(e) from None


@router.get("/v1/responses/{response_id}", response_model=None)
async def get_response(response_id: str, keeper: KeeperDep) -> Response:
    response = await _read(keeper, keeper.store.get, response_id)
    return JSONResponse(response)


@router.delete("/v1/responses/{response_id}", response_model=None)
async def delete_response(response_id: str, keeper: KeeperDep) -> Response:
    if not await keeper.run(keeper.store.delete, _checked(response_id)):
        raise _not_found(response_id)
    return JSONResponse({"id": response_id, "object": "response", "deleted": True})


@router.get("/v1/responses/{response_id}/input_items", response_model=None)
async def list_input_items(
    response_id: str,
    keeper: KeeperDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Literal["asc", "desc"] = "desc",
    after: str | None = None,
) -> Response:
    items: list[dict[str, Any]] = await _read(keeper, keeper.store.input_items, response_id)
    if order == "desc":
        items.reverse()
    if after is not None:
        at = next((i for i, item in enumerate(items) if item.get("id") == after), None)
        if at is None:
            raise APIError(
                400, f"No input item with id '{after[:80]}' in this response.", param="after"
            )
        items = items[at + 1 :]
    page = items[:limit]
    return JSONResponse(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )


async def _parse(request: Request) -> tuple[ResponsesRequest, LogNote]:
    """As answering.parse, with the union tags taken out of an error's parameter."""
    try:
        body = ResponsesRequest.model_validate_json(await request.body())
    except ValidationError as e:
        raise from_validation_errors(without_tags(e.errors(include_url=False))) from None
    note = note_of(request.scope)
    note.stream = bool(body.stream)
    return body, note


# ---- the store ------------------------------------------------------------------------------


async def _conversation(keeper: ResponseKeeper, previous_id: str | None) -> list[Item]:
    if previous_id is None:
        return []
    try:
        items = await keeper.run(keeper.store.conversation, previous_id)
    except MissingResponseError as e:
        if e.response_id == previous_id:
            raise _not_found(previous_id, param="previous_response_id") from None
        raise APIError(
            404,
            f"The conversation of '{previous_id}' cannot be continued: an earlier response of "
            f"it, '{e.response_id}', is no longer stored (deleted, expired or pruned). Send the "
            "conversation's items as input instead.",
            param="previous_response_id",
            code="previous_response_not_found",
        ) from None
    except ConversationTooLargeError:
        raise APIError(
            400,
            f"The conversation of '{previous_id}' is too large to continue here; start a new "
            "one with the items that matter.",
            param="previous_response_id",
        ) from None
    except sqlite3.Error as e:
        raise _unreadable(e) from None
    try:
        return _ITEMS.validate_python(items)
    except ValidationError:  # written by an older or newer Ember
        raise APIError(
            400,
            f"The stored conversation of '{previous_id}' cannot be read by this version of "
            "Ember; send the conversation's items as input instead.",
            param="previous_response_id",
        ) from None


async def _read(keeper: ResponseKeeper, fn: Any, response_id: str) -> Any:
    try:
        found = await keeper.run(fn, _checked(response_id))
    except sqlite3.Error as e:
        raise _unreadable(e) from None
    if found is None:
        raise _not_found(response_id)
    return found


def _checked(response_id: str) -> str:
    if not RESPONSE_ID.fullmatch(response_id):
        raise APIError(
            400,
            "Invalid 'response_id': not a response id. Ids look like 'resp_' followed by "
            "letters and digits, as /v1/responses returns them.",
            param="response_id",
            code="invalid_value",
        )
    return response_id


def _not_found(response_id: str, param: str | None = None) -> APIError:
    return APIError(
        404,
        f"Response with id '{response_id}' not found: it was never stored here (store: false), "
        "was deleted, or has expired.",
        param=param,
        code="response_not_found" if param is None else "previous_response_not_found",
    )


def _unreadable(error: sqlite3.Error) -> APIError:
    return APIError(
        503,
        f"The stored responses cannot be read right now ({error}); try again.",
        code="store_unavailable",
        type="server_error",
        headers={"Retry-After": "2"},
    )


def _stored(item: Item) -> dict[str, Any]:
    """An input item as it is stored and listed, as OpenAI lists them: with an id, and a
    message's text as a part."""
    data = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    if data["type"] == "message" and isinstance(data["content"], str):  # the same text
        kind = "output_text" if data["role"] == "assistant" else "input_text"
        data["content"] = [{"type": kind, "text": data["content"]}]
    if "id" not in data:
        data["id"] = new_id(_ID_PREFIX.get(data["type"], "item_"))
    return data
