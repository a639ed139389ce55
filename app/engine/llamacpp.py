"""The llama.cpp engine: the only module that imports ``llama_cpp``.

A ``LlamaCppModel`` is one loaded model. It is created, used and closed on the engine worker
thread only (llama.cpp contexts are not thread-safe); the worker serialises every call.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from app.engine import gguf, sizing
from app.engine.templates import ChatTemplate, RenderedPrompt
from app.engine.textstream import StopMatcher, Utf8Stream
from app.engine.types import (
    BadRequestError,
    ChatRequest,
    CompletionRequest,
    ContextOverflowError,
    EngineError,
    FinishReason,
    LoadedModel,
    LoadParams,
    ModelFileError,
    ModelNotFoundError,
    NotGGUFError,
    SamplingParams,
    Timings,
    TruncatedModelError,
    Usage,
)

log = logging.getLogger(__name__)

# The context rule lives in app.engine.sizing (shared with `ember info` and the fit badges);
# re-exported here for existing callers.
DEFAULT_N_CTX = sizing.DEFAULT_N_CTX
MIN_N_CTX = sizing.MIN_N_CTX
SWA_FULL = sizing.SWA_FULL

_KV_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "bf16": 30,
}


_native_log = logging.getLogger("llama.cpp")
_log_callbacks: list[Any] = []  # keeps the ctypes callback alive: C holds only a pointer


_progress_local = threading.local()
_progress_hook: dict[str, Any] = {}  # "original": llama_model_default_params, once wrapped
_progress_hook_lock = threading.Lock()


@contextlib.contextmanager
def _load_progress(progress: Callable[[float], bool] | None) -> Iterator[None]:
    """Report llama.cpp's loading progress to ``progress`` (which may stop the load by returning
    False) for the models this thread opens meanwhile.

    llama-cpp-python builds the model parameters inside ``Llama()`` from
    ``llama_model_default_params()`` and offers no way to pass a progress callback, so that
    function is wrapped once to add the calling thread's callback, if it set one (other threads
    and other loads are untouched).
    """
    if progress is None:
        yield
        return
    import llama_cpp.llama_cpp as native

    with _progress_hook_lock:
        if "original" not in _progress_hook:
            original = _progress_hook["original"] = native.llama_model_default_params

            def with_progress() -> Any:
                params = original()
                callback = getattr(_progress_local, "callback", None)
                if callback is not None:
                    params.progress_callback = callback
                return params

            native.llama_model_default_params = with_progress

    def on_progress(fraction: float, _user_data: Any) -> bool:
        try:
            return bool(progress(float(fraction)))
        except Exception:
            log.exception("A load progress callback raised; loading goes on")
            return True

    _progress_local.callback = native.llama_progress_callback(on_progress)  # kept alive here
    try:
        yield
    finally:
        _progress_local.callback = None


def _llama_cpp() -> Any:
    """Import llama_cpp lazily: importing it loads the native library (slow, and ``ember
    --version`` or the API's schema generation should not need it)."""
    import llama_cpp

    if not _log_callbacks:
        _route_native_logs(llama_cpp)
    return llama_cpp


def _route_native_logs(llama_cpp: Any) -> None:
    """llama.cpp writes to stderr by default, which would litter ``ember run``'s output.
    Send its messages to Python logging instead: errors as warnings, the rest as debug.
    (ggml's levels: 1 debug, 2 info, 3 warn, 4 error, 5 continues the previous message.)"""
    last = [logging.DEBUG]

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, _user_data: Any) -> None:
        py_level = last[0] if level == 5 else logging.WARNING if level == 4 else logging.DEBUG
        last[0] = py_level
        message = text.decode("utf-8", errors="replace").rstrip()
        if message:
            _native_log.log(py_level, "%s", message)

    _log_callbacks.append(forward)
    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))


def default_threads() -> int:
    """One thread per physical core: llama-cpp-python's own default (half the logical CPUs)
    halves decode speed on small machines, and hyper-threads do not help matrix math."""
    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)


def available_memory() -> int:
    return sizing.available_memory()


# ---- cancellation without the GIL -----------------------------------------------------------


class AbortFlag:
    """llama.cpp polls its abort callback between graph nodes, hundreds of times per decode,
    from its own compute threads. A Python callback would take the GIL each time and stall
    decoding whenever another thread runs Python. So the callback is C's ``strlen`` over a
    two-byte buffer: it returns 0 while the flag byte is NUL and 1 once it is set — no Python
    and no GIL in the hot path. Falls back to a Python callback where no C library is found.
    """

    def __init__(self) -> None:
        llama_cpp = _llama_cpp()
        self._buf = ctypes.create_string_buffer(2)
        self._py_flag = threading.Event()
        strlen = _find_strlen()
        if strlen is not None:
            self.callback = llama_cpp.ggml_abort_callback(strlen)
        else:  # pragma: no cover - every supported platform has a C library
            self.callback = llama_cpp.ggml_abort_callback(lambda _data: self._py_flag.is_set())
        self.data = ctypes.cast(self._buf, ctypes.c_void_p)

    def set(self) -> None:
        self._buf[0] = b"\x01"
        self._py_flag.set()

    def clear(self) -> None:
        self._buf[0] = b"\x00"
        self._py_flag.clear()

    def is_set(self) -> bool:
        return self._buf[0] != b"\x00"


def _find_strlen() -> int | None:
    try:
        if sys.platform == "win32":
            libc = ctypes.CDLL("msvcrt")
        else:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        return ctypes.cast(libc.strlen, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


# ---- loading --------------------------------------------------------------------------------


def inspect_model_file(path: str) -> gguf.GGUFInfo:
    """Read and validate the GGUF header, turning format problems into clear engine errors."""
    if not Path(path).is_file():
        raise ModelNotFoundError(f"No model file at {path}. Check the path, or run `ember ls`.")
    try:
        return gguf.read_gguf(path)
    except gguf.NotGGUFError as e:
        raise NotGGUFError(str(e)) from e
    except gguf.GGUFTruncatedError as e:
        raise TruncatedModelError(str(e)) from e
    except gguf.GGUFError as e:
        raise ModelFileError(str(e)) from e


def choose_n_ctx(info: gguf.GGUFInfo, params: LoadParams, available: int) -> int:
    """The context to load with: the user's choice if memory allows, else the default capped
    by the trained length and by memory. Raises OutOfMemoryError naming what would fit.
    The rule itself is :func:`app.engine.sizing.plan_context`."""
    plan = sizing.plan_context(info, params, available)
    n_ctx = plan.check()
    if not plan.automatic and n_ctx > plan.trained:
        log.warning("Context %d exceeds the model's trained %d", n_ctx, plan.trained)
    return n_ctx


@dataclass(slots=True)
class Generation:
    """What one generation produced, besides the streamed text."""

    text: str
    reason: FinishReason
    usage: Usage
    timings: Timings


TextSink = Callable[[str, int], None]


class LlamaCppModel:
    """One loaded llama.cpp model and its context. Worker thread only."""

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
        self.model_id = model_id or self.path
        self.abort = AbortFlag()
        self._eval_sizes: list[int] = []
        self._embedder: Any = None
        llama_cpp = _llama_cpp()
        try:
            with _load_progress(progress):
                self.llm = self._open(llama_cpp, params)
        except (ValueError, RuntimeError, OSError) as e:
            raise EngineError(
                f"llama.cpp could not load {Path(path).name}: {e}. The file may be damaged or "
                "use an architecture this build of llama.cpp does not support."
            ) from e
        llama_cpp.llama_set_abort_callback(self.llm._ctx.ctx, self.abort.callback, self.abort.data)
        self._wrap_eval()
        self._vocab = self.llm._model.vocab
        template = params.chat_template or self.info.chat_template
        self.template = ChatTemplate(
            template,
            bos_token=self._piece_text(self.llm.token_bos()),
            eos_token=self._piece_text(self.llm.token_eos()),
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
        )

    def _open(self, llama_cpp: Any, params: LoadParams) -> Any:
        return llama_cpp.Llama(
            model_path=self.path,
            n_ctx=self.n_ctx,
            n_gpu_layers=params.n_gpu_layers,
            n_threads=self.n_threads,
            n_threads_batch=params.n_threads_batch or self.n_threads,
            n_batch=min(params.n_batch, self.n_ctx),
            n_ubatch=min(params.n_ubatch, params.n_batch, self.n_ctx),
            flash_attn=params.flash_attn,
            swa_full=SWA_FULL,
            use_mmap=params.use_mmap,
            use_mlock=params.use_mlock,
            type_k=_KV_TYPES[params.cache_type_k],
            type_v=_KV_TYPES[params.cache_type_v],
            verbose=False,
        )

    # -- description ----------------------------------------------------------------------

    def _fim_tokens_exist(self) -> bool:
        llama_cpp = _llama_cpp()
        return all(
            f(self._vocab) >= 0
            for f in (
                llama_cpp.llama_vocab_fim_pre,
                llama_cpp.llama_vocab_fim_suf,
                llama_cpp.llama_vocab_fim_mid,
            )
        )

    def describe(self) -> LoadedModel:
        """What was loaded. Built once at load, on the worker thread: other threads (the API,
        the GUI) ask for it any time, and must never call into a model that may be closing."""
        return self._described

    def close(self) -> None:
        for llm in (self._embedder, getattr(self, "llm", None)):
            if llm is not None:
                with contextlib.suppress(Exception):
                    llm.close()
        self._embedder = None

    # -- tokens ---------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        tokens: list[int] = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if add_special and self._adds_bos() and (not tokens or tokens[0] != self.llm.token_bos()):
            tokens.insert(0, self.llm.token_bos())
        return tokens

    def _adds_bos(self) -> bool:
        return bool(_llama_cpp().llama_vocab_get_add_bos(self._vocab))

    def _piece(self, token: int, special: bool = False) -> bytes:
        buf = ctypes.create_string_buffer(128)
        n = _llama_cpp().llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:  # the piece is longer than the buffer: retry with the size asked for
            buf = ctypes.create_string_buffer(-n)
            n = _llama_cpp().llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[: max(n, 0)]

    def _piece_text(self, token: int) -> str:
        return (
            self._piece(token, special=True).decode("utf-8", errors="replace") if token >= 0 else ""
        )

    def _is_eog(self, token: int) -> bool:
        return bool(_llama_cpp().llama_vocab_is_eog(self._vocab, token))

    # -- prompts --------------------------------------------------------------------------

    def render_chat(self, request: ChatRequest) -> RenderedPrompt:
        return self.template.render(request.messages, request.add_generation_prompt, request.tools)

    def completion_tokens(self, request: CompletionRequest) -> list[int]:
        if request.suffix is None:
            return self.tokenize(request.prompt)
        if not self.has_fim:
            raise BadRequestError(
                f"{Path(self.path).name} has no fill-in-the-middle tokens, so `suffix` cannot "
                "be used with it. Use a code model trained for FIM (e.g. Qwen2.5-Coder)."
            )
        llama_cpp = _llama_cpp()
        v = self._vocab
        tokens = [llama_cpp.llama_vocab_fim_pre(v), *self.tokenize(request.prompt, False)]
        tokens += [llama_cpp.llama_vocab_fim_suf(v), *self.tokenize(request.suffix, False)]
        tokens.append(llama_cpp.llama_vocab_fim_mid(v))
        if self._adds_bos():
            tokens.insert(0, self.llm.token_bos())
        return tokens

    # -- generation -----------------------------------------------------------------------

    def _wrap_eval(self) -> None:
        """Record how many tokens each ``eval`` call processes, so the first call of a
        generation tells exactly how much of the prompt the KV cache could not reuse."""
        original = self.llm.eval

        def counting_eval(tokens: Sequence[int]) -> None:
            self._eval_sizes.append(len(tokens))
            original(tokens)

        self.llm.eval = counting_eval

    def generate(
        self,
        prompt_tokens: list[int],
        sampling: SamplingParams,
        cancelled: threading.Event,
        emit: TextSink,
        extra_stop: tuple[str, ...] = (),
    ) -> Generation:
        """Stream a completion of ``prompt_tokens`` into ``emit(text, n_tokens)``."""
        n_prompt = len(prompt_tokens)
        if n_prompt >= self.n_ctx:
            raise ContextOverflowError(
                f"The prompt is {n_prompt} tokens but the model was loaded with a context of "
                f"{self.n_ctx}. Shorten the conversation or load the model with a larger context."
            )
        room = self.n_ctx - n_prompt
        max_tokens = min(sampling.max_tokens or room, room)
        matcher = StopMatcher((*sampling.stop, *extra_stop))
        utf8 = Utf8Stream()
        pieces: list[str] = []
        reason: FinishReason = "length"
        n_out = 0
        started = time.perf_counter()
        first_at: float | None = None
        self._eval_sizes.clear()
        self.abort.clear()
        tokens = self._token_stream(prompt_tokens, sampling)

        def out(text: str, n: int) -> None:
            if text:
                pieces.append(text)
                emit(text, n)

        try:
            for token in tokens:
                if first_at is None:
                    first_at = time.perf_counter()
                if cancelled.is_set():
                    reason = "cancelled"
                    break
                if self._is_eog(token):
                    reason = "stop"
                    break
                n_out += 1
                out(matcher.feed(utf8.feed(self._piece(token))), 1)
                if matcher.stopped:
                    reason = "stop"
                    break
                if n_out >= max_tokens:
                    reason = "length"
                    break
        except RuntimeError:
            # llama_decode returns 2 when our abort callback fired mid-prompt.
            if not (cancelled.is_set() or self.abort.is_set()):
                raise
            reason = "cancelled"
        finally:
            tokens.close()
            self.abort.clear()
        if reason != "stop":
            out(matcher.feed(utf8.flush()) + matcher.flush(), 0)
        ended = time.perf_counter()
        evaluated = self._eval_sizes[0] if self._eval_sizes else 0
        usage = Usage(n_prompt, n_out, cached_tokens=max(0, n_prompt - evaluated))
        return Generation(
            "".join(pieces), reason, usage, _timings(started, first_at, ended, evaluated, n_out)
        )

    def _token_stream(
        self, prompt_tokens: list[int], s: SamplingParams
    ) -> Generator[int, Any, None]:
        llama_cpp = _llama_cpp()
        self.llm.set_seed(s.seed if s.seed is not None else random.randint(0, 2**31 - 1))
        self.llm.last_n_tokens_size = s.repeat_last_n
        grammar = None
        try:
            if s.json_schema is not None:
                grammar = llama_cpp.LlamaGrammar.from_json_schema(
                    json.dumps(s.json_schema), verbose=False
                )
            elif s.grammar:
                grammar = llama_cpp.LlamaGrammar.from_string(s.grammar, verbose=False)
        # llama_cpp's schema converter reports some problems (e.g. an unresolvable $ref)
        # with assert, KeyError or TypeError: all of them are the request's fault.
        except (ValueError, RuntimeError, AssertionError, KeyError, TypeError) as e:
            raise BadRequestError(f"The grammar or JSON schema is invalid: {e}") from e
        if grammar is not None:
            self._check_grammar(grammar._grammar, grammar._root)
        processors = None
        n_vocab = self.llm.n_vocab()
        if s.logit_bias and any(not 0 <= t < n_vocab for t in s.logit_bias):
            raise BadRequestError(f"logit_bias names a token id outside 0..{n_vocab - 1}.")
        if s.logit_bias:
            processors = llama_cpp.LogitsProcessorList([_logit_bias_processor(s.logit_bias)])
        gen: Generator[int, Any, None] = self.llm.generate(
            prompt_tokens,
            top_k=s.top_k,
            top_p=s.top_p,
            min_p=s.min_p,
            typical_p=s.typical_p,
            temp=s.temperature,
            repeat_penalty=s.repeat_penalty,
            frequency_penalty=s.frequency_penalty,
            presence_penalty=s.presence_penalty,
            mirostat_mode=s.mirostat_mode,
            mirostat_tau=s.mirostat_tau,
            mirostat_eta=s.mirostat_eta,
            logits_processor=processors,
            grammar=grammar,
        )
        return gen

    def _check_grammar(self, text: str, root: str) -> None:
        """llama.cpp answers a grammar it cannot parse with a NULL sampler, which
        llama-cpp-python adds to its chain unchecked: the process then segfaults. Parse it
        once here, where a failure is only a clear error."""
        llama_cpp = _llama_cpp()
        sampler = llama_cpp.llama_sampler_init_grammar(
            self._vocab, text.encode("utf-8"), root.encode("utf-8")
        )
        if not sampler:
            raise BadRequestError(
                "The grammar does not parse (GBNF); check it, e.g. with llama.cpp's "
                "gbnf-validator. It needs a `root` rule."
            )
        llama_cpp.llama_sampler_free(sampler)

    # -- embeddings -----------------------------------------------------------------------

    def embed(self, inputs: list[str], normalize: bool) -> tuple[list[list[float]], int]:
        """Embeddings use a second context on the same (memory-mapped, so shared) weights,
        with mean pooling, so they never disturb the chat context's KV cache."""
        if self._embedder is None:
            llama_cpp = _llama_cpp()
            n_ctx = min(self.n_ctx, 4096)
            self._embedder = llama_cpp.Llama(
                model_path=self.path,
                embedding=True,
                pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                n_ctx=n_ctx,
                n_batch=n_ctx,
                n_ubatch=n_ctx,
                n_threads=self.n_threads,
                n_gpu_layers=self.params.n_gpu_layers,
                verbose=False,
            )
        # llama_cpp tokenizes each input once and, with truncate=False, refuses one longer than
        # its batch (n_batch == n_ctx here) with a ValueError instead of cutting it silently:
        # that is the length check, with no tokenizing pass of our own.
        try:
            vectors, count = self._embedder.embed(
                inputs, normalize=normalize, truncate=False, return_count=True
            )
        except ValueError as e:  # "Requested tokens (N) exceed batch size of M"
            raise ContextOverflowError(
                f"An input is longer than the {self._embedder.n_batch} tokens an embedding "
                "can cover; split it into smaller pieces."
            ) from e
        return [list(map(float, v)) for v in vectors], int(count)


def _logit_bias_processor(bias: dict[int, float]) -> Callable[[Any, Any], Any]:
    ids = np.fromiter(bias.keys(), dtype=np.intc)
    values = np.fromiter(bias.values(), dtype=np.single)

    def apply(_input_ids: Any, scores: Any) -> Any:
        scores[ids] += values
        return scores

    return apply


def _timings(
    started: float, first_at: float | None, ended: float, evaluated: int, n_out: int
) -> Timings:
    if first_at is None:
        return Timings(prompt_seconds=ended - started)
    prompt_s = first_at - started
    gen_s = ended - first_at
    return Timings(
        time_to_first_token=prompt_s,
        prompt_seconds=prompt_s,
        generation_seconds=gen_s,
        prompt_tokens_per_second=evaluated / prompt_s if prompt_s > 0 else 0.0,
        generation_tokens_per_second=(n_out - 1) / gen_s if n_out > 1 and gen_s > 0 else 0.0,
    )
