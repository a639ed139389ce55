"""Images for a model with a vision projector (mmproj): llama.cpp's multimodal library, ``mtmd``.

A :class:`Projector` is loaded for one loaded text model (``mtmd_init_from_file`` checks that
the projector's output size is the model's embedding size). It turns a prompt holding media
markers plus one image per marker into :class:`Chunks`: runs of text tokens and image chunks.
An image chunk is encoded by the projector into ``n_tokens`` embeddings of the text model's
width, which the text model decodes in place of token ids (``llama_batch.embd``); it also
advances the sequence's positions by its ``n_pos`` (equal to ``n_tokens`` except for M-RoPE
models). Each image chunk carries the SHA-256 of the image's file bytes as its id, the key a
prefix cache can use for it.

Threads: everything here calls into the text model's llama.cpp objects, so it runs on the
thread that owns them (the engine worker), like ``app.engine.llamacpp``.

Bound before C: :func:`app.engine.image_bounds.inspect_image` reads each image in Python
(format, size, a PNG's inflated data, a JPEG's scans) and refuses what is too large or damaged.
Only then does ``mtmd_helper_bitmap_init_from_buf`` decode it. That helper falls back to
decoding anything it cannot read as a video through ffmpeg when llama.cpp is built with video
support (this build is); the fallback is pointed at a folder with no ffmpeg in it, so a damaged
image is an error, never a subprocess fed untrusted bytes.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.image_bounds import MAX_IMAGES, ImageError, inspect_image
from app.engine.types import BadRequestError, ContextOverflowError, EngineError, ProjectorError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 1_000_000

# A folder that holds no ffmpeg: mtmd's video fallback (see the module doc) finds nothing there.
_NO_FFMPEG = b"/nonexistent-ember-no-ffmpeg"

CHUNK_TEXT, CHUNK_IMAGE, CHUNK_AUDIO = 0, 1, 2


@dataclass(frozen=True)
class ChunkInfo:
    """One chunk of a tokenized prompt: text tokens, or one image's tokens."""

    kind: str  # "text" or "image"
    n_tokens: int
    n_pos: int  # positions the chunk advances the sequence by
    id: str | None = None  # an image chunk's SHA-256 of its file bytes
    tokens: tuple[int, ...] = ()  # a text chunk's token ids


def check_projector_file(path: Path) -> None:
    """Read the projector's GGUF header in Python (bounded, never its tensors) so a file that
    is missing, cut short or not a projector is a clear error before clip.cpp parses it."""
    from app.engine import gguf

    try:
        info = gguf.read_gguf(path)
    except gguf.GGUFNotFoundError:
        raise ProjectorError(f"No projector file at {path}. Check the path.") from None
    except gguf.GGUFError as e:
        raise ProjectorError(f"The projector {path.name} cannot be used: {e}") from e
    if info.architecture != "clip" or not (
        info.metadata.get("clip.has_vision_encoder") or "clip.vision.image_size" in info.metadata
    ):
        raise ProjectorError(
            f"{path.name} is not a vision projector (its architecture is "
            f"{info.architecture or 'unnamed'}). Choose the model's mmproj file."
        )


# ---- native ---------------------------------------------------------------------------------

_log_lock = threading.Lock()
_log_callbacks: list[Any] = []  # keeps the ctypes callback alive: C holds only a pointer


def _mtmd() -> Any:
    """llama_cpp's mtmd bindings, imported lazily (loading them loads the native library);
    mtmd's own log (it does not use llama.cpp's) goes to Python logging once."""
    from llama_cpp import llama_cpp, mtmd_cpp

    with _log_lock:
        if not _log_callbacks:
            native_log = logging.getLogger("llama.cpp")

            @llama_cpp.llama_log_callback
            def forward(level: int, text: bytes, _user_data: Any) -> None:
                message = text.decode("utf-8", errors="replace").rstrip()
                if message:
                    native_log.log(logging.WARNING if level == 4 else logging.DEBUG, "%s", message)

            _log_callbacks.append(forward)
            mtmd_cpp.mtmd_helper_log_set(forward, ctypes.c_void_p(0))
    return mtmd_cpp


class Projector:
    """A vision projector loaded for one loaded text model (``llama_model *``).

    Close it before the text model is freed. Not thread-safe: the owner of the text model
    calls it (see the module doc)."""

    def __init__(self, path: str | Path, text_model: Any, n_threads: int = 1) -> None:
        self.path = Path(path)
        check_projector_file(self.path)
        self._m = m = _mtmd()
        params = m.mtmd_context_params_default()
        params.use_gpu = False
        params.print_timings = False
        params.n_threads = max(1, n_threads)
        self._ctx: Any = m.mtmd_init_from_file(str(self.path).encode("utf-8"), text_model, params)
        if not self._ctx:
            raise ProjectorError(
                f"llama.cpp could not load the projector {self.path.name} for this model. It may "
                "be damaged, belong to another model (its embedding size must match the "
                "model's), or need a newer llama.cpp. Download the projector made for this model."
            )
        if not m.mtmd_support_vision(self._ctx):
            self.close()
            raise ProjectorError(
                f"{self.path.name} is not a vision projector (it takes no images). "
                "Choose the model's vision projector (mmproj) file."
            )
        from llama_cpp import llama_cpp

        self.n_embd = int(llama_cpp.llama_model_n_embd_inp(text_model))
        self.marker: str = m.mtmd_default_marker().decode("utf-8")

    def __enter__(self) -> Projector:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def ctx(self) -> Any:
        return self._ctx

    def close(self) -> None:
        if self._ctx:
            self._m.mtmd_free(self._ctx)
            self._ctx = None

    def _require_open(self) -> Any:
        if not self._ctx:
            raise ProjectorError("The projector was closed; load the model with it again.")
        return self._ctx

    @contextlib.contextmanager
    def bitmap(self, data: bytes) -> Iterator[Any]:
        """A decoded image (``mtmd_bitmap *``) for the duration of the ``with`` block."""
        info = inspect_image(data)
        ctx = self._require_open()
        m = self._m
        opt = m.mtmd_helper_init_opt_default()
        opt.video_params.ffmpeg_bin_dir = _NO_FFMPEG
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        wrapper = m.mtmd_helper_bitmap_init_from_buf_wrapper(ctx, buf, len(data), False, opt)
        bitmap, video = wrapper.bitmap, wrapper.video_ctx
        try:
            # a video stream is never asked for (the fallback finds no ffmpeg): refuse it too
            if not bitmap or video:
                raise ImageError(
                    f"The {info.format.upper()} image could not be decoded; it is damaged or "
                    "uses a variant llama.cpp does not read. Save it again as PNG."
                )
            nx, ny = m.mtmd_bitmap_get_nx(bitmap), m.mtmd_bitmap_get_ny(bitmap)
            if (nx, ny) != (info.width, info.height) or m.mtmd_bitmap_is_audio(bitmap):
                raise ImageError(
                    f"The image decoded to {nx}x{ny} pixels but its header says "
                    f"{info.width}x{info.height}; it is damaged. Save it again."
                )
            yield bitmap
        finally:
            if bitmap:
                m.mtmd_bitmap_free(bitmap)
            if video:  # after the bitmap, which may read from it
                m.mtmd_helper_video_free(video)

    def tokenize(self, prompt: str, images: Sequence[bytes]) -> Chunks:
        """Split ``prompt`` at its media markers (:attr:`marker`), one image per marker, into
        text and image chunks. The prompt's special tokens are parsed (a rendered chat
        template); BOS is added as the model's vocabulary asks."""
        count = prompt.count(self.marker)
        if count != len(images):
            raise BadRequestError(
                f"The prompt has {count} image marker(s) {self.marker!r} but {len(images)} "
                "image(s) came with it; each image needs one marker where it belongs."
            )
        if len(images) > MAX_IMAGES:
            raise BadRequestError(
                f"{len(images)} images in one prompt; up to {MAX_IMAGES} are accepted."
            )
        if len(prompt) > MAX_PROMPT_CHARS:
            raise BadRequestError(
                f"The prompt is {len(prompt)} characters; up to {MAX_PROMPT_CHARS} go with images."
            )
        for data in images:  # every image refused before any is decoded
            inspect_image(data)
        ctx = self._require_open()
        m = self._m
        with contextlib.ExitStack() as stack:
            bitmaps = [stack.enter_context(self.bitmap(data)) for data in images]
            array = (m.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            text = prompt.encode("utf-8")
            inp = m.mtmd_input_text()
            inp.text = text
            inp.text_len = len(text)
            inp.add_special = True
            inp.parse_special = True
            handle = m.mtmd_input_chunks_init()
            if not handle:
                raise EngineError("llama.cpp could not allocate the prompt's chunks.")
            chunks = Chunks(self, handle)
            try:
                status = m.mtmd_tokenize(ctx, handle, ctypes.byref(inp), array, len(bitmaps))
            except BaseException:
                chunks.close()
                raise
            if status != 0:
                chunks.close()
                raise BadRequestError(
                    "llama.cpp could not split the prompt around its images "
                    f"(mtmd_tokenize returned {status}); the log says why."
                )
        return chunks


class Chunks:
    """A tokenized prompt with images (``mtmd_input_chunks *``): free it with :meth:`close`
    (or ``with``). Embeddings and evaluation go through the projector that made it."""

    def __init__(self, projector: Projector, handle: Any) -> None:
        self._projector = projector
        self._m = projector._m
        self._handle: Any = handle

    def __enter__(self) -> Chunks:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._handle:
            self._m.mtmd_input_chunks_free(self._handle)
            self._handle = None

    def _chunk(self, index: int) -> Any:
        if not self._handle:
            raise EngineError("These chunks were freed; tokenize the prompt again.")
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._m.mtmd_input_chunks_get(self._handle, index)

    def __len__(self) -> int:
        return int(self._m.mtmd_input_chunks_size(self._handle)) if self._handle else 0

    def info(self, index: int) -> ChunkInfo:
        m, chunk = self._m, self._chunk(index)
        kind = int(m.mtmd_input_chunk_get_type(chunk))
        n_tokens = int(m.mtmd_input_chunk_get_n_tokens(chunk))
        n_pos = int(m.mtmd_input_chunk_get_n_pos(chunk))
        if kind == CHUNK_TEXT:
            n = ctypes.c_size_t(0)
            ptr = m.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            tokens = tuple(ptr[i] for i in range(n.value)) if ptr else ()
            return ChunkInfo("text", n_tokens, n_pos, tokens=tokens)
        raw_id = m.mtmd_input_chunk_get_id(chunk)
        chunk_id = raw_id.decode("ascii") if raw_id else None
        return ChunkInfo("image" if kind == CHUNK_IMAGE else "audio", n_tokens, n_pos, chunk_id)

    def infos(self) -> list[ChunkInfo]:
        return [self.info(i) for i in range(len(self))]

    def non_causal(self, index: int) -> bool:
        """Whether the model attends both ways across this chunk's embeddings (Gemma 3's
        images): decode them in one ubatch with causal attention off."""
        ctx = self._projector._require_open()
        return bool(self._m.mtmd_decode_use_non_causal(ctx, self._chunk(index)))

    @property
    def n_tokens(self) -> int:
        return int(self._m.mtmd_helper_get_n_tokens(self._handle)) if self._handle else 0

    @property
    def n_pos(self) -> int:
        return int(self._m.mtmd_helper_get_n_pos(self._handle)) if self._handle else 0

    def encode(self, index: int) -> np.ndarray:
        """The image chunk's embeddings, ``(n_tokens, n_embd)`` float32 (a copy: mtmd's own
        buffer is reused by the next encode)."""
        import numpy as np

        m, chunk = self._m, self._chunk(index)
        if int(m.mtmd_input_chunk_get_type(chunk)) != CHUNK_IMAGE:
            raise BadRequestError(f"Chunk {index} is not an image; only images are encoded.")
        ctx = self._projector._require_open()
        if m.mtmd_encode_chunk(ctx, chunk) != 0:
            raise EngineError("The projector could not encode the image; the log says why.")
        n_tokens = int(m.mtmd_input_chunk_get_n_tokens(chunk))
        out = m.mtmd_get_output_embd(ctx)
        if not out:
            raise EngineError("The projector returned no embeddings for the image.")
        count = n_tokens * self._projector.n_embd
        flat = np.ctypeslib.as_array(out, shape=(count,))
        return flat.reshape(n_tokens, self._projector.n_embd).copy()

    def evaluate(self, llama_ctx: Any, n_past: int, seq_id: int = 0, n_batch: int = 512) -> int:
        """Decode every chunk into ``llama_ctx``'s sequence ``seq_id`` from position
        ``n_past`` (text as tokens, images encoded then decoded as embeddings), logits for the
        last one; returns the next position. llama.cpp's reference path, for tests and for
        checking a scheduler's own batching against."""
        from llama_cpp import llama_cpp

        ctx = self._projector._require_open()
        if not self._handle:
            raise EngineError("These chunks were freed; tokenize the prompt again.")
        new_n_past = llama_cpp.llama_pos(0)
        status = self._m.mtmd_helper_eval_chunks(
            ctx, llama_ctx, self._handle, n_past, seq_id, n_batch, True, ctypes.byref(new_n_past)
        )
        if status != 0:
            raise EngineError(
                f"llama.cpp could not evaluate the prompt with its images (status {status}); "
                "the context may be too small for it."
            )
        return int(new_n_past.value)


def decode_embeddings(
    llama_ctx: Any,
    embeddings: np.ndarray,
    pos0: int,
    seq_id: int = 0,
    *,
    non_causal: bool = False,
    logits_last: bool = True,
) -> int:
    """Decode an image's embeddings (``(n_tokens, n_embd)``, from :meth:`Chunks.encode`)
    into ``llama_ctx``'s sequence ``seq_id`` at positions ``pos0`` onwards, the way a
    scheduler adds an image to its own batches: a ``llama_batch`` whose ``embd`` holds the
    rows instead of token ids (a batch carries ids or embeddings, never both, so an image is
    a decode of its own). Returns the next position. Normal positions only (not M-RoPE)."""
    import numpy as np
    from llama_cpp import llama_cpp

    data = np.ascontiguousarray(embeddings, dtype=np.float32)
    if data.ndim != 2 or not data.shape[0]:
        raise BadRequestError("Image embeddings must be a non-empty (n_tokens, n_embd) array.")
    n_tokens, n_embd = data.shape
    expected = int(llama_cpp.llama_model_n_embd_inp(llama_cpp.llama_get_model(llama_ctx)))
    if n_embd != expected:
        raise BadRequestError(f"Image embeddings are {n_embd} wide; the model takes {expected}.")
    if non_causal and n_tokens > int(llama_cpp.llama_n_ubatch(llama_ctx)):
        # both-way attention only holds inside one ubatch: a split image would be wrong
        raise ContextOverflowError(
            f"An image of {n_tokens} tokens needs a physical batch (n_ubatch) of at least "
            f"{n_tokens}; load the model with a larger one."
        )
    batch = llama_cpp.llama_batch_init(n_tokens, n_embd, 1)
    try:
        ctypes.memmove(batch.embd, data.ctypes.data, data.nbytes)
        for i in range(n_tokens):
            batch.pos[i] = pos0 + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq_id
            batch.logits[i] = 1 if logits_last and i == n_tokens - 1 else 0
        batch.n_tokens = n_tokens
        if non_causal:
            llama_cpp.llama_set_causal_attn(llama_ctx, False)
        try:
            status = llama_cpp.llama_decode(llama_ctx, batch)
        finally:
            if non_causal:
                llama_cpp.llama_set_causal_attn(llama_ctx, True)
    finally:
        llama_cpp.llama_batch_free(batch)
    if status != 0:
        raise EngineError(
            f"llama.cpp could not decode the image's {n_tokens} embeddings (status {status}); "
            "the context may be full."
        )
    return pos0 + n_tokens
