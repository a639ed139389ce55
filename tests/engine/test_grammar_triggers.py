"""Lazy grammars (grammar triggers) on the real Gemma 3 270M model, and the trigger bounds.

The greedy model's own answer picks the trigger: a word it is known to write. With a grammar
that forces text after it, the answer is the free text up to the trigger and then the
grammar's text; a trigger never matched changes nothing."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from app.engine.constraints import grammar_for
from app.engine.triggers import (
    MAX_OPEN_REPEATS,
    MAX_TRIGGER_CHARS,
    MAX_TRIGGERS,
    WINDOW,
    TriggerWatch,
    check_triggers,
)
from app.engine.types import (
    BadRequestError,
    CompletionRequest,
    LoadedModel,
    SamplingParams,
)
from app.engine.worker import EngineWorker

PROMPT = "The story of a cat who lived in a small house:"
GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=1)
FORCED = " is forced."


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pytest.fixture(scope="module")
def free(worker: EngineWorker, loaded: LoadedModel) -> str:
    answer: str = worker.run(CompletionRequest(PROMPT, GREEDY), 600)
    return answer


def _word(free: str) -> tuple[str, int]:
    """A word of the greedy answer past its first token, and where it first starts."""
    words = [m for m in re.finditer(r"[A-Za-z]{3,}", free) if m.start() > 4]
    assert words, free
    m = words[len(words) // 2]
    return m[0], free.index(m[0])


def test_the_answer_runs_free_up_to_the_trigger_then_follows_the_grammar(
    worker: EngineWorker, free: str
) -> None:
    word, at = _word(free)
    grammar = f"root ::= {_literal(word)} {_literal(FORCED)}"
    lazy = replace(GREEDY, grammar=grammar, grammar_triggers=(re.escape(word),))
    answer = worker.run(CompletionRequest(PROMPT, lazy), 600)
    assert answer == free[:at] + word + FORCED


def test_a_group_in_the_trigger_starts_the_grammar_where_it_starts(
    worker: EngineWorker, free: str
) -> None:
    word, at = _word(free)
    head, rest = word[:2], word[2:]  # the grammar starts inside the word
    grammar = f"root ::= {_literal(rest)} {_literal(FORCED)}"
    lazy = replace(GREEDY, grammar=grammar, grammar_triggers=(f"{head}({re.escape(rest)})",))
    answer = worker.run(CompletionRequest(PROMPT, lazy), 600)
    assert answer == free[:at] + word + FORCED


def test_a_trigger_never_matched_changes_nothing(worker: EngineWorker, free: str) -> None:
    lazy = replace(GREEDY, grammar='root ::= "no"', grammar_triggers=("zebra", r"\d{7}"))
    assert worker.run(CompletionRequest(PROMPT, lazy), 600) == free


def test_a_trigger_matching_at_the_start_is_a_plain_grammar(
    worker: EngineWorker, free: str
) -> None:
    word, at = _word(free)
    grammar = f"root ::= {_literal(free[: at + len(word)])} {_literal(FORCED)}"
    plain = worker.run(CompletionRequest(PROMPT, replace(GREEDY, grammar=grammar)), 600)
    lazy = replace(GREEDY, grammar=grammar, grammar_triggers=(r"^[\s\S]",))
    assert worker.run(CompletionRequest(PROMPT, lazy), 600) == plain
    assert plain == free[: at + len(word)] + FORCED


def test_a_match_the_grammar_rejects_fails_the_answer_not_the_engine(
    worker: EngineWorker, free: str
) -> None:
    word, _ = _word(free)
    lazy = replace(GREEDY, grammar='root ::= "{}"', grammar_triggers=(re.escape(word),))
    with pytest.raises(BadRequestError, match="does not accept"):
        worker.run(CompletionRequest(PROMPT, lazy), 600)
    assert worker.run(CompletionRequest(PROMPT, GREEDY), 600) == free  # still serving


def test_a_bad_trigger_is_refused_when_submitted(worker: EngineWorker) -> None:
    bad = replace(GREEDY, grammar='root ::= "x"', grammar_triggers=("(unclosed",))
    with pytest.raises(BadRequestError, match="not a valid regular expression"):
        worker.submit(CompletionRequest(PROMPT, bad))


# ---- the watch and the bounds (no model) ------------------------------------------------


def _feed(watch: TriggerWatch, pieces: list[bytes]) -> int | None:
    for i, piece in enumerate(pieces):
        found = watch.feed(i, piece)
        if found is not None:
            return found
    return None


def test_a_trigger_split_across_tokens_is_found_at_its_start() -> None:
    watch = TriggerWatch(check_triggers(("<tool_call>",)))
    assert _feed(watch, [b"Sure. <to", b"ol_", b"call>{"]) == len(b"Sure. ")
    assert watch.tokens[-1] == (2, 12, 18)


def test_the_first_group_that_matched_is_where_the_grammar_starts() -> None:
    watch = TriggerWatch(check_triggers((r"(x)?<call>\s*(\{)",)))
    assert _feed(watch, [b"a <call>  ", b"{"]) == len(b"a <call>  ")


def test_the_earliest_start_among_the_triggers_wins() -> None:
    watch = TriggerWatch(check_triggers(("B", "AB")))
    assert _feed(watch, [b"xxAB"]) == 2


def test_a_match_is_looked_for_only_near_the_end() -> None:
    watch = TriggerWatch(check_triggers((r"a[\s\S]*z",)))
    assert _feed(watch, [b"a", b"." * (2 * WINDOW), b"z"]) is None  # open-ended: the window
    watch = TriggerWatch(check_triggers((r"a.{0,9}z",)))
    assert _feed(watch, [b"a", b"." * 9, b"z"]) == 0


@pytest.mark.parametrize(
    ("triggers", "message"),
    [
        (("x",) * (MAX_TRIGGERS + 1), "the limit is"),
        (("a" * (MAX_TRIGGER_CHARS + 1),), "1 to"),
        (("",), "1 to"),
        (("(?P<n",), "not a valid regular expression"),
        (("a*",), "can match empty"),
        ((r"(?=x)",), "can match empty"),
        ((r"(a+)+b",), "repeats a repetition"),
        ((r"(?:ab*){2,}",), "repeats a repetition"),
        (("a*" * MAX_OPEN_REPEATS + "b*b",), "open-ended"),
    ],
)
def test_bad_triggers_are_refused(triggers: tuple[str, ...], message: str) -> None:
    with pytest.raises(BadRequestError, match=message):
        check_triggers(triggers)
    with pytest.raises(BadRequestError, match=message):  # where the server checks requests
        grammar_for(SamplingParams(grammar='root ::= "x"', grammar_triggers=triggers))


def test_triggers_at_the_limits_are_accepted() -> None:
    assert len(check_triggers(tuple(f"w{i}" for i in range(MAX_TRIGGERS)))) == MAX_TRIGGERS
    check_triggers(("a" * MAX_TRIGGER_CHARS, "a*" * (MAX_OPEN_REPEATS - 1) + "b+"))
