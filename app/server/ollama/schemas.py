"""Request bodies of the Ollama-compatible API (pydantic).

Field names and defaults follow Ollama's API (``stream`` is true unless false); unknown fields
and unknown ``options`` are ignored, as Ollama ignores them. The sampling options are checked
again, with the OpenAI routes' bounds, when they become an OpenAI request
(:mod:`app.server.ollama.convert`): one set of limits for everything that reaches llama.cpp.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

# seconds or a duration ("5m"); strict: ``true`` is no number of seconds (app/engine/durations.py
# reads the value)
KeepAlive = StrictFloat | StrictInt | StrictStr | None
Format = Literal["", "json"] | dict[str, Any] | None
INT32 = 2**31 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Options(_Body):
    """The options Ember uses; load-time ones (num_gpu, num_thread, ...) are ignored: models
    are loaded with the settings of the server or the app."""

    num_ctx: int | None = Field(default=None, ge=1, le=INT32)
    num_predict: int | None = Field(default=None, ge=-2, le=INT32)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    typical_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)  # Go's int64
    stop: list[str] | None = None
    mirostat: int | None = None
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None


class ToolCallFunction(_Body):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolCall(_Body):
    function: ToolCallFunction


class Message(_Body):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = ""  # null as Go reads it: ""
    images: list[str] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = None
    thinking: str | None = None


class _Named(_Body):
    """``model``, or ``name`` as older clients send it."""

    model: str = ""
    name: str = ""

    @model_validator(mode="after")
    def _name_is_model(self) -> _Named:
        if not self.model and self.name:
            self.model = self.name
        return self


class _Generating(_Named):
    stream: bool | None = True
    format: Format = None
    options: Options | None = None
    keep_alive: KeepAlive = None
    think: bool | str | None = None


class ChatBody(_Generating):
    messages: list[Message] | None = None
    tools: list[dict[str, Any]] | None = None


class GenerateBody(_Generating):
    prompt: str | None = None
    suffix: str | None = None
    system: str | None = None
    template: str | None = None
    context: list[int] | None = None
    raw: bool | None = False
    images: list[str] | None = None


class EmbedBody(_Named):
    input: str | list[str] | None = None
    truncate: bool = True
    options: Options | None = None
    keep_alive: KeepAlive = None
    dimensions: int | None = Field(default=None, ge=1, le=INT32)


class EmbeddingsBody(_Named):
    prompt: str | None = None
    options: Options | None = None
    keep_alive: KeepAlive = None


class ModelBody(_Named):
    """``/api/show``, ``/api/delete``."""

    verbose: bool = False


class PullBody(_Named):
    stream: bool | None = True
    insecure: bool = False


class CopyBody(_Body):
    source: str
    destination: str
