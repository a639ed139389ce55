"""An answer's stats line says how much of its prompt came from the prefix cache, and how
many drafted tokens speculative decoding had accepted."""

from __future__ import annotations

from app.ui.chat.message_words import stats_text


def test_the_stats_say_how_much_of_the_prompt_was_reused() -> None:
    text = stats_text(
        {"tokens": 12, "ttft": 0.08, "tps": 40.0, "prompt_tokens": 1900, "cached_tokens": 1830}
    )
    assert "1,830 of 1,900 prompt tokens from cache" in text
    assert text.index("to first token") < text.index("from cache") < text.index("tok/s")


def test_nothing_is_said_of_the_cache_when_it_served_nothing() -> None:
    assert "cache" not in stats_text({"tokens": 3, "prompt_tokens": 50, "cached_tokens": 0})


def test_the_stats_say_how_many_drafted_tokens_were_accepted() -> None:
    text = stats_text({"tokens": 80, "tps": 90.0, "drafted_tokens": 52, "accepted_tokens": 40})
    assert text.endswith("40 of 52 drafted tokens accepted")
    assert "drafted" not in stats_text({"tokens": 3, "drafted_tokens": 0, "accepted_tokens": 0})
