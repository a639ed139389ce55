"""What the machine monitor costs: the CPU time one sample takes (RAM, swap, CPU times,
Ember's process; GPUs when the back-ends are loaded), as a share of one core at the rate the
Hardware page samples (one a second) and the rate the app samples otherwise (one every two
seconds). Measured as process CPU time over many samples in one run. Target: < 1% of a core.

Run: .venv/bin/python bench/monitor_cost.py [--samples 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET = 0.01  # of one core


def main() -> int:
    from app.engine.monitor import SAMPLE_INTERVAL, Sampler
    from app.ui.machine_monitor import IDLE_INTERVAL_MS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    sampler = Sampler()
    sampler.sample()
    start = time.process_time()
    for _ in range(args.samples):
        sampler.sample()
    per_sample = (time.process_time() - start) / args.samples
    watched = per_sample / SAMPLE_INTERVAL
    idle = per_sample / (IDLE_INTERVAL_MS / 1000)
    print(f"one sample: {per_sample * 1000:.3f} ms of CPU")
    print(f"share of a core while the Hardware page is shown: {watched:.4%} (target < 1%)")
    print(f"share of a core otherwise: {idle:.4%}")
    return 0 if watched < TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
