"""Chat templates: the model's own Jinja template, rendered in a sandbox, or a plain fallback.

Templates come from model files downloaded from the internet, so they run in Jinja's
``ImmutableSandboxedEnvironment`` (no attribute access to Python internals, no mutation of
the objects passed in) with a budget per render (``app.engine.template_sandbox``: loop
steps, time, sizes, depth). Whatever goes wrong in a template, over budget or a plain
``1/0``, is a :class:`ChatTemplateError` (a ``BadRequestError``) that names the template:
the engine answers that request with it and goes on serving the others.

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

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jinja2 import Template, TemplateError, meta, nodes
from jinja2.ext import Extension
from jinja2.parser import Parser

from app.engine.reasoning import ThinkingPlan, template_kwargs, thinking_plan
from app.engine.template_sandbox import (
    DEFAULT_LIMITS,
    BudgetedSandbox,
    OverBudget,
    TemplateLimits,
    TemplateRefused,
    activate,
    budget_for,
    deactivate,
)
from app.engine.types import BadRequestError, ChatMessage, content_text

FALLBACK_STOP = ("\nUser:", "\nAssistant:")


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    text: str
    stop: tuple[str, ...]  # stop strings implied by the template (fallback only)
    uses_fallback: bool
    # the thinking budget the engine enforces on the answer (app.engine.reasoning)
    thinking: ThinkingPlan | None = None


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


MAX_TOJSON_INDENT = 64
MAX_SOURCE_CHARS = 100_000  # real ones are under 20,000; compiling (~1 s here) is not budgeted


class ChatTemplateError(BadRequestError):
    """The chat template could not render these messages; the message names the template."""

    code = "chat_template"


def _tojson(value: Any, indent: int | str | None = None, **_: Any) -> str:
    # HF's transformers renders tojson without HTML escaping; templates rely on that.
    width = len(indent) if isinstance(indent, str) else indent or 0
    if width > MAX_TOJSON_INDENT:  # json.dumps writes it on every line, before any check
        raise OverBudget(f"tojson with an indent of {width:,}")
    if isinstance(value, Iterator):  # ``tools | map(attribute='function') | tojson``
        value = list(value)
    return json.dumps(value, ensure_ascii=False, indent=indent)


class GenerationTag(Extension):
    """Hugging Face's ``{% generation %}…{% endgeneration %}``, which marks the assistant's
    tokens for training masks (SmolLM3 and others use it): rendered as its body."""

    tags = {"generation"}  # noqa: RUF012 (Jinja's API: a class attribute)

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _make_env() -> BudgetedSandbox:
    env = BudgetedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols", GenerationTag],
        autoescape=False,
    )
    env.add_filter("tojson", _tojson)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


_ENV = _make_env()


def parse_template(source: str) -> nodes.Template:
    """A template's syntax tree, as the renderer parses it (for analysis only)."""
    return _ENV.parse(source)


class ChatTemplate:
    """Renders OpenAI-style message lists into a prompt string for one model.

    ``name`` says whose template it is in errors ("qwen2.5-7b-instruct-q4_k_m.gguf"); ``limits``
    bound every render (see ``app.engine.template_sandbox``)."""

    def __init__(
        self,
        source: str | None,
        bos_token: str = "",
        eos_token: str = "",
        *,
        name: str = "",
        limits: TemplateLimits = DEFAULT_LIMITS,
    ) -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.limits = limits
        self._label = f"The chat template of {name}" if name else "The model's chat template"
        self._template: Template | None = None
        self._reads: frozenset[str] = frozenset()  # the variables the template reads
        # A template that cannot compile fails each chat request, not the model's load:
        # completions and embeddings still work, and the error says what to do.
        self._broken: str | None = None
        if not source:
            return
        if len(source) > MAX_SOURCE_CHARS:
            self._broken = (
                f"{self._label} is {len(source):,} characters long, over the "
                f"{MAX_SOURCE_CHARS:,} Ember accepts; use another GGUF of this model."
            )
            return
        try:
            self._template = _ENV.from_string(source)
            self._reads = frozenset(meta.find_undeclared_variables(_ENV.parse(source)))
        except Exception as e:  # TemplateSyntaxError, or RecursionError on deep nesting
            self._broken = f"{self._label} does not compile: {e}; use another GGUF of this model."

    @property
    def uses_fallback(self) -> bool:
        return not self.source

    def render(
        self,
        messages: list[ChatMessage],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        *,
        reasoning_effort: str | None = None,
        thinking_budget: int | None = None,
    ) -> RenderedPrompt:
        """The prompt for ``messages``; a reasoning effort or thinking budget is passed as the
        variables the template reads for them (see :mod:`app.engine.reasoning`)."""
        if not messages:
            raise BadRequestError("A chat request needs at least one message.")
        if self._broken is not None:
            raise ChatTemplateError(self._broken)
        if self._template is None:
            return RenderedPrompt(_fallback(messages, add_generation_prompt), FALLBACK_STOP, True)
        # copies all the way down: a template may append to a list (see template_sandbox)
        try:
            copies = copy.deepcopy([dict(m) for m in messages])
            tools = copy.deepcopy(tools)
        except RecursionError as e:  # nested thousands deep: as the template would have failed
            raise self._error(e) from None
        extra = _context(self._reads, tools) | template_kwargs(
            self.source, reasoning_effort, thinking_budget
        )
        token = activate(budget_for(copies, tools, self.limits))
        try:
            text = self._template.render(
                messages=copies,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                tools=tools,
                **extra,
            )
        except Exception as e:
            raise self._error(e) from None  # the message says it all; the stack is the template's
        finally:
            deactivate(token)
        plan = thinking_plan(self.source, reasoning_effort, thinking_budget, text)
        return RenderedPrompt(text, (), False, plan)

    def _error(self, e: Exception) -> ChatTemplateError:
        """One sentence that names the template, says what happened and what to do."""
        label = self._label
        if isinstance(e, OverBudget):
            return ChatTemplateError(
                f"{label} did too much work ({e}) and was stopped; the template is broken or "
                "hostile, so use another GGUF of this model."
            )
        if isinstance(e, TemplateRefused):
            return ChatTemplateError(
                f"{label} cannot be used: {e}, which chat templates may not do; use another "
                "GGUF of this model."
            )
        if isinstance(e, TemplateError):  # raise_exception(...), an undefined name, the sandbox
            return ChatTemplateError(f"{label} rejected the messages: {e}")
        # A bug in the template (1/0, a type error, runaway recursion): the request's fault
        # as far as the server can tell, never an internal error.
        return ChatTemplateError(f"{label} failed on these messages: {type(e).__name__}: {e}")


def _context(reads: frozenset[str], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Variables some real templates read besides the messages and tools, given when read:
    today's date as llama.cpp passes it (``datetime``: FireFunction v2's "Today is";
    ``date_string``: Llama 3.x's, which otherwise says 26 Jul 2024) and FireFunction's
    ``functions`` (the tools' definitions as JSON text, which it adds to every prompt)."""
    out: dict[str, Any] = {}
    now = datetime.now()
    if "datetime" in reads:
        out["datetime"] = now.strftime("%b %d %Y")
    if "date_string" in reads:
        out["date_string"] = now.strftime("%d %b %Y")
    if "functions" in reads:
        defined = [t.get("function", t) for t in tools or [] if isinstance(t, dict)]
        out["functions"] = json.dumps(defined, indent=4, ensure_ascii=False)
    return out


def _fallback(messages: list[ChatMessage], add_generation_prompt: bool) -> str:
    parts: list[str] = []
    for m in messages:
        content = content_text(m.get("content")).strip()
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
