"""What an answer's footer says in words: its stats line and the note on messages that no
longer fit its context. No Qt: plain text for the message widget (and tests)."""

from __future__ import annotations


def stats_text(metadata: dict[str, object]) -> str:
    """'128 tokens · 0.42 s to first token · 1,830 of 1,900 prompt tokens from cache ·
    47.9 tok/s · 40 of 52 drafted tokens accepted' from an answer's metadata."""
    parts: list[str] = []
    tokens = metadata.get("tokens")
    if isinstance(tokens, int):
        parts.append(f"{tokens:,} token{'s' if tokens != 1 else ''}")
    ttft = metadata.get("ttft")
    if isinstance(ttft, int | float) and ttft > 0:
        parts.append(f"{ttft:.2f} s to first token")
    cached, prompt = metadata.get("cached_tokens"), metadata.get("prompt_tokens")
    if isinstance(cached, int) and cached > 0:
        share = f" of {prompt:,}" if isinstance(prompt, int) and prompt >= cached else ""
        parts.append(f"{cached:,}{share} prompt tokens from cache")
    tps = metadata.get("tps")
    if isinstance(tps, int | float) and tps > 0:
        parts.append(f"{tps:.1f} tok/s")
    if isinstance(drafted := metadata.get("drafted_tokens"), int) and drafted > 0:
        parts.append(f"{metadata.get('accepted_tokens')} of {drafted} drafted tokens accepted")
    if metadata.get("finish_reason") == "length":
        parts.append("reached the length limit")
    return "  ·  ".join(parts)


def dropped_text(dropped: int, n_ctx: int | None) -> str:
    context = f"the {n_ctx:,}-token context" if n_ctx else "the context"
    noun = "message" if dropped == 1 else "messages"
    return (
        f"{dropped} earlier {noun} no longer fit in {context} and were left out of this "
        "answer. The system prompt was kept."
    )
