"""Chat templates: the model's own Jinja template, rendered in a sandbox, or a plain fallback.

Templates come from model files downloaded from the internet, so they run in Jinja's
``ImmutableSandboxedEnvironment``: no attribute access to Python internals, no mutation of
the objects passed in.

Fallback (a model without ``tokenizer.chat_template``, typically a base model): a plain-text
transcript that base models continue naturally::

    <system prompt>

    User: <message>
    Assistant: <answer>
    User: <message>
    Assistant:

with the stop strings ``"\\nUser:"`` and ``"\\nAssistant:"``: a model without a template
(often a base model) would otherwise go on writing the next turns of the transcript itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.types import BadRequestError, ChatMessage

FALLBACK_STOP = ("\nUser:", "\nAssistant:")


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    text: str
    stop: tuple[str, ...]  # stop strings implied by the template (fallback only)
    uses_fallback: bool


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    # HF's transformers renders tojson without HTML escaping; templates rely on that.
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _make_env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols"],
        autoescape=False,
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


_ENV = _make_env()


class ChatTemplate:
    """Renders OpenAI-style message lists into a prompt string for one model."""

    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "") -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._template = None
        if source:
            try:
                self._template = _ENV.from_string(source)
            except TemplateError as e:
                raise BadRequestError(f"The model's chat template does not compile: {e}") from e

    @property
    def uses_fallback(self) -> bool:
        return self._template is None

    def render(
        self,
        messages: list[ChatMessage],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> RenderedPrompt:
        if not messages:
            raise BadRequestError("A chat request needs at least one message.")
        if self._template is None:
            return RenderedPrompt(_fallback(messages, add_generation_prompt), FALLBACK_STOP, True)
        try:
            text = self._template.render(
                messages=[dict(m) for m in messages],
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                tools=tools,
            )
        except TemplateError as e:
            raise BadRequestError(f"The model's chat template rejected the messages: {e}") from e
        return RenderedPrompt(text, (), False)


def _fallback(messages: list[ChatMessage], add_generation_prompt: bool) -> str:
    parts: list[str] = []
    for m in messages:
        content = (m.get("content") or "").strip()
        role = m.get("role", "user")
        if role == "system":
            if content:
                parts.append(f"{content}\n\n")
        elif role == "assistant":
            parts.append(f"Assistant: {content}\n")
        elif role == "tool":
            parts.append(f"Tool result: {content}\n")
        else:
            parts.append(f"User: {content}\n")
    if add_generation_prompt:
        parts.append("Assistant:")
    return "".join(parts)
