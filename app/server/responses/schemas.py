"""The body of ``POST /v1/responses`` (pydantic): input items, tools, text format, reasoning.

As in app/server/schemas.py, unknown fields are ignored and optional fields accept ``null``.
An input item is told by its ``type`` (a ``role`` without a ``type`` is a message, as OpenAI
reads it); a type this server cannot use is a 400 that names the ones it takes. Output items
of an earlier response (an assistant ``message`` with ``output_text``, ``function_call``,
``reasoning``) are input items too: a client that resends a conversation sends them back.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator

from app.server.schemas import TTL, OpenAIBody, Prediction

RESPONSE_ID = re.compile(r"resp_[A-Za-z0-9]{1,64}")
MAX_NAME_CHARS = 256  # function names and call ids


# ---- content parts --------------------------------------------------------------------------


class InputText(OpenAIBody):
    type: Literal["input_text"]
    text: str


class OutputText(OpenAIBody):
    type: Literal["output_text"]
    text: str


class Refusal(OpenAIBody):
    type: Literal["refusal"]
    refusal: str


class InputImage(OpenAIBody):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["low", "high", "auto", "original"] | None = None


def _part_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in ("input_text", "output_text", "refusal", "input_image") else None


Part = Annotated[
    Annotated[InputText, Tag("input_text")]
    | Annotated[OutputText, Tag("output_text")]
    | Annotated[Refusal, Tag("refusal")]
    | Annotated[InputImage, Tag("input_image")],
    Discriminator(
        _part_tag,
        custom_error_type="invalid_part",
        custom_error_message=(
            "content parts of this type are not supported; this server takes input_text, "
            "input_image (a data or http(s) URL), output_text and refusal parts"
        ),
    ),
]


def _text_tag(value: Any) -> str:
    return "text" if isinstance(value, str) else "items"


# a string or a list: a bad list's errors name its part, not "should be a valid string"
TextOrParts = Annotated[
    Annotated[str, Tag("text")] | Annotated[list[Part], Tag("items")], Discriminator(_text_tag)
]


# ---- items ----------------------------------------------------------------------------------


class MessageItem(OpenAIBody):
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: TextOrParts
    id: str | None = None
    status: str | None = None


class FunctionCallItem(OpenAIBody):
    type: Literal["function_call"]
    call_id: str = Field(max_length=MAX_NAME_CHARS)
    name: str = Field(max_length=MAX_NAME_CHARS)
    arguments: str = ""
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(OpenAIBody):
    type: Literal["function_call_output"]
    call_id: str = Field(max_length=MAX_NAME_CHARS)
    output: TextOrParts
    id: str | None = None
    status: str | None = None


class ReasoningItem(OpenAIBody):
    """Accepted so a conversation can be resent as it came back; not rendered into the prompt
    (as chat completions' ``reasoning_content`` is not)."""

    type: Literal["reasoning"]
    id: str | None = None
    summary: list[dict[str, Any]] = Field(default_factory=list)
    content: list[dict[str, Any]] | None = None
    encrypted_content: str | None = None
    status: str | None = None


ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")


def _item_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type", "message" if "role" in value else None)
    else:
        kind = getattr(value, "type", None)
    return kind if kind in ITEM_TYPES else None


Item = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(
        _item_tag,
        custom_error_type="invalid_item",
        custom_error_message=(
            "input items of this type are not supported; this server takes 'message', "
            "'function_call', 'function_call_output' and 'reasoning' items (an "
            "'item_reference' cannot be followed: send the item, or use previous_response_id)"
        ),
    ),
]


# ---- tools, formats, reasoning --------------------------------------------------------------


class FunctionTool(OpenAIBody):
    type: Literal["function"]
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionChoice(OpenAIBody):
    type: Literal["function"]
    name: str


class TextFormatText(OpenAIBody):
    type: Literal["text"]


class TextFormatJsonObject(OpenAIBody):
    type: Literal["json_object"]


class TextFormatJsonSchema(OpenAIBody):
    type: Literal["json_schema"]
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", min_length=1)
    strict: bool | None = None


TextFormat = Annotated[
    TextFormatText | TextFormatJsonObject | TextFormatJsonSchema, Field(discriminator="type")
]


class TextConfig(OpenAIBody):
    format: TextFormat | None = None
    verbosity: str | None = None


class ReasoningConfig(OpenAIBody):
    effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    summary: str | None = None


# ---- the body -------------------------------------------------------------------------------


Input = Annotated[
    Annotated[str, Tag("text")] | Annotated[list[Item], Field(min_length=1), Tag("items")],
    Discriminator(_text_tag),
]
TAGS = frozenset(
    {"text", "items", *ITEM_TYPES, "input_text", "output_text", "refusal", "input_image"}
)


def without_tags(errors: list[Any]) -> list[Any]:
    """Validation errors with the union tags above taken out of each location, so a param
    reads ``input[0].content[1]``, as the client wrote it."""
    return [{**e, "loc": tuple(p for p in e["loc"] if p not in TAGS)} for e in errors]


class ResponsesRequest(OpenAIBody):
    model: str | None = None
    ttl: TTL = None
    input: Input
    instructions: str | None = None
    previous_response_id: str | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | FunctionChoice | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    stream: bool | None = None
    store: bool | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    include: list[str] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    max_tool_calls: int | None = Field(default=None, ge=1)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    background: bool | None = None
    conversation: str | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    # not OpenAI's Responses, but chat completions' and llama-server's: passed to the chat body
    seed: int | None = None
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    # chat completions' predicted output (the text the answer is expected to largely be)
    prediction: Prediction | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _function_tools(cls, v: Any) -> Any:
        for i, tool in enumerate(v if isinstance(v, list) else []):
            kind = tool.get("type") if isinstance(tool, dict) else None
            if kind != "function":
                shown = str(kind)[:40]
                raise ValueError(
                    f"tool {i} is of type '{shown}'; this server runs no tools itself and takes "
                    "only 'function' tools (your program runs them and sends "
                    "function_call_output items back)"
                )
        return v

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is not None and (
            len(v) > 16 or any(len(k) > 64 or len(val) > 512 for k, val in v.items())
        ):
            raise ValueError("at most 16 pairs, keys up to 64 and values up to 512 characters")
        return v

    @field_validator("previous_response_id")
    @classmethod
    def _response_id(cls, v: str | None) -> str | None:
        if v is not None and not RESPONSE_ID.fullmatch(v):
            raise ValueError("not a response id; ids look like 'resp_' and letters and digits")
        return v

    @property
    def storing(self) -> bool:
        return self.store is not False  # OpenAI's default: stored

    def items(self) -> list[Item]:
        if isinstance(self.input, str):
            return [
                MessageItem(role="user", content=[InputText(type="input_text", text=self.input)])
            ]
        return list(self.input)
