"""A fake machine and clock for the machine monitor's tests (app/engine/monitor.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.monitor import CpuTimes, GpuSample

GB = 10**9  # human_bytes counts in powers of ten, as the OS's file managers


@dataclass
class FakeMachine:
    """A machine whose counters the test moves by hand."""

    busy: float = 100.0
    total: float = 400.0
    process_seconds: float = 5.0
    rss: int = 2 * GB
    available: int = 10 * GB
    n_cores: int = 4
    gpu: tuple[GpuSample, ...] = field(default_factory=tuple)
    calls: int = 0

    def memory(self) -> tuple[int, int]:
        self.calls += 1
        return 16 * GB, self.available

    def swap(self) -> tuple[int, int]:
        return 4 * GB, 1 * GB

    def cpu_times(self) -> CpuTimes:
        return CpuTimes(self.busy, self.total)

    def process(self) -> tuple[int, float]:
        return self.rss, self.process_seconds

    def cores(self) -> int:
        return self.n_cores

    def gpus(self) -> tuple[GpuSample, ...]:
        return self.gpu


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
