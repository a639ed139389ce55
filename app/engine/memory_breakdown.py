"""What llama.cpp really allocated for a model it loaded: the sizes of the buffers it creates
(weights, KV cache, outputs, compute), per device, read from the lines it logs while loading,
since this llama.cpp has no call that returns them::

    load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
    llama_kv_cache:        CPU KV buffer size =    15.00 MiB
    llama_context:        CPU  output buffer size =    12.00 MiB
    sched_reserve:    Vulkan0 compute buffer size =    34.56 MiB

The engine's log route (app/engine/llamacpp.py) hands every llama.cpp message to
:func:`hear`; a load runs inside :func:`capture`, on the engine thread (the one thread that
calls llama.cpp), so what it collects is that load's. The estimate
(:func:`app.engine.sizing.estimate`) is checked against these numbers
(tests/engine/test_fit_accuracy.py, bench/fit_accuracy.py), and each load's are kept
(app/engine/fit_records.py) so the fit badge can say "measured".
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from app.engine.gguf_format import MIB

_LINE = re.compile(
    r"^\s*[\w~]+:\s+(?P<device>[\w.-]+)\s+(?P<kind>model|KV|output|compute|RS)\s+buffer size"
    r"\s*=\s*(?P<mib>[0-9]+(?:\.[0-9]+)?)\s*MiB\s*$"
)
_MAX_LINE = 300  # longer messages are never buffer sizes: not matched at all


@dataclass(slots=True)
class Breakdown:
    """Bytes llama.cpp allocated, by (device, kind): kinds are ``model`` (weights),
    ``KV``, ``RS`` (recurrent state), ``output`` (logits) and ``compute``."""

    parts: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, device: str, kind: str, size: int) -> None:
        self.parts[(device, kind)] = self.parts.get((device, kind), 0) + size

    @property
    def host_bytes(self) -> int:
        """In RAM: the CPU's buffers (mapped, repacked) and GPU back-ends' host buffers."""
        return sum(n for (device, _k), n in self.parts.items() if _is_host(device))

    @property
    def device_bytes(self) -> int:
        """In GPU memory."""
        return sum(n for (device, _k), n in self.parts.items() if not _is_host(device))

    @property
    def total_bytes(self) -> int:
        return self.host_bytes + self.device_bytes

    def of_kind(self, kind: str) -> int:
        return sum(n for (_d, k), n in self.parts.items() if k == kind)


def _is_host(device: str) -> bool:
    return device.startswith("CPU") or device.endswith("_Host")


def parse_line(message: str) -> tuple[str, str, int] | None:
    """``(device, kind, bytes)`` of a buffer-size line, else None."""
    if len(message) > _MAX_LINE or "buffer size" not in message:
        return None
    m = _LINE.match(message)
    if m is None:
        return None
    return m["device"], m["kind"], round(float(m["mib"]) * MIB)


_lock = threading.Lock()
_collecting: list[Breakdown] = []


def hear(message: str) -> None:
    """One message llama.cpp logged (the engine's log route calls this for each)."""
    if not _collecting:
        return
    found = parse_line(message)
    if found is None:
        return
    with _lock:
        for breakdown in _collecting:
            breakdown.add(*found)


@contextmanager
def capture() -> Iterator[Breakdown]:
    """Collect the buffer sizes llama.cpp logs until the block ends."""
    breakdown = Breakdown()
    with _lock:
        _collecting.append(breakdown)
    try:
        yield breakdown
    finally:
        with _lock:
            _collecting.remove(breakdown)
