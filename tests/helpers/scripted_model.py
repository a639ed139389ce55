"""A fake loaded model that satisfies :class:`app.engine.types.Model` exactly as the llama.cpp
model does, so the real EngineWorker and Scheduler drive it: batches, sequence ids, the prefix
cache's seq_rm/seq_cp, decode codes, samplers. Tokens are ints; token t's text is
``pieces[t % len(pieces)]``; the prompt is one token per 4 characters. Its "KV cache" records
the positions each sequence holds and checks every batch the way llama.cpp does (consecutive
positions per sequence), so a scheduler bug is an assertion here, not a silent pass.

``tokens_per_second`` paces decodes (None: as fast as possible); ``kv_cells`` bounds the cells
(decode answers 1, no room, beyond it); ``eog_after`` ends every answer after that many tokens;
``script(n)`` gives the n-th token of every answer (default: n, so answers never repeat).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from app.engine.templates import RenderedPrompt
from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    LoadedModel,
    LoadParams,
    LoadRequest,
    SamplingParams,
)
from app.engine.worker import EngineWorker

EOG = -1


class _Abort:
    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()


class _Batch:
    def __init__(self) -> None:
        self.entries: list[tuple[int, int, int, bool]] = []  # (seq, pos, token, output)

    def clear(self) -> None:
        self.entries = []

    def add(self, seq: int, tokens: list[int], start_pos: int, output_last: bool) -> int:
        for i, token in enumerate(tokens):
            last = i == len(tokens) - 1
            self.entries.append((seq, start_pos + i, token, output_last and last))
        return len(self.entries) - 1


class _Sampler:
    """Writes token ids counting up from the sequence's last position."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.n = 0
        self.closed = False

    def sample(self, ctx: Any, idx: int) -> int:
        assert not self.closed
        output = self.model.batch.entries[idx][3]
        assert output, "sampled an output the batch did not ask for"
        self.n += 1
        if self.model.eog_after is not None and self.n > self.model.eog_after:
            return EOG
        return self.model.script(self.n) if self.model.script else self.n

    def close(self) -> None:
        self.closed = True
        self.model.samplers_closed += 1


class ScriptedModel:
    def __init__(
        self,
        request: LoadRequest,
        pieces: tuple[str, ...] = ("word ",),
        tokens_per_second: float | None = None,
        kv_cells: int | None = None,
        eog_after: int | None = None,
        *,
        script: Callable[[int], int] | None = None,
    ) -> None:
        self.path = request.path
        self.model_id = request.model_id or request.path
        self.params = request.params
        self.n_ctx = request.params.n_ctx or 8192
        self.n_parallel = max(1, request.params.n_parallel)
        self.n_seq = self.n_parallel + 4
        self.n_swa = 0
        self.cache_ram = max(0, request.params.cache_ram_mb) * 1024 * 1024
        self.n_batch = max(1, min(request.params.n_batch, self.n_ctx))
        self.abort = _Abort()
        self.batch = _Batch()
        self.pieces = pieces
        self.tokens_per_second = tokens_per_second
        self.kv_cells = kv_cells or self.n_ctx
        self.eog_after = eog_after
        self.script = script  # the n-th token each answer writes (default: n)
        self.kv: dict[int, set[int]] = {s: set() for s in range(self.n_seq)}  # seq -> positions
        self.decodes = 0
        self.batch_sizes: list[int] = []
        self.samplers_closed = 0
        self.samplers_made = 0
        self.most_at_once = 0
        self.closed = False

    @property
    def ctx(self) -> Any:
        return self

    def describe(self) -> LoadedModel:
        return LoadedModel(
            self.model_id, self.path, self.n_ctx, self.n_ctx, 1, self.params, None, False, 0.0
        )

    def close(self) -> None:
        self.closed = True

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        return [1000 + (ord(c) % 1000) for c in text[::4]] or [1000]

    def render_chat(self, request: ChatRequest) -> RenderedPrompt:
        text = "\n".join(str(m.get("content") or "") for m in request.messages)
        return RenderedPrompt(text, (), False)

    def completion_tokens(self, request: CompletionRequest) -> list[int]:
        return self.tokenize(request.prompt)

    def new_sampler(self, sampling: SamplingParams, seed: int) -> _Sampler:
        self.samplers_made += 1
        return _Sampler(self)

    def cells_used(self) -> int:
        cells: set[int] = set()
        for positions in self.kv.values():
            cells |= positions  # a shared prefix shares its cells, as in a unified cache
        return len(cells)

    def decode(self) -> int:
        entries = self.batch.entries
        assert entries, "decode of an empty batch"
        if self.abort.is_set():
            return 2
        seqs = {seq for seq, _, _, _ in entries}
        self.most_at_once = max(self.most_at_once, sum(1 for e in entries if e[3]))
        for seq in seqs:
            positions = [pos for s, pos, _, _ in entries if s == seq]
            expected = max(self.kv[seq], default=-1) + 1
            assert positions == list(range(expected, expected + len(positions))), (
                f"seq {seq}: batch positions {positions[:3]}… after {expected - 1}"
            )
        new = {pos for _, pos, _, _ in entries}
        if len(new | {p for v in self.kv.values() for p in v}) > self.kv_cells:
            return 1
        for seq, pos, _, _ in entries:
            self.kv[seq].add(pos)
        self.decodes += 1
        self.batch_sizes.append(len(entries))
        if self.tokens_per_second:
            time.sleep(1.0 / self.tokens_per_second)
        return 2 if self.abort.is_set() else 0

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        end = p1 if p1 >= 0 else 1 << 30
        self.kv[seq] = {p for p in self.kv[seq] if not (max(p0, 0) <= p < end)}
        return True

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        end = p1 if p1 >= 0 else 1 << 30
        self.kv[dst] |= {p for p in self.kv[src] if max(p0, 0) <= p < end}

    def seq_pos_min(self, seq: int) -> int:
        return min(self.kv[seq], default=-1)

    def seq_pos_max(self, seq: int) -> int:
        return max(self.kv[seq], default=-1)

    def seq_save(self, seq: int) -> bytes:
        return json.dumps(sorted(self.kv[seq])).encode()

    def seq_restore(self, seq: int, data: bytes) -> bool:
        positions = set(json.loads(data))
        if len(positions | {p for v in self.kv.values() for p in v}) > self.kv_cells:
            return False  # no room, as llama_state_seq_set_data may find
        self.kv[seq] = positions
        return True

    def piece(self, token: int, special: bool = False) -> bytes:
        return self.pieces[(token - 1) % len(self.pieces)].encode()

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def embed(
        self, inputs: list[str], normalize: bool, cancelled: Callable[[], bool]
    ) -> tuple[list[list[float]], int]:
        return [[float(len(t)), 1.0] for t in inputs], sum(len(self.tokenize(t)) for t in inputs)


def scripted_factory(
    **options: Any,
) -> Callable[[LoadRequest, Callable[[float], bool]], ScriptedModel]:
    def make(request: LoadRequest, progress: Callable[[float], bool]) -> ScriptedModel:
        progress(1.0)
        return ScriptedModel(request, **options)

    return make


def load_params(**overrides: Any) -> LoadParams:
    return LoadParams(**{"n_ctx": 32768, **overrides})


def worker_with(**options: object) -> tuple[EngineWorker, ScriptedModel]:
    params = options.pop("params", LoadParams(n_ctx=4096, n_parallel=4, n_batch=64))
    worker = EngineWorker(model_factory=scripted_factory(**options))
    worker.load("scripted.gguf", params).result(10)  # type: ignore[arg-type]
    model = worker._state.models["scripted.gguf"]
    assert isinstance(model, ScriptedModel)
    return worker, model


def assert_cache_consistent(worker: EngineWorker, model: ScriptedModel) -> None:
    """Every sequence's KV holds exactly the tokens the prefix cache says, nothing else."""
    scheduler = worker._state.schedulers[model.model_id]
    assert not scheduler.slots
    for entry in scheduler.cache.entries:
        assert not entry.busy
        assert model.kv[entry.seq] == set(range(len(entry.tokens))), entry.seq
    assert model.samplers_closed == model.samplers_made
