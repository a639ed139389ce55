"""The machine while models run: RAM, swap, CPU and GPU memory over the last minutes, with
Ember's own share, for the Hardware page's graphs and ``ember info --hardware --watch``.

:class:`Sampler` reads one :class:`Sample` (never on the GUI thread: the app samples on its
task runner's ``quick`` lane). CPU use is computed from the difference of CPU times between
two samples, so one sample costs a few system calls and no sleeping: about 0.1 ms, or far less
than 1% of a core at one sample a second (``bench/monitor_cost.py`` prints the share).
:class:`History` keeps the samples of the last :data:`HISTORY_SECONDS`.

Where the numbers come from is a :class:`Source`, so tests give the sampler a fake machine
and a fake clock. GPU memory is what llama.cpp's back-ends report (free and total per device);
llama.cpp cannot tell a GPU's utilisation, so none is shown.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import psutil

HISTORY_SECONDS = 300.0  # five minutes of graphs
SAMPLE_INTERVAL = 1.0  # seconds between samples while someone watches


@dataclass(frozen=True, slots=True)
class GpuSample:
    name: str  # "Vulkan0"
    used: int  # bytes in use (by anything), from the back-end's free and total
    total: int


@dataclass(frozen=True, slots=True)
class Sample:
    """The machine at one moment. CPU shares are 0-100 of the whole machine (every core)."""

    time: float  # the sampler's clock (monotonic seconds)
    ram_total: int
    ram_used: int  # by everything: total minus what is available
    ram_ember: int  # Ember's resident memory (the loaded models' weights included)
    swap_total: int
    swap_used: int
    cpu: float  # the whole machine
    cpu_ember: float  # Ember's process
    gpus: tuple[GpuSample, ...] = ()


@dataclass(frozen=True, slots=True)
class CpuTimes:
    busy: float  # seconds spent working since boot, over all cores
    total: float  # busy plus idle


class Source(Protocol):
    """Where a sample's numbers come from (psutil and llama.cpp's back-ends by default)."""

    def memory(self) -> tuple[int, int]: ...  # RAM total, available
    def swap(self) -> tuple[int, int]: ...  # total, used
    def cpu_times(self) -> CpuTimes: ...  # the machine's
    def process(self) -> tuple[int, float]: ...  # Ember's RSS, CPU seconds so far
    def cores(self) -> int: ...
    def gpus(self) -> tuple[GpuSample, ...]: ...


class PsutilSource:
    """This machine, through psutil; GPUs through llama.cpp's back-ends when asked to."""

    def __init__(self, gpu_reader: Callable[[], tuple[GpuSample, ...]] | None = None) -> None:
        self._process = psutil.Process()
        self._gpu_reader = gpu_reader

    def memory(self) -> tuple[int, int]:
        vm = psutil.virtual_memory()
        return int(vm.total), int(vm.available)

    def swap(self) -> tuple[int, int]:
        sw = psutil.swap_memory()
        return int(sw.total), int(sw.used)

    def cpu_times(self) -> CpuTimes:
        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        total = sum(t)
        # guest time is counted inside user time on Linux: do not count it twice
        total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
        return CpuTimes(busy=total - idle, total=total)

    def process(self) -> tuple[int, float]:
        with self._process.oneshot():
            rss = int(self._process.memory_info().rss)
            times = self._process.cpu_times()
        return rss, float(times.user + times.system)

    def cores(self) -> int:
        return psutil.cpu_count() or 1

    def gpus(self) -> tuple[GpuSample, ...]:
        if self._gpu_reader is None:
            return ()
        try:
            return self._gpu_reader()
        except Exception:  # a driver that fails now and then must not stop the graphs
            return ()


def llama_gpus() -> tuple[GpuSample, ...]:
    """The GPUs llama.cpp's back-ends drive, with the memory they report in use; none until
    something else (a model load, the Hardware page, ``ember info``) loaded the back-ends: the
    monitor never starts a GPU driver by itself."""
    backends = sys.modules.get("app.engine.backends")
    if backends is None or not backends.loaded():
        return ()
    return tuple(
        GpuSample(g.name, max(0, g.total - g.free), g.total) for g in backends.gpu_memory()
    )


class Sampler:
    """Reads one :class:`Sample` at a time; CPU shares are over the time since the last one
    (the first sample's are 0). Not thread-safe: one thread samples."""

    def __init__(
        self, source: Source | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.source: Source = source if source is not None else PsutilSource(llama_gpus)
        self.clock = clock
        self._last: tuple[float, CpuTimes, float] | None = None

    def sample(self) -> Sample:
        now = self.clock()
        src = self.source
        ram_total, available = src.memory()
        swap_total, swap_used = src.swap()
        rss, process_seconds = src.process()
        times = src.cpu_times()
        cpu = cpu_ember = 0.0
        if self._last is not None:
            then, last_times, last_process = self._last
            total = times.total - last_times.total
            if total > 0:
                cpu = _percent((times.busy - last_times.busy) / total)
            elapsed = now - then
            if elapsed > 0:
                cpu_ember = _percent((process_seconds - last_process) / (elapsed * src.cores()))
        self._last = (now, times, process_seconds)
        return Sample(
            time=now,
            ram_total=ram_total,
            ram_used=max(0, ram_total - available),
            ram_ember=rss,
            swap_total=swap_total,
            swap_used=swap_used,
            cpu=cpu,
            cpu_ember=cpu_ember,
            gpus=src.gpus(),
        )


def _percent(fraction: float) -> float:
    return round(min(100.0, max(0.0, fraction * 100.0)), 1)


class History:
    """The samples of the last ``seconds``, oldest first."""

    def __init__(self, seconds: float = HISTORY_SECONDS) -> None:
        self.seconds = seconds
        self._samples: deque[Sample] = deque()

    def add(self, sample: Sample) -> None:
        self._samples.append(sample)
        while self._samples and sample.time - self._samples[0].time > self.seconds:
            self._samples.popleft()

    def __iter__(self) -> Iterator[Sample]:
        return iter(self._samples)

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def latest(self) -> Sample | None:
        return self._samples[-1] if self._samples else None


def describe(sample: Sample) -> list[tuple[str, str]]:
    """One sample as labelled rows (``ember info --hardware --watch`` prints them)."""
    from app.engine.gguf_format import human_bytes

    def share(used: int, total: int) -> str:
        pct = f" ({used / total:.0%})" if total else ""
        return f"{human_bytes(used)} of {human_bytes(total)}{pct}"

    rows = [
        ("RAM", share(sample.ram_used, sample.ram_total)),
        ("  Ember", human_bytes(sample.ram_ember)),
        ("Swap", share(sample.swap_used, sample.swap_total) if sample.swap_total else "none"),
        ("CPU", f"{sample.cpu:.0f}%"),
        ("  Ember", f"{sample.cpu_ember:.0f}%"),
    ]
    rows += [(f"{g.name} memory", share(g.used, g.total)) for g in sample.gpus]
    return rows
