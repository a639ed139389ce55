"""Request bodies of the OpenAI-compatible API (pydantic).

Unknown fields are ignored (clients send vendor extras); optional fields accept ``null``
(clients send it for "not set"). Ranges follow OpenAI's; checks that need the model (token ids
below the vocabulary size, FIM support) happen in the routes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from app.engine import durations
from app.engine.media import MEDIA_MARKER

TOKEN_ID = re.compile(r"[0-9]{1,10}")


def _ttl(value: object) -> float | None:
    try:
        return durations.seconds_of(value)
    except durations.DurationError as e:
        raise ValueError(
            f"{e} It is how long a model loaded for this request stays loaded unused "
            "(0: unload it after the answer, -1: keep it)."
        ) from None


# LM Studio's ``ttl``: seconds a model loaded just in time stays loaded unused (a duration
# such as "5m" is taken too); 0 unloads it after the answer, negative keeps it loaded.
TTL = Annotated[float | None, BeforeValidator(_ttl)]


class OpenAIBody(BaseModel):
    # NaN and Infinity (which Python's JSON writes) are numbers to no parameter here
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


# ---- messages -------------------------------------------------------------------------------


class ImageURL(OpenAIBody):
    url: str
    detail: str | None = None


class ContentPart(OpenAIBody):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None
    image_url: ImageURL | None = None
    # the image's bytes once app.server.images decoded the data URL (not part of the body)
    _image: bytes | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _known_part(self) -> ContentPart:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part needs 'text'")
        if self.type == "image_url" and self.image_url is None:
            raise ValueError("an image_url part needs 'image_url' with a 'url'")
        if self.type not in ("text", "refusal", "image_url"):
            raise ValueError(
                f"content parts of type '{self.type}' are not supported; this server takes "
                "text and image_url parts"
            )
        return self


class FunctionCall(OpenAIBody):
    name: str
    arguments: str = ""


class ToolCall(OpenAIBody):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(OpenAIBody):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _content_present(self) -> Message:
        if self.content is None and self.role != "assistant":
            raise ValueError(f"a '{self.role}' message needs 'content'")
        if self.role == "assistant" and self.content is None and not self.tool_calls:
            raise ValueError("an 'assistant' message needs 'content' or 'tool_calls'")
        return self

    def text(self) -> str | None:
        """The message's text, with a media marker where each image part goes (a marker the
        client typed is removed: only images place them)."""
        if self.content is None or isinstance(self.content, str):
            return self.content and self.content.replace(MEDIA_MARKER, "")
        return "".join(
            MEDIA_MARKER if p.type == "image_url" else (p.text or "").replace(MEDIA_MARKER, "")
            for p in self.content
        )


# ---- tools ----------------------------------------------------------------------------------


class FunctionDef(OpenAIBody):
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,128}$")  # Anthropic allows 128 too
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(OpenAIBody):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(OpenAIBody):
    name: str


class NamedToolChoice(OpenAIBody):
    type: Literal["function"]
    function: NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


# ---- response formats -----------------------------------------------------------------------


class TextFormat(OpenAIBody):
    type: Literal["text"]


class JsonObjectFormat(OpenAIBody):
    type: Literal["json_object"]


class JsonSchemaSpec(OpenAIBody):
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: bool | None = None


class JsonSchemaFormat(OpenAIBody):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[
    TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")
]


class StreamOptions(OpenAIBody):
    include_usage: bool | None = None


# ---- sampling shared by chat and completions ------------------------------------------------


class SamplingBody(OpenAIBody):
    model: str | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    ttl: TTL = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    n: int | None = Field(default=None, ge=1, le=128)
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    # llama.cpp's samplers (llama-server's names)
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0, le=1)
    typical_p: float | None = Field(default=None, ge=0, le=1)
    repeat_penalty: float | None = Field(default=None, ge=0)
    repeat_last_n: int | None = Field(default=None, ge=-1)
    mirostat: int | None = Field(default=None, ge=0, le=2)
    mirostat_mode: int | None = Field(default=None, ge=0, le=2)
    mirostat_tau: float | None = Field(default=None, ge=0)
    mirostat_eta: float | None = Field(default=None, ge=0)
    grammar: str | None = None  # GBNF

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and len(v) > 16:
            raise ValueError("at most 16 stop sequences are supported")
        return v

    @field_validator("logit_bias")
    @classmethod
    def _bias(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for key, value in (v or {}).items():
            # ASCII digits only: str.isdigit() takes "²", which int() refuses; 10 digits
            # cover any vocabulary, and int() refuses over 4,300 of them
            if not TOKEN_ID.fullmatch(key):
                shown = key if len(key) <= 20 else key[:20] + "…"
                raise ValueError(f"keys must be token ids (non-negative integers), not {shown!r}")
            if not -100 <= value <= 100:
                raise ValueError(f"values must be between -100 and 100, not {value} for {key}")
        return v

    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


MAX_PREDICTION_PARTS = 1024


class Prediction(OpenAIBody):
    """OpenAI's predicted output: text the answer is expected to largely be (a file an
    editor asks back with a change); it speeds the answer up, never changes it."""

    type: Literal["content"]
    content: str | list[ContentPart]

    @field_validator("content", mode="before")
    @classmethod
    def _few_parts(cls, v: Any) -> Any:
        if isinstance(v, list) and len(v) > MAX_PREDICTION_PARTS:  # before each is validated
            raise ValueError(f"at most {MAX_PREDICTION_PARTS} parts; send the text as one string")
        return v

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text or "" for p in self.content if p.type == "text")


class ChatCompletionRequest(SamplingBody):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    # at most this many tokens of thinking, then the answer (llama-server's name)
    thinking_budget_tokens: int | None = Field(default=None, ge=0)
    prediction: Prediction | None = None


class CompletionRequest(SamplingBody):
    prompt: str | list[str] | list[int] | list[list[int]]
    suffix: str | None = None
    echo: bool | None = None
    best_of: int | None = Field(default=None, ge=1)
    logprobs: int | None = Field(default=None, ge=0, le=5)


class EmbeddingRequest(OpenAIBody):
    input: str | list[str] | list[int] | list[list[int]]
    model: str | None = None
    encoding_format: Literal["float", "base64"] | None = None
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None
    ttl: TTL = None


class LoadModelRequest(OpenAIBody):
    """``POST /v1/models/load``: load a library model now (as a request naming it would)."""

    model: str = Field(min_length=1, max_length=1024)
    context_length: int | None = Field(default=None, ge=1, le=1 << 24)
    # load even if the estimate says it does not fit (the app's Load anyway, --force)
    force: bool = False
    ttl: TTL = None
