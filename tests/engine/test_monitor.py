"""The machine monitor: samples from a fake machine on a fake clock, the history's window,
and one real sample of this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.monitor import GpuSample, History, Sampler, describe
from tests.helpers.machine import GB, FakeClock, FakeMachine


def test_cpu_shares_come_from_the_time_between_two_samples() -> None:
    machine, clock = FakeMachine(), FakeClock()
    sampler = Sampler(machine, clock)
    first = sampler.sample()
    assert (first.cpu, first.cpu_ember) == (0.0, 0.0)  # nothing to compare with yet
    assert first.ram_used == 6 * GB and first.ram_ember == 2 * GB
    assert (first.swap_total, first.swap_used) == (4 * GB, 1 * GB)

    clock.now += 2.0  # two seconds on 4 cores: 8 CPU seconds in all
    machine.busy += 6.0
    machine.total += 8.0
    machine.process_seconds += 2.0  # Ember worked one core for 2 s: a quarter of the machine
    second = sampler.sample()
    assert second.cpu == 75.0
    assert second.cpu_ember == 25.0


def test_shares_stay_within_0_and_100_when_counters_jump() -> None:
    machine, clock = FakeMachine(), FakeClock()
    sampler = Sampler(machine, clock)
    sampler.sample()
    clock.now += 1.0
    machine.process_seconds += 50.0  # more than the machine has: a counter reset or rounding
    machine.busy -= 10.0  # a counter that went backwards
    machine.total += 1.0
    sample = sampler.sample()
    assert sample.cpu_ember == 100.0
    assert sample.cpu == 0.0
    clock.now += 0.0  # no time passed: no division by zero
    assert sampler.sample().cpu_ember == 0.0


def test_history_keeps_the_last_minutes_only() -> None:
    machine, clock = FakeMachine(), FakeClock()
    sampler, history = Sampler(machine, clock), History(seconds=60)
    for _ in range(200):
        history.add(sampler.sample())
        clock.now += 1.0
    times = [s.time for s in history]
    assert len(history) == 61
    assert times[-1] - times[0] == 60
    assert history.latest is not None and history.latest.time == times[-1]


def test_describe_names_ember_share_and_each_gpu() -> None:
    machine = FakeMachine(gpu=(GpuSample("Vulkan0", 3 * GB, 8 * GB),))
    sampler, clock = Sampler(machine, FakeClock()), FakeClock()
    sampler.clock = clock
    sampler.sample()
    clock.now += 1.0
    machine.process_seconds += 1.0
    assert describe(sampler.sample()) == [
        ("RAM", "6.0 GB of 16.0 GB (38%)"),
        ("  Ember", "2.0 GB"),
        ("Swap", "1.0 GB of 4.0 GB (25%)"),
        ("CPU", "0%"),
        ("  Ember", "25%"),
        ("Vulkan0 memory", "3.0 GB of 8.0 GB (38%)"),
    ]


def test_a_real_sample_of_this_machine() -> None:
    sampler = Sampler()
    sampler.sample()
    psutil = pytest.importorskip("psutil")
    busy = [0]
    for i in range(200_000):  # some work, so Ember's share can rise above nothing
        busy[0] += i * i
    sample = sampler.sample()
    assert 0 < sample.ram_used <= sample.ram_total == psutil.virtual_memory().total
    assert 0 < sample.ram_ember < sample.ram_total
    assert 0.0 <= sample.cpu <= 100.0 and 0.0 <= sample.cpu_ember <= 100.0


def test_gpus_are_read_only_once_the_back_ends_are_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The monitor never loads llama.cpp (or starts a GPU driver) by itself."""
    import sys

    from app.engine import backends, monitor
    from app.engine.sizing import GpuMemory

    monkeypatch.setattr(backends, "gpu_memory", lambda: (GpuMemory("Vulkan0", 6 * GB, 8 * GB),))
    monkeypatch.setattr(backends, "_loaded", {})
    assert monitor.llama_gpus() == ()
    monkeypatch.setitem(backends._loaded, Path("/lib"), object())
    assert monitor.llama_gpus() == (GpuSample("Vulkan0", 2 * GB, 8 * GB),)
    monkeypatch.delitem(sys.modules, "app.engine.backends")
    assert monitor.llama_gpus() == ()
