"""Request bodies of the Anthropic Messages API (pydantic), as Anthropic documents them.

Unknown fields are ignored (``cache_control``, ``citations``, ``service_tier``, ``container``:
clients send them, a local model has no use for them). Content blocks are told apart by their
``type``; a type a local model cannot take (``document``, server tools) is refused with a 400
that says what to send instead. The sampling values are checked again with the OpenAI routes'
bounds when the body becomes a chat body (:mod:`app.server.anthropic.convert`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.server.schemas import TTL

MAX_STOP_SEQUENCES = 16  # the engine's limit (the OpenAI routes' too)
MAX_STOP_CHARS = 1000  # a stop string is matched against every token: kept short
TOOL_NAME = r"^[A-Za-z0-9_\-]{1,128}$"
INT32 = 2**31 - 1


class _Body(BaseModel):
    # NaN and Infinity are numbers to no parameter here
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


# ---- content blocks -------------------------------------------------------------------------


class TextBlock(_Body):
    type: Literal["text"]
    text: str


class Base64Source(_Body):
    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str


class URLSource(_Body):
    type: Literal["url"]
    url: str


class ImageBlock(_Body):
    type: Literal["image"]
    source: Annotated[Base64Source | URLSource, Field(discriminator="type")]


class ToolUseBlock(_Body):
    type: Literal["tool_use"]
    id: str = Field(min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=128)
    input: dict[str, Any]


ResultPart = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


class ToolResultBlock(_Body):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1, max_length=256)
    content: str | list[ResultPart] | None = None
    is_error: bool | None = None


class ThinkingBlock(_Body):
    """Earlier thinking, sent back by clients: not shown to the model again (as Anthropic
    drops it from earlier turns too)."""

    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(_Body):
    type: Literal["redacted_thinking"]
    data: str


Block = Annotated[
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class Message(_Body):
    role: Literal["user", "assistant"]
    content: str | list[Block]


# ---- tools ----------------------------------------------------------------------------------


class Tool(_Body):
    name: str = Field(pattern=TOOL_NAME)
    description: str | None = None
    input_schema: dict[str, Any]
    type: Literal["custom"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _client_tool(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind not in (None, "custom"):
            shown = str(kind)[:60]
            raise ValueError(
                f"tools of type '{shown}' run on Anthropic's servers, and a local model cannot "
                "use them: define the tools your client runs itself, with 'name', "
                "'description' and 'input_schema'"
            )
        return data

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        if v.get("type", "object") != "object":
            raise ValueError("a tool's input_schema must be a JSON schema of type 'object'")
        return v


class _Choice(_Body):
    disable_parallel_tool_use: bool | None = None


class AutoChoice(_Choice):
    type: Literal["auto"]


class AnyChoice(_Choice):
    type: Literal["any"]


class ToolChoiceByName(_Choice):
    type: Literal["tool"]
    name: str = Field(min_length=1, max_length=128)


class NoneChoice(_Body):
    type: Literal["none"]


ToolChoice = Annotated[
    AutoChoice | AnyChoice | ToolChoiceByName | NoneChoice, Field(discriminator="type")
]


# ---- thinking -------------------------------------------------------------------------------


class ThinkingEnabled(_Body):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1, le=INT32)


class ThinkingDisabled(_Body):
    type: Literal["disabled"]


class ThinkingAdaptive(_Body):
    """The model decides (``adaptive``, ``between_tools``): the model's own default here."""

    type: Literal["adaptive", "between_tools"]
    display: Literal["summarized", "omitted"] | None = None


Thinking = Annotated[
    ThinkingEnabled | ThinkingDisabled | ThinkingAdaptive, Field(discriminator="type")
]


class JSONOutputFormat(_Body):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Body):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JSONOutputFormat | None = None


# ---- requests -------------------------------------------------------------------------------


class Metadata(_Body):
    user_id: str | None = None


class CountTokensRequest(_Body):
    model: str
    ttl: TTL = None
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(ge=1, le=INT32)
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0, le=INT32)
    metadata: Metadata | None = None
    stream: bool | None = None

    @field_validator("stop_sequences")
    @classmethod
    def _stops(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if len(v) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences are supported")
        if any(len(s) > MAX_STOP_CHARS for s in v):
            raise ValueError(f"a stop sequence is at most {MAX_STOP_CHARS} characters")
        return [s for s in v if s]
