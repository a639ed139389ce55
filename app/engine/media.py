"""Images in a chat prompt, for the scheduler: admission and the image's own decode.

A chat request carries images (``ChatRequest.images``) and one :data:`MEDIA_MARKER` in its
messages' text where each goes. :func:`image_prompt` tokenizes the rendered prompt with the
model's :class:`~app.engine.vision.Projector` into a :class:`MediaPrompt`: a token list the
scheduler and the prefix cache treat like any prompt, in which every position of an image
holds a *pseudo-token*, a negative int made from the image's SHA-256 and the offset in it.
No real token is negative, so a cached prefix matches an image only when it is the same
image, and never past the start of a different one.

A batch holds token ids or embeddings, never both: an image is a ``llama_decode`` of its own
(:func:`decode_image`), with causal attention off when the projector says (Gemma 3), at the
sequence's next positions. Encoding (``mtmd_encode_chunk``) cannot be aborted, so the
scheduler checks for a cancel before and after it.

Worker thread only, like the model.
"""

from __future__ import annotations

import bisect
import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.engine.types import BadRequestError, ContextOverflowError

if TYPE_CHECKING:
    import numpy as np

    from app.engine.vision import Chunks, Projector

# llama.cpp's mtmd_default_marker(); the projector checks it is still this at load
MEDIA_MARKER = "<__media__>"

NO_PROJECTOR = "This model takes no images; load it with a vision projector (--mmproj)."

_SPAN = 1 << 20  # offsets inside one image (far more positions than any image takes)


def pseudo_token(sha256: str, offset: int) -> int:
    """The prompt entry for position ``offset`` of the image ``sha256``: always negative."""
    return -(1 + (int(sha256[:10], 16) << 20) + offset % _SPAN)


@dataclass(frozen=True, slots=True)
class ImageItem:
    """An image in a prompt: where it starts, how many positions it takes, its chunk."""

    start: int  # index in the prompt (its first position)
    n_pos: int
    chunk: int  # index in the prompt's Chunks
    sha256: str
    non_causal: bool


class MediaPrompt:
    """A tokenized prompt with images: ``tokens`` (pseudo-tokens at image positions), the
    images by start, and the mtmd chunks the images are encoded from (close it)."""

    def __init__(self, tokens: list[int], images: list[ImageItem], chunks: Chunks) -> None:
        self.tokens = tokens
        self.images = images
        self._starts = [i.start for i in images]
        self._chunks: Chunks | None = chunks

    def close(self) -> None:
        if self._chunks is not None:
            self._chunks.close()
            self._chunks = None

    def image_at(self, position: int) -> ImageItem | None:
        """The image starting at ``position``, if one does."""
        i = bisect.bisect_left(self._starts, position)
        if i < len(self.images) and self._starts[i] == position:
            return self.images[i]
        return None

    def text_run(self, position: int, pending: int) -> int:
        """How many of the ``pending`` entries from ``position`` on are text before the next
        image (all of them when no image follows)."""
        i = bisect.bisect_left(self._starts, position)
        if i < len(self._starts):
            return min(pending, self._starts[i] - position)
        return pending

    def round_down(self, n: int) -> int:
        """A reusable prefix of ``n`` entries, cut back to the start of an image it ends in."""
        i = bisect.bisect_right(self._starts, n - 1) - 1
        if i >= 0:
            item = self.images[i]
            if item.start < n < item.start + item.n_pos:
                return item.start
        return n

    def encode(self, item: ImageItem) -> np.ndarray:
        if self._chunks is None:
            raise BadRequestError("The prompt's images were released; send the request again.")
        return self._chunks.encode(item.chunk)


def chat_media(model: Any, text: str, images: tuple[bytes, ...]) -> MediaPrompt:
    """``model``'s tokenized prompt with images; a clear error for a model without a projector."""
    make = getattr(model, "media_prompt", None)
    if make is None or getattr(model, "projector", None) is None:
        raise BadRequestError(NO_PROJECTOR)
    prompt: MediaPrompt = make(text, images)
    return prompt


def image_prompt(projector: Projector, text: str, images: tuple[bytes, ...]) -> MediaPrompt:
    """Tokenize a rendered prompt holding one :data:`MEDIA_MARKER` per image."""
    chunks = projector.tokenize(text, list(images))
    try:
        tokens: list[int] = []
        items: list[ImageItem] = []
        for index, info in enumerate(chunks.infos()):
            if info.kind == "text":
                tokens.extend(info.tokens)
                continue
            if info.kind != "image" or info.id is None:
                raise BadRequestError("Only images are accepted in a prompt (no audio).")
            if info.n_pos != info.n_tokens:
                raise BadRequestError(
                    "This projector places image positions in 2-D (M-RoPE), which Ember's "
                    "engine does not support yet; use a model whose projector does not."
                )
            items.append(
                ImageItem(len(tokens), info.n_pos, index, info.id, chunks.non_causal(index))
            )
            tokens.extend(pseudo_token(info.id, k) for k in range(info.n_pos))
    except BaseException:
        chunks.close()
        raise
    return MediaPrompt(tokens, items, chunks)


def decode_image(
    llama_ctx: Any,
    embeddings: np.ndarray,
    pos0: int,
    seq: int,
    *,
    non_causal: bool,
    n_batch: int,
) -> tuple[int, int]:
    """Decode an image's embeddings into sequence ``seq`` from ``pos0``: one decode when the
    attention goes both ways (it must fit one ubatch), else slices of ``n_batch``. Logits
    for the last row. Returns llama.cpp's code and the batch index of that row."""
    import numpy as np
    from llama_cpp import llama_cpp

    data = np.ascontiguousarray(embeddings, dtype=np.float32)
    n_tokens, n_embd = data.shape
    if non_causal and n_tokens > int(llama_cpp.llama_n_ubatch(llama_ctx)):
        # both-way attention holds only inside one ubatch: a split image would be wrong
        raise ContextOverflowError(
            f"An image of {n_tokens} tokens needs a physical batch (n_ubatch) of at least "
            f"{n_tokens}; load the model with a larger batch."
        )
    step = n_tokens if non_causal else max(1, n_batch)
    last = 0
    for start in range(0, n_tokens, step):
        rows = data[start : start + step]
        k = len(rows)
        batch = llama_cpp.llama_batch_init(k, n_embd, 1)
        try:
            ctypes.memmove(batch.embd, rows.ctypes.data, rows.nbytes)
            for i in range(k):
                batch.pos[i] = pos0 + start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq
                batch.logits[i] = 1 if start + i == n_tokens - 1 else 0
            batch.n_tokens = k
            if non_causal:
                llama_cpp.llama_set_causal_attn(llama_ctx, False)
            try:
                code = int(llama_cpp.llama_decode(llama_ctx, batch))
            finally:
                if non_causal:
                    llama_cpp.llama_set_causal_attn(llama_ctx, True)
        finally:
            llama_cpp.llama_batch_free(batch)
        if code != 0:
            return code, -1
        last = k - 1
    return 0, last
