"""The reusable ``llama_batch`` a loaded model decodes with. Worker thread only."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np


class Batch:
    """A ``llama_batch`` whose arrays are numpy arrays owned here, so a step fills it with a few
    vectorised assignments (one sequence id per token). Never passed to ``llama_batch_free``."""

    def __init__(self, native: Any, capacity: int) -> None:
        self.capacity = capacity
        self.token = np.zeros(capacity, dtype=np.int32)
        self.pos = np.zeros(capacity, dtype=np.int32)
        self.n_seq_id = np.ones(capacity, dtype=np.int32)
        self.seq = np.zeros(capacity, dtype=np.int32)
        self.logits = np.zeros(capacity, dtype=np.int8)
        i32 = ctypes.POINTER(ctypes.c_int32)
        self._seq_ptrs = (i32 * capacity)()
        base = self.seq.ctypes.data
        for i in range(capacity):
            self._seq_ptrs[i] = ctypes.cast(base + 4 * i, i32)
        b = self.native = native.llama_batch()
        b.n_tokens = 0
        b.token = self.token.ctypes.data_as(i32)
        b.embd = ctypes.POINTER(ctypes.c_float)()
        b.pos = self.pos.ctypes.data_as(i32)
        b.n_seq_id = self.n_seq_id.ctypes.data_as(i32)
        b.seq_id = ctypes.cast(self._seq_ptrs, ctypes.POINTER(i32))
        b.logits = self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8))
        self.n = 0

    def clear(self) -> None:
        self.n = 0

    def add(self, seq: int, tokens: Sequence[int], start_pos: int, output_last: bool) -> int:
        """Append ``tokens`` of sequence ``seq`` at positions from ``start_pos``; the last one
        gets logits if ``output_last``. Returns the batch index of the last token."""
        n, k = self.n, len(tokens)
        if n + k > self.capacity:
            raise ValueError("batch overflow")
        end = n + k
        self.token[n:end] = tokens
        self.pos[n:end] = np.arange(start_pos, start_pos + k, dtype=np.int32)
        self.seq[n:end] = seq
        self.logits[n:end] = 0
        if output_last:
            self.logits[end - 1] = 1
        self.n = end
        return end - 1

    def ready(self) -> Any:
        self.native.n_tokens = self.n
        return self.native
