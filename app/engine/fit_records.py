"""What each load really took, kept so the fit badge can say "measured" instead of estimating.

After every load the engine records what llama.cpp allocated (app/engine/memory_breakdown.py)
beside the estimate, keyed by the model file (its name and size, so the same file downloaded
again, or seen on the Hub before it is downloaded, matches), the device and GPU layers, the
context and the other settings that change the memory (KV cache types, batch, parallel
answers, flash attention). ``cache/fit_records.json`` in EMBER_HOME holds the newest
:data:`MAX_RECORDS`; writes are atomic and private, and a damaged file is started over.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from app.config import atomic_write_text, paths
from app.engine.types import LoadedModel, LoadParams

log = logging.getLogger(__name__)

MAX_RECORDS = 256
_MAX_FILE_BYTES = 1024 * 1024  # a larger file is not ours to trust: started over
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Measured:
    """What llama.cpp allocated at one load (bytes), beside the estimate for it."""

    ram: int
    gpu: int
    estimated: int
    when: float  # seconds since the epoch

    @property
    def total(self) -> int:
        return self.ram + self.gpu


def record_key(
    file_name: str, file_size: int, params: LoadParams, n_ctx: int, n_gpu_layers: int
) -> str:
    """The settings that change a load's memory, as one string."""
    return json.dumps(
        [
            Path(file_name).name.lower(),
            file_size,
            n_ctx,
            params.cache_type_k,
            params.cache_type_v,
            params.n_batch,
            max(1, params.n_parallel),
            params.flash_attn,
            n_gpu_layers,
            params.device,
        ]
    )


class FitRecords:
    """The measured loads in ``path`` (default: EMBER_HOME's ``cache/fit_records.json``)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths().cache_dir / "fit_records.json"

    def _read(self) -> dict[str, dict[str, float]]:
        try:
            if self.path.stat().st_size > _MAX_FILE_BYTES:
                return {}
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as e:
            log.info("The fit records in %s could not be read (%s); starting over", self.path, e)
            return {}
        return data if isinstance(data, dict) else {}

    def add(self, loaded: LoadedModel, file_size: int, estimated: int) -> None:
        """Keep what ``loaded`` took (nothing when llama.cpp did not say)."""
        if loaded.allocated_ram + loaded.allocated_gpu <= 0:
            return
        key = record_key(loaded.path, file_size, loaded.params, loaded.n_ctx, loaded.n_gpu_layers)
        entry = {
            "ram": loaded.allocated_ram,
            "gpu": loaded.allocated_gpu,
            "estimated": estimated,
            "when": time.time(),
        }
        with _lock:
            records = self._read()
            records.pop(key, None)
            records[key] = entry  # newest last
            while len(records) > MAX_RECORDS:
                records.pop(next(iter(records)))
            try:
                atomic_write_text(self.path, json.dumps(records))
            except OSError as e:
                log.warning("Could not keep the fit record in %s: %s", self.path, e)

    def get(
        self, file_name: str, file_size: int, params: LoadParams, n_ctx: int, n_gpu_layers: int
    ) -> Measured | None:
        entry = self._read().get(record_key(file_name, file_size, params, n_ctx, n_gpu_layers))
        if not isinstance(entry, dict):
            return None
        try:
            return Measured(
                int(entry["ram"]), int(entry["gpu"]), int(entry["estimated"]), float(entry["when"])
            )
        except (KeyError, TypeError, ValueError):
            return None
