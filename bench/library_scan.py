"""How much the metadata cache saves: scan a library of 200 models cold, then warm.

Cold: no cache file, so every GGUF header is read and parsed (the files are in the OS page
cache either way, so this measures parsing, not disk seeks: a real cold start is slower still).
Warm: a new ``Library`` with the cache from the first scan; no header is read.

Run: .venv/bin/python bench/library_scan.py [--models 200] [--vocab 32000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.library import metadata_cache as local_mod  # noqa: E402
from app.library.local import Library  # noqa: E402
from tests.helpers.gguf_writer import gguf_bytes  # noqa: E402

QUANTS = ("Q4_K_M", "Q5_K_M", "Q8_0", "Q6_K")


def make_models(root: Path, count: int, vocab: int) -> None:
    """``count`` models over count/4 repositories, each header carrying a ``vocab`` vocabulary.
    Each file has its own name in its header but all have one size: the worst case for
    telling files apart (the library compares the content of files whose sizes match)."""
    for i in range(count):
        repo = root / f"owner{i % 7}" / f"Model-{i // 4}-GGUF"
        repo.mkdir(parents=True, exist_ok=True)
        header = gguf_bytes(
            name=f"Model {i:06d}", vocab_size=vocab, block_count=32, embedding_length=4096
        )
        (repo / f"model-{i // 4}-{QUANTS[i % 4]}.gguf").write_bytes(header)


def timed_scan(library: Library) -> tuple[float, int]:
    started = time.perf_counter()
    models = library.scan()
    return time.perf_counter() - started, len(models)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--vocab", type=int, default=32_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    reads = 0
    real_read = local_mod.read_gguf

    def counting_read(path: Path) -> local_mod.GGUFInfo:
        nonlocal reads
        reads += 1
        return real_read(path)

    local_mod.read_gguf = counting_read  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        root = Path(tmp)
        models_dir = root / "models"
        make_models(models_dir, args.models, args.vocab)
        colds: list[float] = []
        warms: list[float] = []
        for _ in range(args.repeat):
            cache = root / f"cache-{len(colds)}.json"

            def library(cache: Path = cache) -> Library:
                return Library(
                    models_dir, hf_cache_dir=root / "none", lmstudio_dirs=(), cache_path=cache
                )

            reads = 0
            cold, n = timed_scan(library())
            cold_reads = reads
            reads = 0
            warm, _ = timed_scan(library())
            assert reads == 0, "the warm scan read headers"
            colds.append(cold)
            warms.append(warm)
        cold_ms = statistics.median(colds) * 1000
        warm_ms = statistics.median(warms) * 1000
        print(f"models: {n}, header reads cold: {cold_reads}, warm: 0")
        print(f"cold scan (headers parsed):  {cold_ms:8.1f} ms")
        print(f"warm scan (metadata cache):  {warm_ms:8.1f} ms")
        print(f"ratio cold/warm: {cold_ms / warm_ms:.1f}x")


if __name__ == "__main__":
    main()
