from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.engine.textstream import StopMatcher, Utf8Stream


def feed_all(stops: tuple[str, ...], chunks: list[str]) -> tuple[str, bool]:
    m = StopMatcher(stops)
    out = "".join(m.feed(c) for c in chunks)
    return out + m.flush(), m.stopped


def test_stop_string_split_across_chunks_never_leaks() -> None:
    assert feed_all(("\nUser:",), ["Hello", "\nUs", "er:", " more"]) == ("Hello", True)


def test_partial_match_is_released_when_it_diverges() -> None:
    assert feed_all(("STOP",), ["ST", "ART"]) == ("START", False)


def test_earliest_stop_wins() -> None:
    assert feed_all(("b", "a"), ["xxab"]) == ("xx", True)


@given(st.text(max_size=40), st.integers(min_value=1, max_value=5))
def test_without_stop_strings_text_passes_through(text: str, size: int) -> None:
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    assert feed_all(("\x00never",), chunks) == (text, False)


def test_utf8_characters_split_across_tokens() -> None:
    s = Utf8Stream()
    data = "héllo 🙂".encode()
    out = "".join(s.feed(data[i : i + 1]) for i in range(len(data))) + s.flush()
    assert out == "héllo 🙂"
