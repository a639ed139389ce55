"""Reasoning control: how hard a model thinks, and how long it may.

One home for what the engine and the API need to know about a reasoning model's template:

* :data:`EFFORT_KWARGS` maps ``ChatRequest.reasoning_effort`` onto the variables chat templates
  read (Qwen3, SmolLM3, GLM and others ``enable_thinking``; Granite, DeepSeek V3.1 and Kimi
  ``thinking``; gpt-oss, Cohere, Solar and Hy3 ``reasoning_effort``; Seed-OSS
  ``thinking_budget``). :func:`template_controls` finds which of them a template reads (Jinja's
  own analysis of its free variables), so a template gets only the variables it knows.
* :data:`FORMATS` holds how each family opens and closes its thinking (``<think>…</think>``,
  gpt-oss's harmony channels, Command R7B's ``<|END_THINKING|>``, Kimi's ``◁/think▷``,
  Ministral's ``[/THINK]``); :func:`reasoning_format` finds a template's among them.
* :func:`prompt_opens_reasoning` renders the template to see whether the answer starts inside
  the thinking (DeepSeek-R1, QwQ, Qwen3 end the prompt with ``<think>``).
* :class:`ThinkingBudget` counts an answer's thinking tokens; once the budget is spent the
  scheduler feeds the closing text as if the model had written it, and the answer follows.
  "none" on a template that cannot switch thinking off is a budget of 0.

Pure Python (Jinja only); thread-safe.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

EFFORTS: Final = ("none", "minimal", "low", "medium", "high")


def _on(effort: str, budget: int | None) -> bool:
    return effort != "none"


def _effort_value(effort: str, budget: int | None) -> str:
    return effort


def _budget_value(effort: str, budget: int | None) -> int:
    return 0 if effort == "none" else -1 if budget is None else budget


# template variable -> its value for an effort (and a thinking budget); a variable that switches
# thinking off for "none" is in SWITCHES_OFF
EFFORT_KWARGS: Final[dict[str, Callable[[str, int | None], Any]]] = {
    "enable_thinking": _on,
    "thinking": _on,
    "reasoning_effort": _effort_value,
    "thinking_budget": _budget_value,  # ByteDance Seed-OSS: tokens, -1 unlimited, 0 none
}
SWITCHES_OFF: Final = frozenset({"enable_thinking", "thinking", "thinking_budget"})
# a reasoning_effort a template does not name is the nearest one it is likely to know
_EFFORT_FALLBACK: Final = {"none": "low", "minimal": "low"}


@dataclass(frozen=True, slots=True)
class ReasoningFormat:
    """How a family writes its thinking: ``open`` starts it, ``close`` ends it and leads to
    the answer (the text a budget feeds); ``marker`` is what the template has that says so."""

    name: str
    marker: str
    open: str
    close: str


FORMATS: Final = (
    ReasoningFormat(
        "harmony",  # gpt-oss: the analysis channel, then the final one
        "<|channel|>",
        "<|channel|>analysis<|message|>",
        "<|end|><|start|>assistant<|channel|>final<|message|>",
    ),
    ReasoningFormat("command-r7b", "<|END_THINKING|>", "<|START_THINKING|>", "<|END_THINKING|>"),
    ReasoningFormat("kimi", "◁/think▷", "◁think▷", "◁/think▷"),
    ReasoningFormat("mistral", "[/THINK]", "[THINK]", "[/THINK]"),
    ReasoningFormat("seed", "</seed:think>", "<seed:think>", "</seed:think>"),  # Seed-OSS
    ReasoningFormat("think", "think>", "<think>", "</think>"),  # <think> or </think>
)
THINK: Final = FORMATS[-1]


@dataclass(frozen=True, slots=True)
class TemplateControls:
    """What a template offers: the effort variables it reads, whether one of them turns
    thinking off, the reasoning_effort values it names, and its thinking format."""

    reads: frozenset[str]
    switches_off: bool
    named_efforts: frozenset[str]
    format: ReasoningFormat | None


@functools.lru_cache(maxsize=32)
def template_controls(source: str | None) -> TemplateControls:
    """The reasoning controls of a chat template (none for no template or one that does not
    parse: rendering says what is wrong with it)."""
    if not source:
        return TemplateControls(frozenset(), False, frozenset(), None)
    from jinja2 import meta

    from app.engine.templates import parse_template

    try:
        free = meta.find_undeclared_variables(parse_template(source))
    except Exception:  # the template does not compile: no controls
        free = set()
    reads = frozenset(name for name in EFFORT_KWARGS if name in free)
    named = frozenset(e for e in EFFORTS if f'"{e}"' in source or f"'{e}'" in source)
    switches_off = bool(reads & SWITCHES_OFF) or ("reasoning_effort" in reads and "none" in named)
    return TemplateControls(reads, switches_off, named, reasoning_format(source))


def reasoning_format(source: str | None) -> ReasoningFormat | None:
    """The thinking format a template writes or expects, if it is a reasoning model's."""
    if not source:
        return None
    return next((f for f in FORMATS if f.marker in source), None)


def template_kwargs(
    source: str | None, effort: str | None, budget: int | None = None
) -> dict[str, Any]:
    """The variables to render ``source`` with for this effort and budget: only those the
    template reads (an empty dict for the model's default)."""
    if effort is None and budget is None:
        return {}
    check_reasoning(effort, budget)
    controls = template_controls(source)
    out: dict[str, Any] = {}
    for name in controls.reads:
        if effort is None and name != "thinking_budget":
            continue  # a budget alone leaves the model's own default effort
        value = EFFORT_KWARGS[name](effort or "medium", budget)
        if name == "reasoning_effort" and value not in controls.named_efforts:
            value = _EFFORT_FALLBACK.get(value, value)
        out[name] = value
    return out


def check_reasoning(effort: str | None, budget: int | None) -> None:
    """Refuse an effort no template knows or a negative budget (a BadRequestError)."""
    from app.engine.types import BadRequestError

    if effort is not None and effort not in EFFORTS:
        raise BadRequestError(
            f"Unknown reasoning effort {str(effort)[:40]!r}; use one of {', '.join(EFFORTS)}."
        )
    whole = isinstance(budget, int) and not isinstance(budget, bool)
    if budget is not None and (not whole or budget < 0):
        raise BadRequestError("The thinking budget must be a whole number of tokens, 0 or more.")


def effective_budget(source: str | None, effort: str | None, budget: int | None) -> int | None:
    """The thinking budget the engine enforces: the request's, or 0 for "none" on a template
    that cannot switch thinking off (None: no limit)."""
    if effort == "none" and not template_controls(source).switches_off:
        return 0
    return budget


@functools.lru_cache(maxsize=32)
def prompt_opens_reasoning(source: str | None, effort: str | None = None) -> bool:
    """Whether the template's generation prompt, rendered for ``effort``, ends inside its
    thinking (``<think>``): then the answer starts as reasoning and only the close appears."""
    fmt = reasoning_format(source)
    if fmt is None or fmt.open not in (source or ""):
        return False
    from app.engine.templates import ChatTemplate

    try:
        text = (
            ChatTemplate(source)
            .render([{"role": "user", "content": "Hi"}], reasoning_effort=effort)
            .text
        )
    except Exception:  # a template that cannot render a probe: assume not
        return False
    return text.rstrip().endswith(fmt.open)


@dataclass(frozen=True, slots=True)
class ThinkingPlan:
    """What the engine enforces for one answer: at most ``budget`` thinking tokens, then
    ``format.close``; ``inside`` when the prompt already opened the thinking."""

    budget: int
    format: ReasoningFormat
    inside: bool


def thinking_plan(
    source: str | None, effort: str | None, budget: int | None, prompt: str
) -> ThinkingPlan | None:
    """The budget to enforce on an answer to ``prompt`` (rendered from this template), or
    None (no limit, or a template without a known thinking format)."""
    limit = effective_budget(source, effort, budget)
    fmt = reasoning_format(source) if limit is not None else None
    if limit is None or fmt is None:
        return None
    return ThinkingPlan(max(0, limit), fmt, prompt.rstrip().endswith(fmt.open))


class ThinkingBudget:
    """Counts an answer's thinking tokens. ``feed(piece)`` takes each generated token's bytes
    (special tokens written out); :attr:`spent` turns true when the thinking is open and has
    used the budget: the scheduler then feeds :attr:`close` and calls :meth:`closed`. Linear:
    only the last few characters are kept to find a marker split across tokens."""

    def __init__(self, plan: ThinkingPlan) -> None:
        self.close = plan.format.close
        self._open, self._budget = plan.format.open, plan.budget
        self._state = "thinking" if plan.inside else "before"
        self._used = 0
        self._tail = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def spent(self) -> bool:
        return self._state == "thinking" and self._used >= self._budget

    def feed(self, piece: bytes) -> None:
        if self._state == "done":
            return
        text = self._utf8.decode(piece)
        seen = self._tail + text
        if self._state == "before":
            at = seen.find(self._open)
            if at == -1:
                self._tail = seen[-len(self._open) :]
                return
            self._state, seen = "thinking", seen[at + len(self._open) :]
            self._tail = seen[-len(self.close) :]
            if seen:
                self._used += 1  # the token that opened it carried thinking too
            if self.close in seen:
                self._state = "done"
            return
        self._used += 1
        if self.close in seen:
            self._state = "done"
        self._tail = seen[-len(self.close) :]

    def closed(self) -> None:
        """The closing text was fed: the thinking is over."""
        self._state = "done"
