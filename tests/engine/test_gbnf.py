"""GBNF is read the way llama.cpp reads it: what llama.cpp parses passes, what it refuses is
refused with a reason, and what would overflow its stack or hold it (deep groups, long chains
of leftmost rules, rules that branch at their start, huge or inverted repetitions, comments
that end in a carriage return) is refused at a bound, which llama.cpp itself parses on a 1 MB
stack."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from app.engine import gbnf
from app.engine.gbnf import (
    MAX_BRANCHES,
    MAX_ELEMENTS,
    MAX_LEFT_DEPTH,
    MAX_NESTING,
    MAX_REPEAT,
    MAX_RULES,
    MAX_WORK,
)
from app.engine.types import BadRequestError
from app.server.convert import JSON_OBJECT_GBNF
from tests.helpers.grammar_child import llama_cpp_parses


def nested(depth: int) -> str:
    return "root ::= " + "(" * depth + '"x"' + ")" * depth


def chain(length: int) -> str:
    """root starts with r0, which starts with r1, …: ``length`` rules deep (the depth of the
    left-recursion check)."""
    rules = "".join(f'r{i} ::= r{i + 1} "b"\n' for i in range(length - 2))
    return f'root ::= r0\n{rules}r{length - 2} ::= "a"\n'


def diamond(levels: int) -> str:
    """Each rule begins with the next one in two ways: 2**levels ways to begin."""
    rules = "".join(f'r{i} ::= r{i + 1} "a" | r{i + 1} "b"\n' for i in range(levels))
    return f'root ::= r0\n{rules}r{levels} ::= "c"\n'


def alternatives(n: int) -> str:
    return "root ::= " + " | ".join(f'"v{i}"' for i in range(n))


def llama_cpp_grammars() -> list[str]:
    import llama_cpp.llama_grammar as lg

    names = ["ARITHMETIC", "C", "CHESS", "JAPANESE", "JSON_ARR", "JSON", "LIST"]
    return [getattr(lg, f"{name}_GBNF") for name in names] + [JSON_OBJECT_GBNF]


AT_THE_BOUNDS = {
    "groups nested MAX_NESTING deep": nested(MAX_NESTING),
    "a chain of MAX_LEFT_DEPTH leftmost rules": chain(MAX_LEFT_DEPTH),
    "a repetition of MAX_REPEAT": f'root ::= "a"{{0,{MAX_REPEAT}}} "b"{{{MAX_REPEAT}}}',
    "MAX_BRANCHES ways to begin": alternatives(MAX_BRANCHES),
    "10 levels of branching": diamond(10),
    "MAX_RULES rules": 'root ::= "a" ' + " ".join(['"b"{0,1999}'] * (MAX_RULES // 2000 - 1)),
}

PAST_THE_BOUNDS = {
    # each of these crashed llama.cpp (SIGSEGV) or held it for minutes
    "50,000 nested groups": (nested(50_000), "nests groups too deeply"),
    "a comment ending in CR hides groups": (
        "root ::= ( # a comment\r" + "(" * 50_000 + '"a"' + ")" * 50_001,
        "nests groups too deeply",
    ),
    "a chain of 70,000 leftmost rules": (chain(70_000), "too many rules"),
    "16 levels of branching": (diamond(16), "branches too much"),
    "{5,2} counts down from 2**64": ('root ::= "a"{5,2}', "fewer times than at least"),
    # and just past each bound
    "nesting": (nested(MAX_NESTING + 1), "nests groups too deeply"),
    "chain": (chain(MAX_LEFT_DEPTH + 1), f"limit is {MAX_LEFT_DEPTH:,}"),
    "repeat max": (f'root ::= "a"{{0,{MAX_REPEAT + 1}}}', "repeats 2001 times"),
    "repeat min": (f'root ::= "a"{{{MAX_REPEAT + 1},}}', "repeats 2001 times"),
    "a 30-digit count": ('root ::= "a"{' + "9" * 30 + "}", "repeats 999999999999…"),
    "branches": (alternatives(MAX_BRANCHES + 1), "branches too much"),
    "rules": ("root ::= " + " ".join(['"b"{0,1999}'] * (MAX_RULES // 2000 + 1)), "too many rules"),
    "elements": ("root ::= " + ('"' + "x" * 300 + '"{1,2}{1000} ') * 2, "too many symbols"),
    "group repeats": ('root ::= ("a" "b"{0,50}){0,50}', "allows 2,000 in all"),
    "many roots over one heavy rule": (
        diamond(10).replace("root ::=", "h ::=")
        + "".join(f"p{i} ::= h\n" for i in range(MAX_WORK // 1000)) + 'root ::= "a"\n',
        "branches too much",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(AT_THE_BOUNDS))
def test_at_a_bound_the_grammar_passes(case: str) -> None:
    gbnf.check(AT_THE_BOUNDS[case])


@pytest.mark.parametrize("case", list(PAST_THE_BOUNDS))
def test_past_a_bound_the_grammar_is_refused_saying_why(case: str) -> None:
    text, words = PAST_THE_BOUNDS[case]
    with pytest.raises(BadRequestError, match=re.escape(words)):
        gbnf.check(text)


def test_llama_cpps_own_grammars_pass() -> None:
    for text in llama_cpp_grammars():
        gbnf.check(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("root ::= x", "uses the rule 'x' but never defines it"),
        ('x ::= "a"', "no rule named 'root'"),
        ('root ::= root "a" | "b"', "left-recursive"),
        ('root ::= a "c"\na ::= "" | root', "left-recursive"),  # through an empty alternative
        ('root ::= "a', "unexpected end of input"),
        ('root ::= ("a"', "expecting ')'"),
        ('root ::= "\\q"', "unknown escape"),
        ('root ::= "\\x4"', "expecting 2 hex digits"),
        ('root ::= "a"\nroot "b"', "expecting ::="),
        ("root ::= *", "expecting something to repeat"),
        ('root ::= ""*', "expecting something to repeat"),  # an empty literal adds nothing
        ('root ::= "a" \x00 "b"', "NUL"),
        ("root ::= \"a\" 'b'", "expecting a newline"),
    ],
)
def test_what_llama_cpp_refuses_is_refused_with_a_reason(text: str, words: str) -> None:
    with pytest.raises(BadRequestError, match=re.escape(words)):
        gbnf.check(text)


def test_the_refusal_says_where() -> None:
    with pytest.raises(BadRequestError, match=r"line 3, at '\?'"):
        gbnf.check('root ::= a\na ::= "x"\nb ::= ?')


# ---- against the real llama.cpp ------------------------------------------------------------

ITEMS = [
    '"x"',
    '"a\\"b"',
    '"\\u00e9"',
    '""',
    "[a-z]",
    "[^\\n]",
    "[\\x41-\\x5a_]",
    "[]",
    "[a-]",
    ".",
    "a",
    "b",
    "<[12]>",
    "!<[3]>",
    '("x" | b)',
    "(\n a )",
]
SUFFIXES = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "{2,}", "{0,0}", "{ 1 , 2 }"]
JUNK = [
    "c", "root", "(", ")", "|", "*", "{x}", "# note\n", "\n", "\r\n", "# cr\r", '"\\q"', "'a'",
    "::=", "(\n",
]  # fmt: skip


def random_grammar(rng: random.Random) -> str:
    names = ["root", "a", "b"][: rng.randint(1, 3)]
    lines = []
    for name in names:
        body = [
            rng.choice(JUNK) if rng.random() < 0.08 else rng.choice(ITEMS) + rng.choice(SUFFIXES)
            for _ in range(rng.randint(0, 5))
        ]
        if rng.random() < 0.3:
            body.insert(rng.randint(0, len(body)), "|")
        lines.append(f"{name} ::= {' '.join(body)}")
    return rng.choice(["\n", "\r\n", "\n\n"]).join(lines)


def test_the_check_and_llama_cpp_agree_on_hundreds_of_grammars(gemma_path: Path) -> None:
    """Whatever the check passes, llama.cpp parses (on a 1 MB stack), and whatever llama.cpp
    refuses the check refuses: real grammars, each bound, and random ones."""
    rng = random.Random(11)
    grammars = llama_cpp_grammars() + list(AT_THE_BOUNDS.values())
    grammars += [random_grammar(rng) for _ in range(400)]
    verdicts = []
    for text in grammars:
        try:
            gbnf.check(text)
            verdicts.append(True)
        except BadRequestError:
            verdicts.append(False)
    parsed = llama_cpp_parses(gemma_path, grammars)
    disagree = [(g, v, p) for g, v, p in zip(grammars, verdicts, parsed, strict=True) if v != p]
    assert not disagree, disagree[:5]
    assert sum(verdicts) > 50 and len(verdicts) - sum(verdicts) > 50  # both kinds were tried


def test_a_bound_is_below_what_crashes_llama_cpp(gemma_path: Path) -> None:
    """The refused grammars above do crash llama.cpp on a 1 MB stack at a few times each bound
    (so the bounds are real, with room to spare)."""
    assert llama_cpp_parses(gemma_path, [nested(MAX_NESTING * 4)]) == [True]
    assert llama_cpp_parses(gemma_path, [chain(MAX_LEFT_DEPTH * 4)]) == [True]
    assert MAX_ELEMENTS * 8 < 64 * 2**20  # the symbols of all rules take a few MB in C
