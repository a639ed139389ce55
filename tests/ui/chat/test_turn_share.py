"""markdown.turn_share: how much of a burst of streamed text one event-loop turn renders."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.ui.chat.markdown import turn_share
from tests.helpers.parallel_fake import ANSWER

LINES = st.sampled_from(
    ["", "Some words.", "- item", "1. first", "```python", "```", "    indented", "| a | b |", "x"]
)


def _shares(text: str, limit: int) -> list[str]:
    shares: list[str] = []
    done = 0
    while done < len(text):
        tail = "".join(shares)  # as if no block had finished: the whole text is the tail
        size = turn_share(tail, text[done:], limit)
        assert 0 < size <= limit
        shares.append(text[done : done + size])
        done += size
    return shares


def test_a_turn_ends_where_a_second_block_would_begin() -> None:
    shares = _shares(ANSWER, 600)
    assert [share.split("\n", 1)[0][:9] for share in shares] == [
        "Sure. Her",
        "1. Read t",
        "```python",  # a code block alone: its code comes in the next turn
        "import qu",
        "| Approac",
    ]
    assert shares[2] == "```python\n"
    assert "".join(shares) == ANSWER


def test_blank_lines_inside_a_code_block_do_not_end_a_turn() -> None:
    code = "import queue\n\n\ndef drain():\n\n    return 1\n```\n"
    assert turn_share("```python\n", code + "\nAfter.\n", 600) == len(code + "\nAfter.\n")
    assert turn_share("```python\n", code + "\nAfter.\n\nMore.", 600) == len(code + "\nAfter.\n\n")
    # Inside a fence begun earlier (the tail), a blank line is code too.
    assert turn_share("```python\nx = 1\n", "\n\ny = 2\n", 600) == len("\n\ny = 2\n")


def test_a_long_block_is_cut_at_the_limit() -> None:
    paragraph = "word " * 300
    assert turn_share("", paragraph, 600) == 600
    assert turn_share("", "short", 600) == len("short")


@settings(max_examples=200, deadline=None)
@given(st.lists(LINES, max_size=30), st.integers(min_value=1, max_value=80))
def test_shares_make_up_the_text_and_always_progress(lines: list[str], limit: int) -> None:
    text = "\n".join(lines)
    assert "".join(_shares(text, limit)) == text
