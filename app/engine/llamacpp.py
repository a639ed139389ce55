"""The llama.cpp engine: the module that loads models and drives llama.cpp's low-level API.

A :class:`LlamaCppModel` is one loaded model: its weights, one llama.cpp context with
``n_parallel`` generating sequences plus idle sequences that keep recent prompts' KV cache
(see :mod:`app.engine.prefix_cache`), a reusable batch, and a second context for embeddings
made on first use. It satisfies :class:`app.engine.types.Model`; the scheduler
(:mod:`app.engine.scheduler`) drives it. Created, used and closed on the engine worker thread
only (contexts are not thread-safe): ``abort`` may be set from any thread, and the prompt
methods run on :mod:`app.engine.prompt_prep`'s thread too (they read only the vocabulary).

The KV cache is unified (``kv_unified``): every sequence draws cells from one pool of
``n_ctx``, so one long conversation can use the whole context while the others are short, and a
shared prefix (``llama_memory_seq_cp``) costs no memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psutil

from app.engine import backends, memory_breakdown, sizing
from app.engine.backends import gpu_memory  # a module global: tests patch it here
from app.engine.batch import Batch
from app.engine.callbacks import AbortFlag, StopAtHiddenStates, load_llama_cpp
from app.engine.load_settings import kv_cache_type_id, set_load_mode
from app.engine.media import MEDIA_MARKER, NO_PROJECTOR, MediaPrompt, image_prompt
from app.engine.model_file import choose_n_ctx, inspect_model_file
from app.engine.sampling import Sampler, VocabIndex
from app.engine.sizing import available_memory  # a module global: tests patch it here
from app.engine.speculation import draft_rows
from app.engine.templates import ChatTemplate, RenderedPrompt
from app.engine.types import (
    CACHED_SEQUENCES,
    BadRequestError,
    ChatRequest,
    CompletionRequest,
    ContextOverflowError,
    EngineError,
    JobCancelledError,
    LoadedModel,
    LoadParams,
    ProjectorError,
    SamplingParams,
    engine_model_id,
)

if TYPE_CHECKING:
    from app.engine.vision import Projector

log = logging.getLogger(__name__)

# Tokens per decode of the embedding context: its logits buffer is n_vocab x this many floats.
EMBED_CHUNK = 128
# Most tokens one embedding input may have (the embedding context's KV cache is this long).
EMBED_MAX_TOKENS = 8192


def default_threads() -> int:
    """One thread per physical core: llama-cpp-python's own default (half the logical CPUs)
    halves decode speed on small machines, and hyper-threads do not help matrix math."""
    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)


# ---- loading --------------------------------------------------------------------------------


_backend_ready = threading.Lock()
_backend_started: list[bool] = []


def _init_backend(llama_cpp: Any) -> None:
    """Load llama.cpp's back-ends (:func:`app.engine.backends.load`: a DL build's CPU variant
    and GPU modules; nothing for a static build) and initialise llama.cpp, once per process.
    A failure to load them is logged: the CPU code a static build links in still runs."""
    with _backend_ready:
        if not _backend_started:
            try:
                backends.load()
            except Exception as e:  # BackendError, or a library that cannot be opened
                log.warning("llama.cpp's back-ends could not be loaded: %s", e)
            llama_cpp.llama_backend_init()
            _backend_started.append(True)


def gpu_fallback_notice(devices: Sequence[str], name: str) -> str:
    """The one sentence said when the GPU fails during a load and the CPU takes over."""
    where = ", ".join(devices) or "the GPU"
    return f"Loading {name} on the GPU ({where}) failed, so it runs on the CPU instead."


class LlamaCppModel:
    """One loaded llama.cpp model and its context. Worker thread only (see the module doc)."""

    def __init__(
        self,
        path: str,
        params: LoadParams,
        model_id: str | None = None,
        progress: Callable[[float], bool] | None = None,
    ) -> None:
        started = time.perf_counter()
        self.path = str(Path(path).resolve()) if Path(path).exists() else path
        self.info = inspect_model_file(path)
        self.n_ctx = choose_n_ctx(self.info, params, available_memory())
        self.n_threads = params.n_threads or default_threads()
        self.params = params
        self.model_id = engine_model_id(path, model_id)
        self.n_parallel = max(1, params.n_parallel)
        self.cache_ram = max(0, params.cache_ram_mb) * 1024 * 1024
        self.n_seq = self.n_parallel + CACHED_SEQUENCES
        self.n_batch = max(1, min(params.n_batch, self.n_ctx))
        self.abort = AbortFlag()
        self.grammar_seconds = 0.0
        self._vocab_index: VocabIndex | None = None
        self._model: Any = None
        self._ctx: Any = None
        self._embed_ctx: Any = None
        self.projector: Projector | None = None  # the vision projector, when loaded with one
        self.embed_stop: StopAtHiddenStates | None = None  # the embedding context's eval callback
        self._native = native = load_llama_cpp().llama_cpp
        _init_backend(native)
        # Where the layers go: the automatic count resolved with the GPUs llama.cpp lists
        self._gpus = gpu_memory()
        self.offload = sizing.plan_offload(self.info, self.n_ctx, params, self._gpus)
        self._gpus_chosen = sizing.chosen_gpus(self._gpus, params.device)
        self.n_gpu_layers = self.offload.n_gpu_layers
        self.notice: str | None = None
        if params.device not in (sizing.DEVICE_AUTO, sizing.DEVICE_CPU) and not self._gpus_chosen:
            self.notice = self.offload.describe()  # the device chosen is gone: said, on the CPU
        self._load_stopped = False  # the progress callback asked llama.cpp to stop (a cancel)
        try:
            try:
                with memory_breakdown.capture() as self.breakdown:
                    self._load_model(native, params, progress)
            except EngineError as e:
                if not self.n_gpu_layers or self._load_stopped:
                    raise
                with memory_breakdown.capture() as self.breakdown:
                    self._fall_back_to_cpu(native, params, progress, e)
            if params.mmproj:
                self.projector = self._load_projector(params.mmproj)
        except BaseException:
            self.close()
            raise
        log.info(
            "Loaded %s with %d GPU layers (%s): %s",
            Path(self.path).name,
            self.n_gpu_layers,
            ", ".join(self.offload.devices) if self.n_gpu_layers else "CPU",
            self.offload.describe() if not self.notice else self.notice,
        )
        native.llama_set_abort_callback(self._ctx, self.abort.callback, self.abort.data)
        self.memory = native.llama_get_memory(self._ctx)
        self.n_vocab = int(native.llama_vocab_n_tokens(self.vocab))
        self.n_swa = int(native.llama_model_n_swa(self._model))
        self.batch = Batch(native, self.n_batch + self.n_parallel)
        self.bos = int(native.llama_vocab_bos(self.vocab))
        self.eos = int(native.llama_vocab_eos(self.vocab))
        template = params.chat_template or self.info.chat_template
        self.template = ChatTemplate(
            template,
            bos_token=self._piece_text(self.bos),
            eos_token=self._piece_text(self.eos),
            name=Path(self.path).name,
        )
        self.load_seconds = time.perf_counter() - started
        self.has_fim = self._fim_tokens_exist()
        self._described = LoadedModel(
            model_id=self.model_id,
            path=self.path,
            n_ctx=self.n_ctx,
            n_ctx_train=self.info.context_length or self.n_ctx,
            n_threads=self.n_threads,
            params=self.params,
            chat_template=self.template.source,
            has_fim=self.has_fim,
            load_seconds=self.load_seconds,
            vision=self.projector is not None,
            n_gpu_layers=self.n_gpu_layers,
            gpu_devices=self.offload.devices if self.n_gpu_layers else (),
            placement="cpu" if self.notice else self.offload.placement,
            notice=self.notice,
            allocated_ram=self.breakdown.host_bytes,
            allocated_gpu=self.breakdown.device_bytes,
        )

    def _load_model(
        self, native: Any, params: LoadParams, progress: Callable[[float], bool] | None
    ) -> None:
        """The weights and the context, with ``self.n_gpu_layers`` layers on the GPU."""
        self._model = self._load_weights(native, params, progress)
        self.vocab = native.llama_model_get_vocab(self._model)
        self._ctx = self._new_context(native, params)

    def _fall_back_to_cpu(
        self,
        native: Any,
        params: LoadParams,
        progress: Callable[[float], bool] | None,
        error: EngineError,
    ) -> None:
        """The GPU failed while the model loaded (its weights or its context): free what was
        made and load again with every layer on the CPU, saying so in ``self.notice`` (which
        the caller shows: logged here at INFO, so ``ember run`` says it once)."""
        log.info(
            "Loading %s with %d layers on %s failed (%s); loading it on the CPU",
            Path(self.path).name,
            self.n_gpu_layers,
            ", ".join(self.offload.devices) or "the GPU",
            error,
        )
        self.close()
        self.n_gpu_layers = 0
        self._load_model(native, params, progress)
        self.notice = gpu_fallback_notice(self.offload.devices, Path(self.path).name)

    def _load_projector(self, path: str) -> Projector:
        from app.engine.vision import Projector

        projector = Projector(path, self._model, self.n_threads)
        if projector.marker != MEDIA_MARKER:  # a llama.cpp that changed its marker
            projector.close()
            raise ProjectorError(f"llama.cpp's media marker is {projector.marker!r} now.")
        return projector

    def _load_weights(
        self, native: Any, params: LoadParams, progress: Callable[[float], bool] | None
    ) -> Any:
        mparams = native.llama_model_default_params()
        devices = self._device_list()  # alive during the load: llama.cpp copies the list
        if devices is not None:
            mparams.devices = ctypes.cast(devices, ctypes.c_void_p)
        mparams.n_gpu_layers = self.n_gpu_layers
        set_load_mode(mparams, params)
        callback = None
        if progress is not None:

            def on_progress(fraction: float, _user_data: Any) -> bool:
                try:
                    going_on = bool(progress(float(fraction)))
                except Exception:
                    log.exception("A load progress callback raised; loading goes on")
                    return True
                self._load_stopped = self._load_stopped or not going_on
                return going_on

            callback = native.llama_progress_callback(on_progress)  # alive during the load
            mparams.progress_callback = callback
        model = native.llama_model_load_from_file(self.path.encode("utf-8"), mparams)
        del callback, devices
        if not model:
            raise EngineError(
                f"llama.cpp could not load {Path(self.path).name}. The file may be damaged or "
                "use an architecture this build of llama.cpp does not support."
            )
        return model

    def _device_list(self) -> Any:
        """``llama_model_params.devices``: None (llama.cpp's choice: every GPU) when layers
        may go to every GPU; else the NULL-terminated list of the one device chosen
        (``LoadParams.device``), or an empty one when nothing goes to a GPU ("CPU only", a
        chosen device that is not there, a fall-back), so llama.cpp touches no GPU at all."""
        chosen = self.offload.device
        if self.n_gpu_layers and chosen == sizing.DEVICE_AUTO:
            return None
        handle = backends.device_handle(chosen) if self.n_gpu_layers else None
        if self.n_gpu_layers and handle is None:  # listed a moment ago; not now
            log.warning("llama.cpp lists no device %s now; loading on the CPU", chosen)
            self.n_gpu_layers = 0
        if handle is None and not self._gpus:
            return None  # no GPU at all: llama.cpp's own choice is the CPU
        return (ctypes.c_void_p * 2)(handle, None)

    def _context_params(self, native: Any, params: LoadParams) -> Any:
        c = native.llama_context_default_params()
        c.n_ctx = self.n_ctx
        c.n_batch = self.n_batch
        c.n_ubatch = max(1, min(params.n_ubatch, self.n_batch))
        if params.mmproj:  # an image attending both ways must fit one ubatch
            c.n_ubatch = self.n_batch
        c.n_threads = self.n_threads
        c.n_threads_batch = params.n_threads_batch or self.n_threads
        c.flash_attn_type = (  # "auto": llama.cpp falls back where a backend lacks it
            native.LLAMA_FLASH_ATTN_TYPE_AUTO
            if params.flash_attn
            else native.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        c.type_k = kv_cache_type_id(params.cache_type_k)
        c.type_v = kv_cache_type_id(params.cache_type_v)
        c.swa_full = sizing.SWA_FULL
        c.kv_unified = True
        c.no_perf = True
        return c

    def _new_context(self, native: Any, params: LoadParams) -> Any:
        c = self._context_params(native, params)
        c.n_seq_max = self.n_seq
        # llama.cpp reserves an output row per sequence, and one per drafted token a batch holds
        c.n_outputs_max = self.n_seq + draft_rows(self.n_parallel, params.draft_max)
        c.embeddings = False
        ctx = native.llama_init_from_model(self._model, c)
        if not ctx:
            raise EngineError(
                f"llama.cpp could not make a context of {self.n_ctx} tokens for "
                f"{Path(self.path).name}; try a smaller context or fewer parallel answers."
            )
        return ctx

    # -- description ----------------------------------------------------------------------

    def _fim_tokens_exist(self) -> bool:
        n = self._native
        return all(
            f(self.vocab) >= 0
            for f in (n.llama_vocab_fim_pre, n.llama_vocab_fim_suf, n.llama_vocab_fim_mid)
        )

    def describe(self) -> LoadedModel:
        """What was loaded. Built once at load, on the worker thread: other threads (the API,
        the GUI) ask for it any time, and must never call into a model that may be closing."""
        return self._described

    @property
    def ctx(self) -> Any:
        return self._ctx

    def close(self) -> None:
        native = self._native
        projector = getattr(self, "projector", None)
        if projector is not None:  # before the model it was loaded for
            with contextlib.suppress(Exception):
                projector.close()
            self.projector = None
        for attr in ("_embed_ctx", "_ctx"):
            ctx = getattr(self, attr, None)
            if ctx:
                with contextlib.suppress(Exception):
                    native.llama_free(ctx)
            setattr(self, attr, None)
        if getattr(self, "_model", None):
            with contextlib.suppress(Exception):
                native.llama_model_free(self._model)
            self._model = None

    # -- tokens ---------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        native = self._native
        size = len(data) + 2
        while True:
            buf = (native.llama_token * size)()
            n = native.llama_tokenize(self.vocab, data, len(data), buf, size, False, True)
            if n >= 0:
                break
            size = -n
        tokens = list(buf[:n])
        if add_special and self._adds_bos() and (not tokens or tokens[0] != self.bos):
            tokens.insert(0, self.bos)
        return tokens

    def _adds_bos(self) -> bool:
        return bool(self._native.llama_vocab_get_add_bos(self.vocab))

    def piece(self, token: int, special: bool = False) -> bytes:
        buf = ctypes.create_string_buffer(128)
        native = self._native
        n = native.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:  # the piece is longer than the buffer: retry with the size asked for
            buf = ctypes.create_string_buffer(-n)
            n = native.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        return buf.raw[: max(n, 0)]

    def _piece_text(self, token: int) -> str:
        return (
            self.piece(token, special=True).decode("utf-8", errors="replace") if token >= 0 else ""
        )

    def is_eog(self, token: int) -> bool:
        return bool(self._native.llama_vocab_is_eog(self.vocab, token))

    def vocab_index(self, build: bool = True) -> VocabIndex | None:
        """The tokens grouped by their first characters, which makes grammars faster to
        apply. Building it takes 1-2 s for a 262k-token vocabulary, so with ``build=False``
        it is only built once applying grammars to whole vocabularies has cost that much."""
        if self._vocab_index is None and (build or self.grammar_seconds >= VocabIndex.WORTH):
            self._vocab_index = VocabIndex(self)
        return self._vocab_index

    # -- prompts --------------------------------------------------------------------------

    def render_chat(self, request: ChatRequest) -> RenderedPrompt:
        return self.template.render(
            request.messages,
            request.add_generation_prompt,
            request.tools,
            reasoning_effort=request.reasoning_effort,
            thinking_budget=request.thinking_budget,
        )

    def media_prompt(self, text: str, images: tuple[bytes, ...]) -> MediaPrompt:
        """A rendered chat prompt with one media marker per image, tokenized with the
        projector (see :mod:`app.engine.media`)."""
        if self.projector is None:
            raise BadRequestError(NO_PROJECTOR)
        bos = self._piece_text(self.bos)
        if self._adds_bos() and bos and text.startswith(bos):
            text = text[len(bos) :]  # mtmd adds BOS itself: not twice
        return image_prompt(self.projector, text, images)

    def completion_tokens(self, request: CompletionRequest) -> list[int]:
        if request.suffix is None:
            return self.tokenize(request.prompt)
        if not self.has_fim:
            raise BadRequestError(
                f"{Path(self.path).name} has no fill-in-the-middle tokens, so `suffix` cannot "
                "be used with it. Use a code model trained for FIM (e.g. Qwen2.5-Coder)."
            )
        n, v = self._native, self.vocab
        tokens = [n.llama_vocab_fim_pre(v), *self.tokenize(request.prompt, False)]
        tokens += [n.llama_vocab_fim_suf(v), *self.tokenize(request.suffix, False)]
        tokens.append(n.llama_vocab_fim_mid(v))
        if self._adds_bos():
            tokens.insert(0, self.bos)
        return tokens

    # -- what the scheduler calls ---------------------------------------------------------

    def new_sampler(self, sampling: SamplingParams, seed: int) -> Sampler:
        from app.engine.sampling import grammar_for

        if sampling.logit_bias and any(not 0 <= t < self.n_vocab for t in sampling.logit_bias):
            raise BadRequestError(f"logit_bias names a token id outside 0..{self.n_vocab - 1}.")
        return Sampler(self, sampling, seed, grammar_for(sampling))

    def decode(self) -> int:
        """Decode ``self.batch``: llama.cpp's code (0 ok, 1 no room in the KV cache, 2
        aborted, < 0 an error)."""
        return int(self._native.llama_decode(self._ctx, self.batch.ready()))

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        return bool(self._native.llama_memory_seq_rm(self.memory, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self._native.llama_memory_seq_cp(self.memory, src, dst, p0, p1)

    def seq_pos_min(self, seq: int) -> int:
        return int(self._native.llama_memory_seq_pos_min(self.memory, seq))

    def seq_pos_max(self, seq: int) -> int:
        return int(self._native.llama_memory_seq_pos_max(self.memory, seq))

    def seq_save(self, seq: int) -> bytes:
        """The KV cache of ``seq`` as bytes (for the prefix cache's RAM tier)."""
        native = self._native
        size = int(native.llama_state_seq_get_size(self._ctx, seq))
        if size <= 0:
            return b""
        buf = (ctypes.c_uint8 * size)()
        written = int(native.llama_state_seq_get_data(self._ctx, buf, size, seq))
        return ctypes.string_at(buf, written) if written > 0 else b""

    def seq_restore(self, seq: int, data: bytes) -> bool:
        """Put what :meth:`seq_save` gave back into the empty ``seq``; False when llama.cpp
        finds no room for it (the sequence is left empty)."""
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(self._native.llama_state_seq_set_data(self._ctx, buf, len(data), seq)) > 0:
            return True
        self.seq_rm(seq)
        return False

    # -- embeddings -----------------------------------------------------------------------

    def embed(
        self, inputs: list[str], normalize: bool, cancelled: Callable[[], bool] = lambda: False
    ) -> tuple[list[list[float]], int]:
        """Mean-pooled embeddings, from a second context on the same weights (so embeddings
        never disturb the generating sequences' KV cache).

        llama.cpp reserves ``n_vocab`` floats of logits per output when a context makes
        embeddings (a 2,000-token input pooled in one ubatch: 2 GB with a 262k vocabulary),
        and would compute them but for :class:`StopAtHiddenStates`. So the context makes per-token
        embeddings (no pooling) ``EMBED_CHUNK`` tokens at a time, attention reaching back
        through its KV cache as in a prompt, and the mean is taken here: memory stays
        proportional to the input, and a cancel is seen between chunks (or mid-chunk through
        the abort flag)."""
        token_lists = [self.tokenize(text) for text in inputs]
        for tokens in token_lists:
            if len(tokens) > EMBED_MAX_TOKENS:
                raise ContextOverflowError(
                    f"An input is {len(tokens)} tokens; an embedding covers at most "
                    f"{EMBED_MAX_TOKENS:,}. Split it into smaller pieces."
                )
            if not tokens:
                raise BadRequestError("An embedding input is empty.")
        native = self._native
        ctx = self._embedding_context()
        mem = native.llama_get_memory(ctx)
        n_embd = int(native.llama_model_n_embd(self._model))
        batch = Batch(native, EMBED_CHUNK)
        vectors: list[list[float]] = []
        for tokens in token_lists:
            native.llama_memory_clear(mem, True)
            total = np.zeros(n_embd, dtype=np.float64)
            for start in range(0, len(tokens), EMBED_CHUNK):
                if cancelled():
                    raise JobCancelledError
                chunk = tokens[start : start + EMBED_CHUNK]
                batch.clear()
                batch.add(0, chunk, start, output_last=False)
                batch.logits[: batch.n] = 1
                code = int(native.llama_decode(ctx, batch.ready()))
                if code == 2 or (code != 0 and cancelled()):
                    raise JobCancelledError
                if code != 0:
                    raise EngineError(f"llama.cpp could not compute the embedding (code {code}).")
                rows = native.llama_get_embeddings(ctx)
                if not rows:
                    raise EngineError("llama.cpp returned no embeddings for this model.")
                block = np.ctypeslib.as_array(rows, shape=(len(chunk) * n_embd,))
                total += block.reshape(len(chunk), n_embd).sum(axis=0, dtype=np.float64)
            mean = total / len(tokens)
            if normalize:
                norm = float(np.linalg.norm(mean))
                if norm > 0:
                    mean = mean / norm
            vectors.append([float(x) for x in mean])
        return vectors, sum(len(t) for t in token_lists)

    def _embedding_context(self) -> Any:
        if self._embed_ctx is None:
            native = self._native
            c = self._context_params(native, self.params)
            c.n_ctx = min(EMBED_MAX_TOKENS, max(self.n_ctx, EMBED_CHUNK))
            c.n_batch = c.n_ubatch = EMBED_CHUNK
            c.n_seq_max = 1
            c.n_outputs_max = EMBED_CHUNK
            c.embeddings = True
            c.pooling_type = native.LLAMA_POOLING_TYPE_NONE
            self.embed_stop = StopAtHiddenStates.make(native)
            if self.embed_stop is not None:
                c.cb_eval = self.embed_stop.callback
            ctx = native.llama_init_from_model(self._model, c)
            if not ctx:
                raise EngineError("llama.cpp could not make a context for embeddings.")
            native.llama_set_abort_callback(ctx, self.abort.callback, self.abort.data)
            self._embed_ctx = ctx
        return self._embed_ctx
