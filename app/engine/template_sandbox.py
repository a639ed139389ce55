"""The sandbox chat templates run in, with a budget for one render.

A chat template is code from a file downloaded from the internet, and it runs on the engine's
worker thread: a template that loops 10^10 times or builds a 2 GB string would hold every
other request. Jinja's ``ImmutableSandboxedEnvironment`` keeps templates away from Python's
internals; this module adds a :class:`Budget` per render:

- loop steps and calls (every ``for`` iteration, macro call, ``loop(...)`` and method call),
- wall time (checked at every step, call and write),
- the size of any text or list built by an operator, a filter or a method, *before* it is
  built where the size can be known (``'a' * n``, ``~``, ``|join``, ``center``, ``%``,
  ``format``...), and after it otherwise,
- all text written (also inside macros and ``{% set %}`` blocks, which buffer it),
- call depth, and the size of integers built by ``*`` and ``**``.

Sizes grow with the input (messages and tools), so a long conversation still renders.
How it hooks in: the code generator rewrites every ``for`` loop's iterable, every ``~`` and
every output expression into a call of an internal filter (names with spaces, which a
template cannot write), the sandbox's ``call``/``call_binop`` count and measure, and every
built-in filter is wrapped so it is checked and can never run at compile time.
Exceeding the budget raises :class:`OverBudget`; ``include``/``import``/``extends`` raise
:class:`TemplateRefused`: ``app.engine.templates`` turns both into errors a user can act on.
"""

from __future__ import annotations

import contextvars
import functools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import BaseLoader, nodes, pass_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.runtime import Context, LoopContext, markup_join, str_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
)
from jinja2.visitor import NodeTransformer
from markupsafe import Markup


@dataclass(frozen=True, slots=True)
class TemplateLimits:
    """What one render may do. Real templates use a tiny fraction of each."""

    steps: int = 100_000  # loop iterations and calls, plus 50 a message or tool, 1 in 8 chars
    seconds: float = 1.0  # the engine worker waits for the render: keep it short
    chars: int = 2_000_000  # any text built, and all text written, plus 8 per input character
    items: int = 100_000  # any list built, plus 1 per input character
    depth: int = 50  # nested calls (Python's own limit is ~1000 frames, ~10 per call)
    int_bits: int = 65_536


DEFAULT_LIMITS = TemplateLimits()


class TemplateRefused(Exception):  # noqa: N818 (caught and reworded, never shown as is)
    """The template did something a chat template may not do (``str(e)`` says what)."""


class OverBudget(TemplateRefused):
    """The render went over its budget (``str(e)`` says which part, e.g. "over 100,000
    loop steps")."""


class Budget:
    """The counters of one render, from :func:`budget_for`, made current by :func:`activate`."""

    __slots__ = (
        "deadline",
        "depth",
        "limits",
        "max_chars",
        "max_items",
        "max_steps",
        "steps",
        "written",
    )

    def __init__(self, limits: TemplateLimits, input_chars: int, input_entries: int) -> None:
        self.limits = limits
        self.max_steps = limits.steps + 50 * input_entries + input_chars // 8
        self.max_chars = limits.chars + 8 * input_chars
        self.max_items = limits.items + input_chars
        self.deadline = time.monotonic() + limits.seconds
        self.steps = 0
        self.written = 0
        self.depth = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise OverBudget(f"over {self.max_steps:,} loop steps")
        self.tick()

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise OverBudget(f"over {self.limits.seconds:g} s")

    def chars(self, n: int) -> None:
        if n > self.max_chars:
            raise OverBudget(f"a text of over {self.max_chars:,} characters")

    def items(self, n: int) -> None:
        if n > self.max_items:
            raise OverBudget(f"a list of over {self.max_items:,} items")

    def bits(self, n: int) -> None:
        if n > self.limits.int_bits:
            raise OverBudget(f"a number of over {self.limits.int_bits:,} bits")

    def write(self, n: int) -> None:
        self.written += n
        if self.written > self.max_chars:
            raise OverBudget(f"over {self.max_chars:,} characters of output")
        self.tick()

    def result(self, value: Any) -> Any:
        """A value something built, checked after the fact (when it could not be before)."""
        if isinstance(value, str | bytes | bytearray):
            self.chars(len(value))
        elif isinstance(value, list | tuple | dict | set | frozenset):
            self.items(len(value))
        return value

    def iterate(self, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.step()
            yield item

    def text_total(self, parts: Iterable[Any], start: int = 0) -> int:
        """The length of the parts as text, stopping as soon as it is over the limit."""
        total = start
        for part in parts:
            total += len(part) if isinstance(part, str | bytes) else len(str(part))
            self.chars(total)
        return total


_ACTIVE: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "ember_template_budget", default=None
)


def budget_for(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Any] | None,
    limits: TemplateLimits = DEFAULT_LIMITS,
) -> Budget:
    """A fresh budget sized for this input."""
    return Budget(limits, _text_size([messages, tools]), len(messages) + len(tools or ()))


def _text_size(value: Any) -> int:
    """Characters of text in nested lists and dicts, without recursion (input can be deep)."""
    size, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes):
            size += len(item)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            size += 8
    return size


def activate(budget: Budget) -> contextvars.Token[Budget | None]:
    """Make ``budget`` the one every check in this thread uses; undo with :func:`deactivate`."""
    return _ACTIVE.set(budget)


def deactivate(token: contextvars.Token[Budget | None]) -> None:
    _ACTIVE.reset(token)


def _current() -> Budget:
    # Without an active render (only a stray direct use of the environment): sizes are still
    # bounded by a budget that lives for this one check.
    return _ACTIVE.get() or Budget(DEFAULT_LIMITS, 0, 0)


# ---- size estimates of operations that can multiply a size -------------------------------

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?")
_HUGE = 10**12


def _number(digits: str) -> int:
    return int(digits) if len(digits) < 12 else _HUGE


def _percent_size(fmt: str, values: Any) -> int:
    """An upper bound of ``fmt % values``: every directive as wide as the widest value."""
    args = tuple(values.values()) if isinstance(values, Mapping) else values
    args = args if isinstance(args, tuple) else (args,)
    ints = [a for a in args if isinstance(a, int)]
    width = 0
    specs = _PERCENT_SPEC.findall(fmt)
    for spec in specs:
        for part in spec:
            if part == "*":
                width = max(width, *ints, 0)
            elif part:
                width = max(width, _number(part))
    widest = max((len(a) if isinstance(a, str) else len(str(a)) for a in args), default=0)
    return len(fmt) + len(specs) * (widest + width)


def _arg(args: Sequence[Any], kwargs: Mapping[str, Any], i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


def _width(value: Any) -> int:
    return len(value) if isinstance(value, str) else int(value) if isinstance(value, int) else 0


def _replace_size(text: str | bytes, old: Any, new: Any, count: Any) -> int:
    if not isinstance(old, str | bytes) or not isinstance(new, str | bytes):
        return len(text)
    found = len(text) + 1 if not old else text.count(old)  # type: ignore[arg-type]
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(len(new) - len(old), 0)


Args = tuple[Any, ...]
Check = Callable[[Budget, Args, dict[str, Any]], Args]


def _check_text_method(b: Budget, text: str | bytes, name: str, args: Args) -> Args:
    """Pre-checks of ``str``/``bytes`` methods whose result can be far larger than the text."""
    if name in ("center", "ljust", "rjust", "zfill") and args:
        b.chars(max(len(text), _width(args[0])))
    elif name == "expandtabs":
        tab = b"\t" if isinstance(text, bytes) else "\t"
        b.chars(len(text) + text.count(tab) * _width(args[0] if args else 8))  # type: ignore[arg-type]
    elif name == "replace" and len(args) >= 2:
        b.chars(_replace_size(text, args[0], args[1], args[2] if len(args) > 2 else -1))
    elif name == "join" and args:
        items = list(args[0])
        b.items(len(items))
        b.text_total(items, len(text) * max(len(items) - 1, 0))
        return (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((_width(v) for v in args[0].values() if isinstance(v, str)), default=1)
        b.chars(len(text) * longest)
    return args


# ---- filters --------------------------------------------------------------------------------


def _check_center(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    b.chars(max(len(str(args[0])), _width(_arg(args, kwargs, 1, "width", 80))))
    return args


def _check_indent(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    text = str(args[0])
    b.chars(len(text) + (text.count("\n") + 1) * _width(_arg(args, kwargs, 1, "width", 4)))
    return args


def _check_replace(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    old, new = _arg(args, kwargs, 1, "old", ""), _arg(args, kwargs, 2, "new", "")
    count = _arg(args, kwargs, 3, "count", None)
    b.chars(_replace_size(str(args[0]), str(old), str(new), count))
    return args


def _check_join(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    items = list(args[0])
    sep = str(_arg(args, kwargs, 1, "d", ""))
    b.items(len(items))
    start = len(sep) * max(len(items) - 1, 0)
    if _arg(args, kwargs, 2, "attribute", None) is None:
        b.text_total(items, start)
    else:
        b.chars(start)
    return (items, *args[1:])


def _check_format(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    b.chars(_percent_size(str(args[0]), kwargs or tuple(args[1:])))
    return args


def _check_batch(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    if _arg(args, kwargs, 2, "fill_with", None) is not None:
        b.items(_width(_arg(args, kwargs, 1, "linecount", 0)))
    return args


def _check_slice(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    b.items(_width(_arg(args, kwargs, 1, "slices", 0)))  # it loops once per slice
    return args


def _check_wordwrap(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    text = str(args[0])
    width = max(_width(_arg(args, kwargs, 1, "width", 79)), 1)
    wrap = _arg(args, kwargs, 3, "wrapstring", None) or "\n"
    b.chars(len(text) + (len(text) // width + text.count("\n") + 1) * len(str(wrap)))
    return args


def _check_sum(b: Budget, args: Args, kwargs: dict[str, Any]) -> Args:
    start = _arg(args, kwargs, 2, "start", 0)
    if isinstance(start, list | tuple):  # summing lists copies the total over and over
        items = list(args[0])
        b.items(len(start) + sum(len(x) for x in items if isinstance(x, list | tuple)))
        return (items, *args[1:])
    return args


_FILTER_CHECKS: dict[str, Check] = {
    "center": _check_center,
    "indent": _check_indent,
    "replace": _check_replace,
    "join": _check_join,
    "format": _check_format,
    "batch": _check_batch,
    "slice": _check_slice,
    "wordwrap": _check_wordwrap,
    "sum": _check_sum,
}


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` checked: pre-checked where its size can be known, its result checked, and
    marked ``pass_context`` so Jinja never runs it at compile time (it folds constant
    expressions then, outside any budget)."""
    check = _FILTER_CHECKS.get(name)
    passes = getattr(getattr(func, "jinja_pass_arg", None), "name", None)

    @pass_context
    @functools.wraps(func)
    def guarded(context: Context, *args: Any, **kwargs: Any) -> Any:
        b = _current()
        b.tick()
        if check is not None and args:
            args = check(b, args, kwargs)
        if passes == "context":
            result = func(context, *args, **kwargs)
        elif passes == "eval_context":
            result = func(context.eval_ctx, *args, **kwargs)
        elif passes == "environment":
            result = func(context.environment, *args, **kwargs)
        else:
            result = func(*args, **kwargs)
        return b.result(result)

    return guarded


# Internal filters the code generator inserts; a space keeps templates from naming them.
_STEPS = "ember steps"
_CONCAT = "ember concat"
_WRITE = "ember write"
_CHECKED = "ember checked"


@pass_context
def _steps(_context: Context, iterable: Iterable[Any]) -> Iterator[Any]:
    return _current().iterate(iterable)


@pass_context
def _concat(context: Context, parts: tuple[Any, ...]) -> str:
    _current().text_total(parts)
    return markup_join(parts) if context.eval_ctx.autoescape else str_join(parts)


@pass_context
def _write(_context: Context, value: Any) -> Any:
    _current().write(len(value) if isinstance(value, str) else len(str(value)))
    return value


@pass_context
def _checked(_context: Context, value: Any) -> Any:
    return _current().result(value)


def _range(*args: int) -> range:
    r = range(*args)
    try:
        n = len(r)
    except OverflowError:
        n = _HUGE
    b = _current()
    if n > b.max_steps:  # it could only be looped over past the budget
        raise OverBudget(f"a range of over {b.max_steps:,} items")
    return r


# ---- the code generator and the environment -----------------------------------------------


def _filter(node: nodes.Expr | None, name: str, lineno: int) -> nodes.Filter:
    return nodes.Filter(node, name, [], [], None, None, lineno=lineno)


class _Instrument(NodeTransformer):
    """Routes loops, ``~``, output and ``{% set %}`` blocks through the internal filters."""

    def visit_For(self, node: nodes.For) -> nodes.Node:  # noqa: N802 (Jinja visitor)
        self.generic_visit(node)
        node.iter = _filter(node.iter, _STEPS, node.lineno)  # type: ignore[arg-type]
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:  # noqa: N802 (Jinja visitor)
        self.generic_visit(node)
        parts = nodes.Tuple(node.nodes, "load", lineno=node.lineno)
        return _filter(parts, _CONCAT, node.lineno)

    def visit_Output(self, node: nodes.Output) -> nodes.Node:  # noqa: N802 (Jinja visitor)
        self.generic_visit(node)
        node.nodes = [_filter(child, _WRITE, child.lineno) for child in node.nodes]
        return node

    def visit_AssignBlock(self, node: nodes.AssignBlock) -> nodes.Node:  # noqa: N802 (Jinja visitor)
        self.generic_visit(node)
        if node.filter is None:
            node.filter = _filter(None, _CHECKED, node.lineno)
        return node


class _CodeGenerator(CodeGenerator):
    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:  # noqa: N802 (Jinja visitor)
        _Instrument().visit(node)
        node.set_environment(self.environment)
        super().visit_Template(node, frame)


class _FieldBudget(SandboxedFormatter):
    """``str.format`` that checks each field's width and the total it writes."""

    _total = 0

    def vformat(self, format_string: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        self._total = len(format_string)
        return super().vformat(format_string, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> Any:
        b = _current()
        for digits in re.findall(r"\d+", format_spec):
            b.chars(_number(digits))
        text = super().format_field(value, format_spec)
        self._total += len(text)
        b.chars(self._total)
        return text


class _Formatter(_FieldBudget):
    pass


class _EscapeFormatter(_FieldBudget, SandboxedEscapeFormatter):
    pass


class _NoLoader(BaseLoader):
    def get_source(self, environment: Any, template: str) -> Any:
        raise TemplateRefused(f"it loads another template ({template!r})")


class BudgetedSandbox(ImmutableSandboxedEnvironment):
    """The sandbox with the budget's hooks (see the module docstring). Render only inside
    :func:`activate`/:func:`deactivate` of a :func:`budget_for`."""

    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(loader=_NoLoader(), **options)
        for name, func in list(self.filters.items()):
            self.filters[name] = _guard_filter(name, func)
        self.filters.update({_STEPS: _steps, _CONCAT: _concat, _WRITE: _write, _CHECKED: _checked})
        self.globals["range"] = _range
        self.globals.pop("lipsum", None)  # n paragraphs of filler text: nothing a chat needs

    def add_filter(self, name: str, func: Callable[..., Any]) -> None:
        self.filters[name] = _guard_filter(name, func)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # The mutations real templates make (Kimi K2 queues its tool call ids in a
        # namespace's list): append and pop, each call counted and a list's length checked
        # in call(). The template renders copies of the messages and tools, so nothing it
        # changes reaches the caller.
        if isinstance(obj, list) and attr in ("append", "pop"):
            return True
        return bool(super().is_safe_attribute(obj, attr, value))

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _check_binop(_current(), operator, left, right)  # an upper bound: no check after
        return self.binop_table[operator](left, right)

    def call(
        self, context: Context, obj: Any, /, *args: Any, **kwargs: Any
    ) -> Any:  # every call a template makes: functions, macros, methods, loop(...)
        b = _current()
        b.step()
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, str | bytes):
            args = _check_text_method(b, owner, getattr(obj, "__name__", ""), args)
        elif isinstance(owner, list) and getattr(obj, "__name__", "") == "append":
            b.items(len(owner) + 1)
        elif isinstance(owner, int) and getattr(obj, "__name__", "") == "to_bytes" and args:
            b.chars(_width(args[0]))
        elif isinstance(obj, LoopContext) and args:  # a recursive loop's next level
            args = (b.iterate(args[0]), *args[1:])
        b.depth += 1
        try:
            if b.depth > b.limits.depth:
                raise OverBudget(f"calls nested over {b.limits.depth} deep")
            result = super().call(context, obj, *args, **kwargs)
        finally:
            b.depth -= 1
        return b.result(result)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        # The same as Jinja's wrapper, with a formatter that checks what it writes.
        text: str = value.__self__
        is_map = value.__name__ == "format_map"
        formatter: SandboxedFormatter = (
            _EscapeFormatter(self, escape=text.escape)
            if isinstance(text, Markup)
            else _Formatter(self)
        )

        def checked(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                return type(text)(formatter.vformat(text, (), args[0]))
            return type(text)(formatter.vformat(text, args, kwargs))

        return functools.update_wrapper(checked, value)


def _check_binop(b: Budget, operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        seq, n = (left, right) if isinstance(right, int) else (right, left)
        if not isinstance(n, int):
            return
        if isinstance(seq, str | bytes):
            b.chars(len(seq) * n)
        elif isinstance(seq, list | tuple):
            b.items(len(seq) * n)
        elif isinstance(seq, int):
            b.bits(seq.bit_length() + n.bit_length())
    elif operator == "+":
        if isinstance(left, str | bytes) and isinstance(right, str | bytes):
            b.chars(len(left) + len(right))
        elif isinstance(left, list | tuple) and isinstance(right, list | tuple):
            b.items(len(left) + len(right))
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0:
            b.bits(max(left.bit_length(), 1) * right)
    elif operator == "%" and isinstance(left, str):
        b.chars(_percent_size(left, right))
