"""A GGUF header and byte counts in words, for ``ember info``, the app and messages.

One unit rule: a byte limit (a request body, an answer read from a provider, an attached file,
an image) is set in MiB (:data:`MIB`) and said in MiB (:func:`mib_text`); the size of a thing
(a model, a file) is said in decimal units (:func:`human_bytes`), as the Hub and LM Studio do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # gguf re-exports this module's functions, so it is not imported here
    from app.engine.gguf import GGUFInfo


MIB: Final = 1024 * 1024


def mib_text(n: int) -> str:
    """A byte limit in words: ``32 MiB``, ``0.25 MiB``."""
    return f"{n / MIB:g} MiB"


def human_bytes(n: int) -> str:
    """A size in decimal units (1 GB = 10^9 bytes), as the Hugging Face Hub and LM Studio show."""
    if n < 0:
        return "-" + human_bytes(-n)
    if n < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB", "PB"):
        value /= 1000
        if round(value, 1) < 1000 or unit == "PB":
            break
    return f"{value:.1f} {unit}" if round(value, 1) < 100 else f"{value:.0f} {unit}"


def format_info(info: GGUFInfo) -> list[tuple[str, str]]:
    """Human-readable (label, value) rows for ``ember info`` and the model details pane."""

    def number(value: int | None, unit: str = "") -> str:
        return "unknown" if value is None else f"{value:,}{unit}"

    kv_heads = set(info.layer_kv_heads())
    kv_text = (
        f"{min(kv_heads)}-{max(kv_heads)} (varies by layer)"
        if len(kv_heads) > 1
        else number(info.head_count_kv)
    )
    if info.file_size is not None:
        size_text = human_bytes(info.file_size)
    else:
        size_text = f"{human_bytes(info.expected_file_size)} (from the header)"
    return [
        ("Architecture", info.architecture or "unknown"),
        ("Name", info.name or "-"),
        ("Parameters", f"{info.size_label or '?'} ({info.parameter_count:,})"),
        ("Quantization", info.quantization),
        ("Context length (trained)", number(info.context_length, " tokens")),
        ("Layers", number(info.block_count)),
        ("Attention heads", number(info.head_count)),
        ("KV heads", kv_text),
        ("Embedding size", number(info.embedding_length)),
        (
            "Sliding window",
            number(info.sliding_window, " tokens") if info.sliding_window else "none",
        ),
        ("Tokenizer", info.tokenizer_model or "unknown"),
        ("Vocabulary", number(info.vocab_size, " tokens")),
        ("Chat template", "present" if info.chat_template else "none - fallback used"),
        ("FIM support", "yes" if info.has_fim else "no"),
        ("File size", size_text),
    ]
