"""Engine contracts: requests, parameters, events and errors.

Everything that produces tokens speaks these types: the llama.cpp engine, the remote engine,
the GUI bridge and the HTTP routes. No Qt, no llama_cpp imports here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

if TYPE_CHECKING:
    from app.engine.templates import RenderedPrompt

KVCacheType = Literal["f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"]
FinishReason = Literal["stop", "length", "cancelled", "error", "tool_calls"]

_job_ids = itertools.count(1)

DEFAULT_PARALLEL = 4  # answers decoded together by default (llama-server's and LM Studio's 4)
DEFAULT_N_BATCH = 512  # prompt tokens per decode (llama.cpp's default)
DEFAULT_KV_CACHE_TYPE: KVCacheType = "f16"  # the KV cache's type unless one is chosen
# Idle sequences kept beside the generating ones, each holding a recent prompt's KV cache
CACHED_SEQUENCES = 8
# RAM kept for evicted conversations' KV cache by default (llama-server's --cache-ram: 8192)
DEFAULT_CACHE_RAM_MB = 1024


def new_job_id() -> str:
    return f"job-{next(_job_ids)}"


@dataclass(frozen=True, slots=True)
class LoadParams:
    """How a model is loaded. ``None`` means "pick a sensible default for this machine"."""

    n_ctx: int | None = None
    # Layers offloaded to the GPU: -2 automatic (as many as fit in free GPU memory,
    # app.engine.sizing.AUTO_GPU_LAYERS), -1 all, 0 none (CPU only), N that many.
    n_gpu_layers: int = -2
    n_threads: int | None = None
    n_threads_batch: int | None = None
    n_batch: int = DEFAULT_N_BATCH
    n_ubatch: int = 512
    # On: llama.cpp's "auto" (used where the backend has it, as llama-server does). Its CPU
    # kernel skips the cells a sequence may not see (the other conversations kept in the
    # shared cache): a decode step costs 0.6-0.8x as much with cached conversations around,
    # about the same with none (bench/flash_attn.py).
    flash_attn: bool = True
    use_mmap: bool = True
    use_mlock: bool = False
    cache_type_k: KVCacheType = DEFAULT_KV_CACHE_TYPE
    cache_type_v: KVCacheType = DEFAULT_KV_CACHE_TYPE
    chat_template: str | None = None  # overrides the template in the GGUF metadata
    n_parallel: int = (
        DEFAULT_PARALLEL  # answers decoded together (sequence slots sharing one context)
    )
    # RAM (MiB) for the KV of conversations evicted from the context, restored on a return
    cache_ram_mb: int = DEFAULT_CACHE_RAM_MB
    # a vision projector (mmproj GGUF) loaded with the model: chats may then carry images
    mmproj: str | None = None
    # Where layers may be offloaded: "auto" (every GPU llama.cpp lists), "cpu" (none), or one
    # device's name ("Vulkan0"): that device only (Settings → Hardware, ``--device``)
    device: str = "auto"
    # Load even when the estimate says the model does not fit (Load anyway, ``--force``,
    # ``"force": true``): the check that raises ModelTooLargeError is skipped
    force: bool = False
    # Speculative decoding (app.engine.speculation): most tokens drafted per answer and step,
    # from a request's prediction, by prompt lookup or by the draft model; 0 turns it off
    draft_max: int = 16
    # A draft model (a smaller GGUF with the same vocabulary) that drafts instead of prompt
    # lookup (app.engine.draft_model; Settings → Model loading, ``--draft-model``)
    draft_model: str | None = None


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Sampling shared by every caller (GUI, API, CLI). Defaults follow llama.cpp's."""

    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None  # None: until the context is full
    stop: tuple[str, ...] = ()
    mirostat_mode: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    logit_bias: dict[int, float] | None = None
    grammar: str | None = None  # GBNF
    json_schema: dict[str, Any] | None = None  # constrains output to JSON matching it
    # Lazy grammar (llama.cpp's "grammar triggers"): with patterns here, the grammar (or
    # schema) constrains nothing until one of these regular expressions matches the answer
    # so far; from the start of that match (of its first group, if it has one) on, the text
    # must follow the grammar. A tool call's format opens with its trigger.
    grammar_triggers: tuple[str, ...] = ()


class ChatMessage(TypedDict, total=False):
    role: str
    # Text, or OpenAI content parts ({"type": "text", "text": ...}, {"type": "image_url", ...})
    # for a remote provider. The local engine gets text: images become media markers in it and
    # their bytes go in ChatRequest.images.
    content: str | list[dict[str, Any]] | None
    name: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str


@dataclass(slots=True)
class ChatRequest:
    messages: list[ChatMessage]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    model: str | None = None  # a loaded model's id; None: the most recently loaded one
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True
    priority: int = 0  # higher goes ahead of waiting jobs (the app's chats: 1, API: 0)
    # PNG/JPEG bytes, one per media marker (app.engine.media.MEDIA_MARKER) in the messages'
    # text, in order: only for a model loaded with a vision projector
    images: tuple[bytes, ...] = ()
    # How hard a reasoning model thinks: "none" (no thinking), "minimal", "low", "medium",
    # "high"; None: the model's default. Mapped onto what the model's template supports.
    reasoning_effort: str | None = None
    # At most this many tokens of thinking; then the engine closes the thinking in the
    # model's own format and the answer follows. None: no limit.
    thinking_budget: int | None = None
    # Render the model's control tokens in the answer's text ("preserved tokens"): the markers
    # a family writes its tool calls and channels with ([TOOL_CALLS], <|channel|>,
    # <|python_tag|>…), which its reader (app/server/toolcalls) looks for. End-of-generation
    # tokens still end the answer unseen.
    special_tokens: bool = False
    # Send PromptProgress while a long prompt is read (the app shows it; an API stream does
    # not want events that would hold back its keep-alives).
    prompt_progress: bool = False
    # The text the answer is expected to be (OpenAI's ``prediction``, e.g. a file before an
    # edit): drafts for speculative decoding; the answer itself is the model's, unchanged.
    prediction: str | None = None


@dataclass(slots=True)
class CompletionRequest:
    prompt: str
    sampling: SamplingParams = field(default_factory=SamplingParams)
    model: str | None = None
    suffix: str | None = None  # fill-in-the-middle: the text after the cursor
    echo: bool = False


@dataclass(slots=True)
class LoadRequest:
    path: str
    params: LoadParams = field(default_factory=LoadParams)
    model_id: str | None = None  # defaults to the file's path (engine_model_id)


def engine_model_id(path: str, model_id: str | None = None) -> str:
    """The id the engine keeps a loaded model under: the one given, else the file's resolved
    path (a relative path or a link names the same model as its target)."""
    if model_id:
        return model_id
    return str(Path(path).resolve()) if Path(path).exists() else path


@dataclass(slots=True)
class UnloadRequest:
    model: str | None = None  # None: unload every model


@dataclass(slots=True)
class TokenizeRequest:
    text: str
    model: str | None = None
    add_special: bool = True


@dataclass(slots=True)
class EmbeddingRequest:
    inputs: list[str]
    model: str | None = None
    normalize: bool = True


@dataclass(slots=True)
class RenderPromptRequest:
    """Ask for the exact prompt text a chat request would be turned into."""

    chat: ChatRequest


Request = (
    ChatRequest
    | CompletionRequest
    | LoadRequest
    | UnloadRequest
    | TokenizeRequest
    | EmbeddingRequest
    | RenderPromptRequest
)


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens reused from the KV cache (not evaluated again)
    # speculative decoding: tokens drafted (prediction or prompt lookup), and those accepted
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    predicted: bool = False  # the request had a prediction (OpenAI reports it when so)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def evaluated_prompt_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


@dataclass(frozen=True, slots=True)
class Timings:
    time_to_first_token: float = 0.0  # seconds from the job's start to its first token
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    prompt_tokens_per_second: float = 0.0
    generation_tokens_per_second: float = 0.0
    queued_seconds: float = 0.0  # time spent waiting in the worker's queue


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """What a successful load job returns."""

    model_id: str
    path: str
    n_ctx: int
    n_ctx_train: int
    n_threads: int
    params: LoadParams
    chat_template: str | None
    has_fim: bool
    load_seconds: float
    vision: bool = False  # loaded with a vision projector: chats may carry images
    # Where the layers went: the count llama.cpp was given (automatic resolved, 0 after a
    # fall-back to the CPU), the GPUs it could use, and one sentence saying so
    n_gpu_layers: int = 0
    gpu_devices: tuple[str, ...] = ()
    placement: str = ""
    # One sentence for the person when the load did not go as asked (a GPU that failed and
    # the CPU that took over); the app shows it, ``ember run`` prints it, the API logs it
    notice: str | None = None
    # What llama.cpp allocated for it (weights, KV cache, outputs, compute) in RAM and in GPU
    # memory, as it reported while loading (app/engine/memory_breakdown.py); 0: not known
    allocated_ram: int = 0
    allocated_gpu: int = 0

    @property
    def runs_on(self) -> str:
        """Where the layers run, for a status line: "the CPU", "Vulkan0 (19 layers)"."""
        if self.n_gpu_layers <= 0 or not self.gpu_devices:
            return "the CPU"
        return f"{', '.join(self.gpu_devices)} ({self.n_gpu_layers} layers)"


# ---- events ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Started:
    job_id: str


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of generated text (already UTF-8 clean, never part of a stop string)."""

    job_id: str
    text: str
    token_count: int = 1


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    job_id: str
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """How far a load job has read the model's weights, 0.0 to 1.0 (llama.cpp's own count)."""

    job_id: str
    fraction: float


@dataclass(frozen=True, slots=True)
class PromptProgress:
    """How far a generation has read its prompt: ``done`` of ``total`` tokens (the cached
    prefix counts as read). Sent, for a ChatRequest with ``prompt_progress``, after each
    chunk of a prompt longer than one batch, until the last chunk (the first token follows)."""

    job_id: str
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class Finished:
    """The job's final event when it did not fail. ``result`` holds non-streaming output
    (a LoadedModel, token ids, embeddings, a rendered prompt, or the full generated text)."""

    job_id: str
    reason: FinishReason
    usage: Usage = Usage()
    timings: Timings = Timings()
    result: Any = None
    stop_sequence: str | None = None  # the stop string that ended a "stop" answer, if one did


@dataclass(frozen=True, slots=True)
class Failed:
    """The job's final event when it failed. ``reason`` is always "error"."""

    job_id: str
    error: EngineError
    usage: Usage = Usage()
    timings: Timings = Timings()

    @property
    def reason(self) -> FinishReason:
        return "error"


Event = Started | Delta | ToolCallDelta | LoadProgress | PromptProgress | Finished | Failed
FinalEvent = Finished | Failed


# ---- errors ---------------------------------------------------------------------------------


class EngineError(Exception):
    """An error a user can act on. ``code`` is stable and machine-readable."""

    code = "engine_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ModelFileError(EngineError):
    code = "model_file"


class ModelNotFoundError(ModelFileError):
    code = "model_not_found"


class NotGGUFError(ModelFileError):
    code = "not_gguf"


class TruncatedModelError(ModelFileError):
    code = "truncated_model"


class OutOfMemoryError(EngineError):
    code = "out_of_memory"

    def __init__(self, message: str, fits_n_ctx: int | None = None) -> None:
        super().__init__(message)
        self.fits_n_ctx = fits_n_ctx


# The one override, named the same way wherever a load can be refused for memory
FORCE_HINT = (
    "To load it anyway (it may then fail, or make the computer swap): Load anyway in the app, "
    '--force with ember run and ember serve, "force": true on the API\'s load request.'
)


class ModelTooLargeError(OutOfMemoryError):
    """A load refused before it starts: the estimate says the model does not fit the free
    memory. ``LoadParams.force`` (Load anyway, ``--force``, ``"force": true``) skips the
    check."""

    code = "model_too_large"

    def __init__(
        self,
        message: str,
        fits_n_ctx: int | None = None,
        needed_bytes: int = 0,
        available_bytes: int = 0,
    ) -> None:
        super().__init__(message, fits_n_ctx)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes


class ModelNotLoadedError(EngineError):
    code = "model_not_loaded"


class ContextOverflowError(EngineError):
    code = "context_overflow"


class BadRequestError(EngineError):
    code = "bad_request"


class EngineCrashedError(EngineError):
    code = "engine_crashed"


class QueueFullError(EngineError):
    code = "queue_full"


class ProjectorError(EngineError):
    """The projector file cannot be used with this model (missing, damaged, wrong size)."""

    code = "projector"


class JobCancelledError(Exception):
    """A job noticed, in the thread doing its work, that it was cancelled (an embedding on the
    engine thread, a remote model's stream): whoever runs it answers a "cancelled" Finished."""


# ---- the engine seam: what the worker and its scheduler need of a loaded model ---------------


class AbortLike(Protocol):
    def set(self) -> None: ...

    def clear(self) -> None: ...

    def is_set(self) -> bool: ...


class BatchLike(Protocol):
    def clear(self) -> None: ...

    def add(self, seq: int, tokens: list[int], start_pos: int, output_last: bool) -> int: ...


class SamplerLike(Protocol):
    def sample(self, ctx: Any, idx: int) -> int: ...

    def close(self) -> None: ...


class Model(Protocol):
    """A loaded model as the engine worker drives it: ``app.engine.llamacpp.LlamaCppModel``,
    and the fakes tests use. Worker thread only, except ``abort`` and ``describe``."""

    model_id: str
    n_ctx: int
    n_parallel: int  # sequences generating at once
    n_seq: int  # sequences in the context: n_parallel plus idle ones kept as a prefix cache
    n_batch: int  # most tokens one decode takes
    n_swa: int  # the sliding attention window of the model's local layers (0: none)
    cache_ram: int  # bytes of RAM for evicted sequences' KV (0: none)

    @property
    def abort(self) -> AbortLike: ...

    @property
    def batch(self) -> BatchLike: ...

    @property
    def ctx(self) -> Any: ...

    def describe(self) -> LoadedModel: ...

    def close(self) -> None: ...

    def tokenize(self, text: str, add_special: bool = True) -> list[int]: ...

    def render_chat(self, request: ChatRequest) -> RenderedPrompt: ...

    def completion_tokens(self, request: CompletionRequest) -> list[int]: ...

    def new_sampler(self, sampling: SamplingParams, seed: int) -> SamplerLike: ...

    def decode(self) -> int: ...

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool: ...

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None: ...

    def seq_pos_min(self, seq: int) -> int: ...

    def seq_pos_max(self, seq: int) -> int: ...

    def seq_save(self, seq: int) -> bytes: ...

    def seq_restore(self, seq: int, data: bytes) -> bool: ...

    def piece(self, token: int, special: bool = False) -> bytes: ...

    def is_eog(self, token: int) -> bool: ...

    def embed(
        self, inputs: list[str], normalize: bool, cancelled: Callable[[], bool]
    ) -> tuple[list[list[float]], int]: ...


def content_text(content: object) -> str:
    """A message's text: its content, or its text parts one per line (other parts and
    anything that is not content give nothing)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = (p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "\n".join(str(text) for text in texts if text is not None)
