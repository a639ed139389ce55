"""GBNF read the way llama.cpp reads it, to refuse a grammar that would crash or hold the engine.

llama.cpp's parser recurses once per nested group (about 450 bytes of C stack a level) and
expands ``*``, ``+``, ``?`` and ``{m,n}`` into rules. Before the first token it checks for left
recursion by recursing along the leftmost rule references (about 130 bytes a level), with no
memory of what it already saw, and expands the start rule into parse stacks, one per way the
grammar can begin. Measured with the real library: about 18,000 nested groups or 63,000 chained
leftmost references overflow an 8 MB stack (2,300 and 8,000 on a 1 MB one), and a chain of 16
rules that each branch twice held it for minutes. :func:`check` reads a grammar with the same
tokens, escapes, comments and line ends as llama.cpp, expands repetitions the same way, and
measures those costs in linear time, without recursion; a grammar past a bound, or one that
llama.cpp would refuse, is a BadRequestError that says why. Pure Python, no state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, NamedTuple

from app.engine.types import BadRequestError

MAX_NESTING: Final = 256  # groups in groups (a 1 MB stack overflows at about 2,300)
MAX_REPEAT: Final = 2000  # {m,n} counts: llama.cpp's own MAX_REPETITION_THRESHOLD
MAX_RULES: Final = 20_000  # rules in all: named, groups and those repetitions expand into
MAX_ELEMENTS: Final = 500_000  # symbols of all rules (8 bytes each in C)
MAX_LEFT_DEPTH: Final = 1000  # chained leftmost references (a 1 MB stack overflows at 8,000)
MAX_WORK: Final = 200_000  # steps of llama.cpp's left-recursion check
MAX_BRANCHES: Final = 2048  # parse stacks one step may open (an enum of 1,000 opens 1,000)
_C_GROUP_REPEAT: Final = 2000  # llama.cpp: rules in a group times its repetitions
_TERMINAL: Final = -1


class _Item(NamedTuple):
    """``copies`` of one symbol: a rule reference, or a terminal of ``size`` elements."""

    ref: int
    copies: int = 1
    size: int = 1


@dataclass(slots=True)
class _Frame:
    """One ``parse_alternates`` call of llama.cpp's parser (a rule's body or a group)."""

    rule_id: int
    nested: bool
    symbols_before: int = 0  # a group: symbols before its own (for the group's rule count)
    alts: list[list[_Item]] = field(default_factory=list)
    seq: list[_Item] = field(default_factory=list)
    last: int = 0  # where the last symbol starts in ``seq`` (what a repetition repeats)
    n_prev: int = 1  # rules the last symbol stands for, times its repetitions so far


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


class _Parser:
    def __init__(self, text: str, what: str) -> None:
        self.text, self.n, self.what = text, len(text), what
        self.names: dict[str, int] = {}
        self.labels: list[str] = []  # each symbol's name, for messages
        self.rules: dict[int, list[list[_Item]]] = {}
        self.elements = 0

    # -- errors and budgets -----------------------------------------------------------------

    def fail(self, message: str) -> BadRequestError:
        return BadRequestError(f"{self.what} {message}")

    def syntax(self, message: str, pos: int) -> BadRequestError:
        line = self.text.count("\n", 0, pos) + 1
        shown = self.text[pos : pos + 20].split("\n")[0]
        return self.fail(f"does not parse (line {line}, at {shown!r}): {message}.")

    def add_elements(self, n: int) -> None:
        self.elements += n
        if self.elements > MAX_ELEMENTS:
            raise self.fail(
                f"expands to too many symbols (over {MAX_ELEMENTS:,}); repeat less, or repeat "
                "shorter items."
            )

    def reserve_symbols(self, n: int) -> None:
        if len(self.labels) + n > MAX_RULES:
            raise self.fail(
                f"has too many rules (over {MAX_RULES:,}, counting the groups and what each "
                "repetition expands into); simplify it."
            )

    def new_symbol(self, label: str) -> int:
        self.reserve_symbols(1)
        self.labels.append(label)
        return len(self.labels) - 1

    def append(self, f: _Frame, item: _Item) -> None:
        self.add_elements(item.copies * item.size)
        f.seq.append(item)

    def symbol(self, name: str) -> int:
        if name not in self.names:
            self.names[name] = self.new_symbol(name)
        return self.names[name]

    # -- tokens -----------------------------------------------------------------------------

    def at(self, pos: int) -> str:
        return self.text[pos] if pos < self.n else ""

    def space(self, pos: int, newline_ok: bool) -> int:
        text, n = self.text, self.n
        while pos < n:
            c = text[pos]
            if c == "#":
                while pos < n and text[pos] not in "\r\n":
                    pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                pos += 1
            else:
                break
        return pos

    def name_end(self, pos: int) -> int:
        end = pos
        while end < self.n and _is_word(self.text[end]):
            end += 1
        if end == pos:
            raise self.syntax("expecting a name", pos)
        return end

    def int_end(self, pos: int) -> int:
        end = pos
        while end < self.n and self.text[end].isascii() and self.text[end].isdigit():
            end += 1
        if end == pos:
            raise self.syntax("expecting an integer", pos)
        return end

    def char(self, pos: int) -> int:
        """After one character of a literal or a class (llama.cpp's ``parse_char``)."""
        if pos >= self.n:
            raise self.syntax("unexpected end of input", pos)
        if self.text[pos] != "\\":
            return pos + 1
        kind = self.at(pos + 1)
        digits = {"x": 2, "u": 4, "U": 8}.get(kind)
        if digits is not None:
            hexes = self.text[pos + 2 : pos + 2 + digits]
            if len(hexes) != digits or any(h not in "0123456789abcdefABCDEF" for h in hexes):
                raise self.syntax(f"expecting {digits} hex digits", pos)
            return pos + 2 + digits
        if kind and kind in 'trn\\"[]-':
            return pos + 2
        raise self.syntax("unknown escape", pos)

    def count(self, pos: int) -> tuple[int, int]:
        """A repetition count and where it ends."""
        end = self.int_end(pos)
        digits = self.text[pos:end]
        if len(digits) > 9 or int(digits) > MAX_REPEAT:
            raise self.fail(
                f"repeats {digits[:12]}{'…' if len(digits) > 12 else ''} times; the limit is "
                f"{MAX_REPEAT:,}. Use * or + for an open-ended repetition."
            )
        return int(digits), end

    # -- rules ------------------------------------------------------------------------------

    def parse(self) -> None:
        pos = self.space(0, True)
        while pos < self.n:
            end = self.name_end(pos)
            rule_id = self.symbol(self.text[pos:end])
            pos = self.space(end, False)
            if not self.text.startswith("::=", pos):
                raise self.syntax("expecting ::=", pos)
            pos = self.alternates(self.space(pos + 3, True), rule_id)
            if self.at(pos) == "\r":
                pos += 2 if self.at(pos + 1) == "\n" else 1
            elif self.at(pos) == "\n":
                pos += 1
            elif pos < self.n:
                raise self.syntax("expecting a newline or the end", pos)
            pos = self.space(pos, True)

    def alternates(self, pos: int, rule_id: int) -> int:
        """A rule's body: llama.cpp's recursive parse_alternates/parse_sequence, with groups
        on an explicit stack."""
        stack = [_Frame(rule_id, nested=False)]
        while True:
            frame = stack[-1]
            pos, opened = self.sequence(pos, frame)
            if opened:
                if len(stack) > MAX_NESTING:
                    raise self.fail(
                        f"nests groups too deeply (over {MAX_NESTING} levels of parentheses); "
                        "use named rules instead."
                    )
                before = len(self.labels)
                group = self.new_symbol(f"{self.labels[rule_id]}_{before}")
                stack.append(_Frame(group, nested=True, symbols_before=before))
                continue
            if self.at(pos) == "|":
                frame.alts.append(frame.seq)
                frame.seq, frame.last, frame.n_prev = [], 0, 1
                pos = self.space(pos + 1, True)
                continue
            frame.alts.append(frame.seq)
            self.rules[frame.rule_id] = frame.alts
            self.add_elements(len(frame.alts))  # an ALT between alternatives, an END
            stack.pop()
            if not stack:
                return pos
            parent = stack[-1]
            parent.n_prev = max(1, len(self.labels) - frame.symbols_before)
            parent.last = len(parent.seq)
            self.append(parent, _Item(frame.rule_id))
            if self.at(pos) != ")":
                raise self.syntax("expecting ')'", pos)
            pos = self.space(pos + 1, parent.nested)

    def sequence(self, pos: int, f: _Frame) -> tuple[int, bool]:
        """Symbols up to the end of an alternative; True when a group opens at ``pos``."""
        text = self.text
        while pos < self.n:
            c = text[pos]
            if c in '"[':
                start, size = pos, 0
                pos += 2 if c == "[" and self.at(pos + 1) == "^" else 1
                close = '"' if c == '"' else "]"
                while self.at(pos) != close:
                    if pos >= self.n:
                        raise self.syntax("unexpected end of input", start)
                    pos = self.char(pos)
                    size += 1
                    if c == "[" and self.at(pos) == "-" and self.at(pos + 1) != "]":
                        pos = self.char(pos + 1)
                        size += 1
                f.last, f.n_prev = len(f.seq), 1
                if size:  # "" and [] add nothing (so nothing to repeat, and maybe empty)
                    self.append(f, _Item(_TERMINAL, 1, size))
                pos = self.space(pos + 1, f.nested)
            elif c in "<!":
                pos = self.token_end(pos + (c == "!"))
                f.last, f.n_prev = len(f.seq), 1
                self.append(f, _Item(_TERMINAL))
                pos = self.space(pos, f.nested)
            elif _is_word(c):
                end = self.name_end(pos)
                ref = self.symbol(text[pos:end])
                f.last, f.n_prev = len(f.seq), 1
                self.append(f, _Item(ref))
                pos = self.space(end, f.nested)
            elif c == "(":
                return self.space(pos + 1, True), True
            elif c == ".":
                f.last, f.n_prev = len(f.seq), 1
                self.append(f, _Item(_TERMINAL))
                pos = self.space(pos + 1, f.nested)
            elif c in "*+?":
                at, pos = pos, self.space(pos + 1, f.nested)
                self.repeat(f, at, 1 if c == "+" else 0, 1 if c == "?" else None)
            elif c == "{":
                at, pos = pos, self.space(pos + 1, f.nested)
                low, pos = self.count(pos)
                pos = self.space(pos, f.nested)
                high: int | None = low
                if self.at(pos) == ",":
                    pos = self.space(pos + 1, f.nested)
                    high = None
                    if self.at(pos).isascii() and self.at(pos).isdigit():
                        high, pos = self.count(pos)
                        pos = self.space(pos, f.nested)
                elif self.at(pos) != "}":
                    raise self.syntax("expecting ','", pos)
                if self.at(pos) != "}":
                    raise self.syntax("expecting '}'", pos)
                pos = self.space(pos + 1, f.nested)
                self.repeat(f, at, low, high)
            else:
                break
        return pos, False

    def token_end(self, pos: int) -> int:
        """After ``<[id]>`` or ``<token>`` (whether the token exists is llama.cpp's to say)."""
        if self.at(pos) != "<":
            raise self.syntax("expecting '<'", pos)
        if self.at(pos + 1) == "[":
            end = self.int_end(pos + 2)
            if len(self.text[pos + 2 : end]) > 10 or int(self.text[pos + 2 : end]) >= 2**32:
                raise self.syntax("token id too large", pos)
            if self.text[end : end + 2] != "]>":
                raise self.syntax("expecting ']>'", end)
            return end + 2
        end = self.text.find(">", pos + 1)
        if end < 0:
            raise self.syntax("expecting '>'", pos)
        return end + 1

    def repeat(self, f: _Frame, at: int, low: int, high: int | None) -> None:
        """llama.cpp's ``handle_repetitions``: S{m,n} is m copies of S, then n-m nested
        optional rules (one rule that refers to itself when there is no n)."""
        if f.last == len(f.seq):
            raise self.syntax("expecting something to repeat before it", at)
        if high is not None and high < low:  # llama.cpp would count down from 2**64
            raise self.syntax(f"{{{low},{high}}} repeats at most fewer times than at least", at)
        prev = f.seq[f.last :]
        prev_size = sum(item.copies * item.size for item in prev)
        total = high if high else (low or 1)
        if f.n_prev * total > _C_GROUP_REPEAT:
            raise self.fail(
                f"repeats a group of {f.n_prev:,} rules {total:,} times; llama.cpp allows "
                f"{_C_GROUP_REPEAT:,} in all. Repeat a named rule instead."
            )
        if low == 0:
            del f.seq[f.last :]
        else:
            self.add_elements(prev_size * (low - 1))
            if len(prev) == 1:
                f.seq[f.last] = prev[0]._replace(copies=prev[0].copies * low)
            else:
                f.seq.extend(prev * (low - 1))
        n_opt = 1 if high is None else high - low
        self.reserve_symbols(n_opt)
        label, last = self.labels[f.rule_id], -1
        for i in range(n_opt):
            rule_id = self.new_symbol(f"{label}_{len(self.labels)}")
            tail = [_Item(rule_id if high is None else last)] if i > 0 or high is None else []
            self.rules[rule_id] = [prev + tail, []]
            self.add_elements(prev_size + 3)
            last = rule_id
        if n_opt > 0:
            self.append(f, _Item(last))
        f.n_prev *= total


def check(text: str, root: str = "root", what: str = "The grammar") -> None:
    """Refuse ``text`` (GBNF) with a BadRequestError if llama.cpp would refuse it, or if it
    passes a bound above; ``what`` names it in the message."""
    if "\x00" in text:
        raise BadRequestError(f"{what} contains a NUL character.")
    parser = _Parser(text, what)
    parser.parse()
    if root not in parser.names or parser.names[root] not in parser.rules:
        raise parser.fail(f"does not parse: it has no rule named '{root}' to start from.")
    for rule in parser.rules.values():
        for alt in rule:
            for item in alt:
                if item.ref != _TERMINAL and item.ref not in parser.rules:
                    name = parser.labels[item.ref]
                    raise parser.fail(
                        f"does not parse: it uses the rule '{name}' but never defines it."
                    )
    _check_start_costs(parser)


def _check_start_costs(p: _Parser) -> None:
    """What llama.cpp does with the rules before the first token, measured without doing it:
    the depth and the number of steps of its left-recursion check, and the parse stacks one
    step may open."""
    nullable = {r: any(not alt for alt in alts) for r, alts in p.rules.items()}
    # A rule's leftmost references, with how many times the check walks each: it goes on past
    # a reference only while the rules it passed can be empty.
    edges: dict[int, list[tuple[int, int]]] = {}
    starts: dict[int, int] = {}  # alternatives that begin with a terminal or are empty
    for r, alts in p.rules.items():
        out: list[tuple[int, int]] = []
        plain = 0
        for alt in alts:
            for item in alt:
                if item.ref == _TERMINAL:
                    plain += 1
                    break
                out.append((item.ref, item.copies if nullable[item.ref] else 1))
                if not nullable[item.ref]:
                    break
            else:
                plain += 1
        edges[r], starts[r] = out, plain
    depth: dict[int, int] = {}
    work: dict[int, int] = {}
    branches: dict[int, int] = {}
    cap = max(MAX_WORK, MAX_BRANCHES) + 1
    for start in sorted(p.rules):  # iterative depth-first search, children first
        if start in depth:
            continue
        on_path = {start}
        stack = [(start, 0)]
        while stack:
            r, i = stack[-1]
            if i < len(edges[r]):
                stack[-1] = (r, i + 1)
                child = edges[r][i][0]
                if child in on_path:
                    raise p.fail(
                        f"is left-recursive: rule '{p.labels[child]}' can begin with itself, "
                        "which llama.cpp refuses. Put a terminal first."
                    )
                if child not in depth:
                    on_path.add(child)
                    stack.append((child, 0))
                continue
            stack.pop()
            on_path.discard(r)
            depth[r] = 1 + max((depth[c] for c, _ in edges[r]), default=0)
            work[r] = min(cap, 1 + sum(m * work[c] for c, m in edges[r]))
            branches[r] = min(cap, starts[r] + sum(m * branches[c] for c, m in edges[r]))
            if depth[r] > MAX_LEFT_DEPTH:
                raise p.fail(
                    f"chains {depth[r]:,} rules at the start of one another; the limit is "
                    f"{MAX_LEFT_DEPTH:,}. Put terminals between them."
                )
            if work[r] > MAX_WORK or branches[r] > MAX_BRANCHES:
                raise _branching(p, r)
    # llama.cpp checks from every rule its earlier checks did not reach, again in full
    seen: set[int] = set()
    total = 0
    for r in sorted(p.rules):
        if r in seen:
            continue
        total += work[r]
        if total > MAX_WORK:
            raise _branching(p, r)
        todo = [r]
        seen.add(r)
        while todo:
            for child, _ in edges[todo.pop()]:
                if child not in seen:
                    seen.add(child)
                    todo.append(child)


def _branching(p: _Parser, rule: int) -> BadRequestError:
    return p.fail(
        f"branches too much at the start of rule '{p.labels[rule]}' (the ways to begin "
        "multiply through rules that begin with rules, or too many rules begin with the same "
        f"ones; at most {MAX_BRANCHES:,} ways). Make the alternatives begin differently."
    )
