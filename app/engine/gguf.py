"""Read a GGUF model's header without loading the model, and estimate the memory it needs.

A GGUF file holds gigabytes of weights behind a header of a few megabytes. What Ember shows
about a model before loading it (architecture, quantization, trained context, chat template,
whether it fits in memory) comes from that header alone, so this module reads only the header
(metadata key/values and tensor descriptions) and never the tensor data. One parser serves a
local file (:func:`read_gguf`) and the head of a remote file fetched with an HTTP range
request (:func:`parse_gguf_bytes`).

Format: ggml's ``docs/gguf.md``. Type tables follow llama.cpp's ``ggml.h`` (``ggml_type``),
``llama.h`` (``llama_ftype``) and gguf-py's ``GGML_QUANT_SIZES``.
Pure Python, stdlib only: no Qt, no llama_cpp, no numpy.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

__all__ = [
    "ArrayInfo",
    "GGMLType",
    "GGUFCorruptError",
    "GGUFError",
    "GGUFInfo",
    "GGUFNeedMoreData",
    "GGUFNotFoundError",
    "GGUFTruncatedError",
    "GGUFUnsupportedError",
    "MemoryEstimate",
    "NotGGUFError",
    "TensorInfo",
    "estimate_memory",
    "format_info",
    "ggml_type",
    "human_bytes",
    "max_context_for_memory",
    "parse_gguf_bytes",
    "read_gguf",
]

GGUF_MAGIC: Final = b"GGUF"
DEFAULT_ALIGNMENT: Final = 32
SMALL_ARRAY_MAX: Final = 64  # metadata arrays up to this length are kept as values
# Per-layer arrays (head_count_kv, sliding_window_pattern, ...) must survive even in models
# with more than SMALL_ARRAY_MAX layers; only tokenizer.* arrays are ever vocabulary-sized.
_LAYER_ARRAY_MAX: Final = 4096
_MAX_STRING: Final = 1 << 30  # 1 GiB: no real key, value or token comes close
_MAX_ARRAY: Final = 100_000_000  # vocabularies are < 1M; anything this large is garbage
_MAX_TENSORS: Final = 10_000_000
_MAX_KV: Final = 1_000_000
_MAX_DIMS: Final = 4  # GGML_MAX_DIMS
_CHUNK: Final = 1 << 20  # read the header in 1 MiB chunks
_KV_PAD: Final = 256  # llama.cpp pads KV cache sizes to 256 cells
_FALLBACK_CONTEXT: Final = 4096  # when a model does not say its trained context


# --- errors --------------------------------------------------------------------------------


class GGUFError(ValueError):
    """A model file (or the head of one) cannot be used; the message says what to do."""


class GGUFNotFoundError(GGUFError):
    """There is no file at the given path."""


class NotGGUFError(GGUFError):
    """The file is something else (safetensors, a web page, a Git LFS pointer, ...)."""


class GGUFUnsupportedError(GGUFError):
    """A GGUF version or tensor type this version of Ember does not know."""


class GGUFCorruptError(GGUFError):
    """The header contains values no real model has (absurd counts or lengths)."""


class GGUFTruncatedError(GGUFError):
    """The file is shorter than its own header says: usually an interrupted download."""

    def __init__(self, name: str, expected: int, actual: int, *, at_least: bool = False) -> None:
        self.expected = expected
        self.actual = actual
        bound = "at least " if at_least else ""
        super().__init__(
            f"{name} is incomplete: expected {bound}{expected:,} bytes but the file has "
            f"{actual:,} (the download was probably interrupted); download it again"
        )


class GGUFNeedMoreData(GGUFError):  # noqa: N818 - a request, not a failure
    """The bytes given to :func:`parse_gguf_bytes` end before the header does.

    ``minimum`` is a true lower bound of the total bytes needed; ``needed`` is what to fetch
    next (at least ``minimum``, at least double what was given, at most the file size) so that
    a fetch loop finishes in a few round trips even when the vocabulary alone is megabytes.
    """

    def __init__(self, needed: int, *, minimum: int, have: int) -> None:
        self.needed = needed
        self.minimum = minimum
        self.have = have
        super().__init__(
            f"The header continues past the {have:,} bytes given; fetch at least "
            f"{minimum:,} bytes (try {needed:,})"
        )


# --- type tables ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GGMLType:
    """A ggml tensor type: ``block_size`` elements are stored in ``type_size`` bytes."""

    id: int
    name: str
    block_size: int
    type_size: int

    def row_bytes(self, n_elements: int) -> int:
        """Bytes for ``n_elements`` values; a partial block still takes a whole block."""
        return -(-n_elements // self.block_size) * self.type_size


_QK_K: Final = 256
_GGML_TYPES: Final[dict[int, GGMLType]] = {
    t[0]: GGMLType(*t)
    for t in (
        (0, "F32", 1, 4),
        (1, "F16", 1, 2),
        (2, "Q4_0", 32, 2 + 16),
        (3, "Q4_1", 32, 2 + 2 + 16),
        (6, "Q5_0", 32, 2 + 4 + 16),
        (7, "Q5_1", 32, 2 + 2 + 4 + 16),
        (8, "Q8_0", 32, 2 + 32),
        (9, "Q8_1", 32, 4 + 4 + 32),
        (10, "Q2_K", 256, 2 + 2 + _QK_K // 16 + _QK_K // 4),
        (11, "Q3_K", 256, 2 + _QK_K // 4 + _QK_K // 8 + 12),
        (12, "Q4_K", 256, 2 + 2 + _QK_K // 2 + 12),
        (13, "Q5_K", 256, 2 + 2 + _QK_K // 2 + _QK_K // 8 + 12),
        (14, "Q6_K", 256, 2 + _QK_K // 2 + _QK_K // 4 + _QK_K // 16),
        (15, "Q8_K", 256, 4 + _QK_K + _QK_K // 8),
        (16, "IQ2_XXS", 256, 2 + _QK_K // 4),
        (17, "IQ2_XS", 256, 2 + _QK_K // 4 + _QK_K // 32),
        (18, "IQ3_XXS", 256, 2 + _QK_K // 4 + _QK_K // 8),
        (19, "IQ1_S", 256, 2 + _QK_K // 8 + _QK_K // 16),
        (20, "IQ4_NL", 32, 2 + 16),
        (21, "IQ3_S", 256, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),
        (22, "IQ2_S", 256, 2 + _QK_K // 4 + _QK_K // 16),
        (23, "IQ4_XS", 256, 2 + 2 + _QK_K // 2 + _QK_K // 64),
        (24, "I8", 1, 1),
        (25, "I16", 1, 2),
        (26, "I32", 1, 4),
        (27, "I64", 1, 8),
        (28, "F64", 1, 8),
        (29, "IQ1_M", 256, _QK_K // 8 + _QK_K // 16 + _QK_K // 32),
        (30, "BF16", 1, 2),
        # 31-33 and 36-38 are repacked layouts removed from llama.cpp; old files still exist.
        (31, "Q4_0_4_4", 32, 2 + 16),
        (32, "Q4_0_4_8", 32, 2 + 16),
        (33, "Q4_0_8_8", 32, 2 + 16),
        (34, "TQ1_0", 256, 2 + 4 * 13),
        (35, "TQ2_0", 256, 2 + 64),
        (36, "IQ4_NL_4_4", 32, 2 + 16),
        (37, "IQ4_NL_4_8", 32, 2 + 16),
        (38, "IQ4_NL_8_8", 32, 2 + 16),
        (39, "MXFP4", 32, 1 + 16),
        (40, "NVFP4", 64, 4 + 32),
        (41, "Q1_0", 128, 2 + 16),
        (42, "Q2_0", 64, 2 + 16),
    )
}
_GGML_BY_NAME: Final = {t.name.lower(): t for t in _GGML_TYPES.values()}

# llama.cpp's llama_ftype (general.file_type) -> the name people know the file by.
_FILE_TYPES: Final[dict[int, str]] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_1_SOME_F16", 7: "Q8_0", 8: "Q5_0",
    9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S",
    15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS",
    21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S",
    27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    33: "Q4_0_4_4", 34: "Q4_0_4_8", 35: "Q4_0_8_8", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}  # fmt: skip
_FTYPE_GUESSED: Final = 1024

# GGUF metadata value types.
_SCALAR_FORMATS: Final = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
                          10: "Q", 11: "q", 12: "d"}  # fmt: skip
_STRING: Final = 8
_ARRAY: Final = 9


def ggml_type(name_or_id: str | int) -> GGMLType:
    """Look up a ggml type by id or case-insensitive name ("q8_0", "F16")."""
    found = (
        _GGML_TYPES.get(name_or_id)
        if isinstance(name_or_id, int)
        else _GGML_BY_NAME.get(name_or_id.lower())
    )
    if found is None:
        raise ValueError(f"Unknown ggml type {name_or_id!r}")
    return found


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArrayInfo:
    """A metadata array too large to keep (a vocabulary): its element type and length only."""

    type: int
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor's description; ``shape`` is in GGUF order (fastest-varying dimension first)."""

    name: str
    shape: tuple[int, ...]
    type: GGMLType
    offset: int  # relative to GGUFInfo.tensor_data_offset
    n_bytes: int

    @property
    def n_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True, slots=True, kw_only=True)
class GGUFInfo:
    """Everything Ember knows about a model from its header. Immutable; safe to share."""

    path: str | None
    file_size: int | None
    version: int
    byte_order: str  # "little" or "big"
    tensor_count: int
    metadata: dict[str, Any] = field(repr=False)
    tensors: tuple[TensorInfo, ...] = field(repr=False)
    architecture: str | None
    name: str | None
    size_label: str | None
    parameter_count: int
    file_type: int | None
    quantization: str
    context_length: int | None
    block_count: int | None
    head_count: int | None
    head_count_kv: int | None  # the largest, when it varies by layer
    embedding_length: int | None
    feed_forward_length: int | None
    key_length: int | None
    value_length: int | None
    sliding_window: int | None
    chat_template: str | None
    tokenizer_model: str | None
    vocab_size: int | None
    bos_token_id: int | None
    eos_token_id: int | None
    has_fim: bool
    split_count: int  # > 1: this file is one shard; sizes and counts cover this shard only
    alignment: int
    tensor_data_offset: int
    tensor_data_size: int
    expected_file_size: int

    @property
    def is_complete(self) -> bool | None:
        """Whether the file is as long as its tensors need (None when the size is unknown)."""
        return None if self.file_size is None else self.file_size >= self.expected_file_size

    def layer_kv_heads(self) -> tuple[int, ...]:
        """KV heads of each layer; some models (OpenELM, DeciLM, hybrids) vary them by layer."""
        value = self.metadata.get(f"{self.architecture}.attention.head_count_kv")
        if value is None:
            value = self.metadata.get(f"{self.architecture}.attention.head_count")
        return _per_layer(value, self.block_count or 0)


# --- the reader ----------------------------------------------------------------------------


class _Reader:
    """Bounds-checked sequential reads of a binary stream, in chunks.

    ``size`` is how many bytes the stream holds (the file size, or the length of a downloaded
    head). A read past it calls ``short(total_bytes_needed)`` for the error to raise, so the
    same parser reports a truncated file or asks for more bytes of a remote one.
    """

    def __init__(
        self, stream: BinaryIO, size: int, name: str, short: Callable[[int], GGUFError]
    ) -> None:
        self.name = name
        self._stream = stream
        self._size = size
        self._short = short
        self._buf = b""
        self._base = 0  # absolute file position of _buf[0]
        self._off = 0
        self.set_byte_order("<")

    def set_byte_order(self, order: str) -> None:
        self.order = order
        self._u32 = struct.Struct(order + "I")
        self._u64 = struct.Struct(order + "Q")
        self._scalars = {t: struct.Struct(order + f) for t, f in _SCALAR_FORMATS.items()}

    @property
    def pos(self) -> int:
        return self._base + self._off

    def _fill(self, n: int) -> None:
        rest = len(self._buf) - self._off
        if rest >= n:
            return
        pos = self.pos
        if pos + n > self._size:
            raise self._short(pos + n)
        data = self._read_up_to(min(max(n - rest, _CHUNK), self._size - pos - rest))
        if rest + len(data) < n:  # the file shrank while we read it
            raise self._short(pos + n)
        self._buf = self._buf[self._off :] + data
        self._base, self._off = pos, 0

    def _read_up_to(self, want: int) -> bytes:
        """Raw reads may return less than asked; keep reading until ``want`` bytes or EOF."""
        parts: list[bytes] = []
        got = 0
        while got < want:
            part = self._stream.read(want - got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def peek(self, n: int) -> bytes:
        """Up to ``n`` bytes from here, fewer if the stream ends; never raises."""
        if len(self._buf) - self._off < n:
            self._fill(min(n, self._size - self.pos))
        return self._buf[self._off : self._off + n]

    def take(self, n: int) -> bytes:
        self._fill(n)
        start = self._off
        self._off += n
        return self._buf[start : self._off]

    def skip(self, n: int) -> None:
        if n <= len(self._buf) - self._off:
            self._off += n
            return
        target = self.pos + n
        if target > self._size:
            raise self._short(target)
        self._stream.seek(target)  # the data in between is never read
        self._buf, self._base, self._off = b"", target, 0

    def _unpack(self, st: struct.Struct) -> Any:
        self._fill(st.size)
        value = st.unpack_from(self._buf, self._off)[0]
        self._off += st.size
        return value

    def u32(self) -> int:
        return int(self._unpack(self._u32))

    def u64(self) -> int:
        return int(self._unpack(self._u64))

    def scalar(self, vtype: int) -> int | float | bool:
        return self._unpack(self._scalars[vtype])

    def scalars(self, vtype: int, count: int) -> list[Any]:
        st = struct.Struct(f"{self.order}{count}{_SCALAR_FORMATS[vtype]}")
        return list(st.unpack(self.take(st.size)))

    def _string_length(self) -> int:
        at = self.pos
        n = self.u64()
        if n > _MAX_STRING:
            raise GGUFCorruptError(
                f"{self.name} is damaged: it claims a {n:,}-byte string at byte {at:,}; "
                "download it again"
            )
        return n

    def string(self) -> str:
        return self.take(self._string_length()).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip(self._string_length())

    def skip_strings(self, count: int) -> None:
        """Skip ``count`` strings: the hot loop over 100k+ vocabulary entries, so it walks the
        buffer directly and falls back to the checked path only at chunk boundaries."""
        unpack = self._u64.unpack_from
        while count > 0:
            buf, off, end = self._buf, self._off, len(self._buf)
            while count > 0 and off + 8 <= end:
                n = unpack(buf, off)[0]
                if off + 8 + n > end:
                    break
                off += 8 + n
                count -= 1
            self._off = off
            if count > 0:
                self.skip_string()
                count -= 1


# --- parsing -------------------------------------------------------------------------------


def read_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read a local GGUF file's header (never its tensor data) and check the file is whole."""
    file_path = Path(path)
    label = str(file_path)
    try:
        stream = open(file_path, "rb", buffering=0)  # noqa: SIM115 - closed below; _Reader buffers
    except FileNotFoundError:
        raise GGUFNotFoundError(f"No model file at {label}") from None
    except IsADirectoryError:
        raise GGUFError(f"{label} is a folder, not a model file; choose a .gguf file") from None
    except OSError as exc:
        raise GGUFError(f"Cannot read {label}: {exc.strerror or exc}") from exc
    try:
        with stream:
            size = os.fstat(stream.fileno()).st_size

            def short(total: int) -> GGUFError:
                return GGUFTruncatedError(label, total, size, at_least=True)

            info = _parse(_Reader(stream, size, label, short), path=label, file_size=size)
    except OSError as exc:
        raise GGUFError(f"Cannot read {label}: {exc.strerror or exc}") from exc
    if size < info.expected_file_size:
        raise GGUFTruncatedError(label, info.expected_file_size, size)
    return info


def parse_gguf_bytes(
    data: bytes | bytearray | memoryview,
    file_size: int | None = None,
    *,
    name: str = "The model file",
) -> GGUFInfo:
    """Parse the header from the first bytes of a GGUF file (a ranged HTTP download).

    Raises :class:`GGUFNeedMoreData` when ``data`` ends inside the header. Tensor data is not
    needed, so its absence is not truncation; ``file_size`` (the whole file's size, if known)
    is recorded and used to reject headers that claim more bytes than the file has.
    """
    head = bytes(data)
    have = len(head)

    def short(total: int) -> GGUFError:
        if file_size is not None and total > file_size:
            return GGUFTruncatedError(name, total, file_size, at_least=True)
        needed = max(total, 2 * have, 64 * 1024)
        if file_size is not None:
            needed = min(needed, file_size)
        return GGUFNeedMoreData(needed, minimum=total, have=have)

    return _parse(_Reader(io.BytesIO(head), have, name, short), path=None, file_size=file_size)


def _parse(reader: _Reader, *, path: str | None, file_size: int | None) -> GGUFInfo:
    _check_magic(reader)
    version = _read_version(reader)
    tensor_count = _read_count(reader, "tensors", _MAX_TENSORS)
    kv_count = _read_count(reader, "metadata entries", _MAX_KV)
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = reader.string()
        metadata[key] = _read_value(reader, reader.u32(), key)
    alignment = _alignment(reader.name, metadata)
    tensors = tuple(_read_tensor(reader, alignment) for _ in range(tensor_count))
    header_end = reader.pos
    return _make_info(
        metadata,
        tensors,
        path=path,
        file_size=file_size,
        version=version,
        byte_order="little" if reader.order == "<" else "big",
        alignment=alignment,
        header_end=header_end,
    )


def _check_magic(reader: _Reader) -> None:
    head = reader.peek(64)
    if not head.startswith(GGUF_MAGIC) and not (len(head) < 4 and GGUF_MAGIC.startswith(head)):
        raise NotGGUFError(
            f"{reader.name} is not a GGUF model file (it starts with {_describe_start(head)}). "
            "Ember runs GGUF models; convert it or download a .gguf"
        )
    reader.take(4)  # raises the reader's "short" error for a file of fewer than 4 bytes


def _describe_start(head: bytes) -> str:
    """Name what a non-GGUF file looks like, so the user knows what they actually have."""
    if not head:
        return "nothing: it is empty"
    kinds = (
        (b"version https://git-lfs", "a Git LFS pointer: the real file was never downloaded"),
        (b"PK\x03\x04", "a ZIP archive, like a PyTorch checkpoint"),
        (b"<!DOCTYPE", "a web page"),
        (b"<!doctype", "a web page"),
        (b"<html", "a web page"),
        (b"{", "JSON text"),
        (b"lmgg", "an old GGML model, which llama.cpp no longer runs"),
        (b"fmgg", "an old GGMF model, which llama.cpp no longer runs"),
        (b"tjgg", "an old GGJT model, which llama.cpp no longer runs"),
        (b"\x89HDF", "an HDF5 (Keras) file"),
    )
    shown = repr(head[:8])
    for prefix, kind in kinds:
        if head.startswith(prefix):
            return f"{shown}, {kind}"
    if head[8:10] == b'{"':
        return f"{shown}, a safetensors file"
    return shown


def _read_version(reader: _Reader) -> int:
    raw = reader.take(4)
    little, big = int.from_bytes(raw, "little"), int.from_bytes(raw, "big")
    # A big-endian file's small version number reads as a huge little-endian one.
    version = little
    if not 0 < little <= 0xFFFF and 0 < big <= 0xFFFF:
        reader.set_byte_order(">")
        version = big
    if version in (2, 3):
        return version
    if version == 1:
        raise GGUFUnsupportedError(
            f"{reader.name} uses GGUF version 1, which llama.cpp no longer loads; "
            "download a newer conversion of this model"
        )
    if 3 < version <= 0xFFFF:
        raise GGUFUnsupportedError(
            f"{reader.name} uses GGUF version {version}, newer than this version of Ember "
            "understands; update Ember"
        )
    raise GGUFCorruptError(
        f"{reader.name} is damaged: its GGUF version field reads {version:,}; download it again"
    )


def _read_count(reader: _Reader, what: str, limit: int) -> int:
    count = reader.u64()
    if count > limit:
        raise GGUFCorruptError(
            f"{reader.name} is damaged: its header claims {count:,} {what}; download it again"
        )
    return count


def _read_value(reader: _Reader, vtype: int, key: str) -> Any:
    if vtype in _SCALAR_FORMATS:
        return reader.scalar(vtype)
    if vtype == _STRING:
        return reader.string()
    if vtype == _ARRAY:
        elem, count = reader.u32(), reader.u64()
        _check_array(reader, key, elem, count)
        if _keep_array(key, elem, count):
            if elem in _SCALAR_FORMATS:
                return reader.scalars(elem, count)
            return [_read_value(reader, elem, key) for _ in range(count)]
        _skip_array(reader, elem, count)
        return ArrayInfo(elem, count)
    raise GGUFCorruptError(
        f"{reader.name} is damaged: metadata {key!r} has unknown value type {vtype}; "
        "download it again"
    )


def _check_array(reader: _Reader, key: str, elem: int, count: int) -> None:
    if count > _MAX_ARRAY or not (elem in _SCALAR_FORMATS or elem in (_STRING, _ARRAY)):
        raise GGUFCorruptError(
            f"{reader.name} is damaged: metadata {key!r} claims an array of {count:,} "
            f"elements of type {elem}; download it again"
        )


def _keep_array(key: str, elem: int, count: int) -> bool:
    if count <= SMALL_ARRAY_MAX:
        return True
    numeric = elem in _SCALAR_FORMATS
    return numeric and count <= _LAYER_ARRAY_MAX and not key.startswith("tokenizer.")


def _skip_array(reader: _Reader, elem: int, count: int) -> None:
    if elem in _SCALAR_FORMATS:
        reader.skip(count * struct.calcsize(_SCALAR_FORMATS[elem]))
    elif elem == _STRING:
        reader.skip_strings(count)
    else:  # arrays of arrays: each has its own header
        for _ in range(count):
            sub_elem, sub_count = reader.u32(), reader.u64()
            _check_array(reader, "(nested)", sub_elem, sub_count)
            _skip_array(reader, sub_elem, sub_count)


def _alignment(name: str, metadata: dict[str, Any]) -> int:
    value = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise GGUFCorruptError(f"{name} is damaged: general.alignment is {value!r}")
    return value


def _read_tensor(reader: _Reader, alignment: int) -> TensorInfo:
    name = reader.string()
    n_dims = reader.u32()
    if n_dims > _MAX_DIMS:
        raise GGUFCorruptError(
            f"{reader.name} is damaged: tensor {name!r} claims {n_dims:,} dimensions"
        )
    shape = tuple(reader.u64() for _ in range(n_dims))
    type_id, offset = reader.u32(), reader.u64()
    gtype = _GGML_TYPES.get(type_id)
    if gtype is None:
        raise GGUFUnsupportedError(
            f"{reader.name} stores tensor {name!r} as ggml type {type_id}, which this version "
            "of Ember does not know (a newer quantization?); update Ember"
        )
    n_elements = 1
    for dim in shape:
        n_elements *= dim
    if n_elements >= 1 << 62 or (shape and shape[0] % gtype.block_size) or offset % alignment:
        raise GGUFCorruptError(
            f"{reader.name} is damaged: tensor {name!r} has shape {shape}, type {gtype.name} "
            f"and offset {offset:,}, which do not fit together; download it again"
        )
    return TensorInfo(name, shape, gtype, offset, gtype.row_bytes(n_elements))


# --- derived fields ------------------------------------------------------------------------


def _make_info(
    metadata: dict[str, Any],
    tensors: tuple[TensorInfo, ...],
    *,
    path: str | None,
    file_size: int | None,
    version: int,
    byte_order: str,
    alignment: int,
    header_end: int,
) -> GGUFInfo:
    arch = _as_str(metadata.get("general.architecture"))

    def key(suffix: str) -> Any:
        return metadata.get(f"{arch}.{suffix}")

    data_offset = -(-header_end // alignment) * alignment
    data_end = max((t.offset + t.n_bytes for t in tensors), default=None)
    parameter_count = sum(t.n_elements for t in tensors)
    file_type = _as_int(metadata.get("general.file_type"))
    embedding = _max_int(key("embedding_length"))
    head_count = _first_int(key("attention.head_count"))
    head_dim = embedding // head_count if embedding and head_count else None
    return GGUFInfo(
        path=path,
        file_size=file_size,
        version=version,
        byte_order=byte_order,
        tensor_count=len(tensors),
        metadata=metadata,
        tensors=tensors,
        architecture=arch,
        name=_as_str(metadata.get("general.name")),
        size_label=_as_str(metadata.get("general.size_label")) or _size_label(parameter_count),
        parameter_count=parameter_count,
        file_type=file_type,
        quantization=_quantization(file_type, tensors),
        context_length=_as_int(key("context_length")),
        block_count=_as_int(key("block_count")),
        head_count=_max_int(key("attention.head_count")),
        head_count_kv=_max_int(key("attention.head_count_kv")),
        embedding_length=embedding,
        feed_forward_length=_max_int(key("feed_forward_length")),
        key_length=_as_int(key("attention.key_length")) or head_dim,
        value_length=_as_int(key("attention.value_length")) or head_dim,
        sliding_window=_max_int(key("attention.sliding_window")) or None,
        chat_template=_as_str(metadata.get("tokenizer.chat_template")),
        tokenizer_model=_as_str(metadata.get("tokenizer.ggml.model")),
        vocab_size=_vocab_size(metadata, tensors, arch),
        bos_token_id=_as_int(metadata.get("tokenizer.ggml.bos_token_id")),
        eos_token_id=_as_int(metadata.get("tokenizer.ggml.eos_token_id")),
        has_fim=_has_fim(metadata),
        split_count=_as_int(metadata.get("split.count")) or 1,
        alignment=alignment,
        tensor_data_offset=data_offset,
        tensor_data_size=sum(t.n_bytes for t in tensors),
        expected_file_size=header_end if data_end is None else data_offset + data_end,
    )


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _ints(value: Any) -> list[int]:
    items = value if isinstance(value, list) else [value]
    return [v for v in (_as_int(item) for item in items) if v is not None]


def _max_int(value: Any) -> int | None:
    """A hyperparameter that may be one number or one per layer: the largest."""
    return max(_ints(value), default=None)


def _first_int(value: Any) -> int | None:
    """llama.cpp derives head size from the first layer's head count (``n_head(0)``)."""
    return next((v for v in _ints(value) if v), None)


def _per_layer(value: Any, n_layer: int) -> tuple[int, ...]:
    values = _ints(value)
    if not values or n_layer <= 0:
        return ()
    if len(values) == 1 or not isinstance(value, list):
        return (values[0],) * n_layer
    return tuple(values[:n_layer]) + (values[-1],) * max(0, n_layer - len(values))


def _quantization(file_type: int | None, tensors: tuple[TensorInfo, ...]) -> str:
    """The llama.cpp file type name; without one, the type holding most weight bytes."""
    if file_type is not None and file_type != _FTYPE_GUESSED:
        return _FILE_TYPES.get(file_type, f"file type {file_type}")
    by_type: dict[str, int] = {}
    for tensor in tensors:
        if len(tensor.shape) >= 2:
            by_type[tensor.type.name] = by_type.get(tensor.type.name, 0) + tensor.n_bytes
    return max(by_type, key=by_type.__getitem__) if by_type else "unknown"


def _size_label(parameter_count: int) -> str | None:
    """Like llama.cpp's converter: two significant digits at least ("268M", "1.5B", "7.2B")."""
    if parameter_count <= 0:
        return None
    scale, suffix = next(
        ((s, x) for s, x in ((10**12, "T"), (10**9, "B"), (10**6, "M"))
         if parameter_count >= s),
        (10**3, "K"),
    )  # fmt: skip
    value = parameter_count / scale
    digits = max(2 - len(str(round(value))), 0)
    return f"{value:.{digits}f}{suffix}"


def _vocab_size(
    metadata: dict[str, Any], tensors: tuple[TensorInfo, ...], arch: str | None
) -> int | None:
    tokens = metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, ArrayInfo | list):
        return len(tokens)
    declared = _as_int(metadata.get(f"{arch}.vocab_size"))
    if declared is not None:
        return declared
    embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
    return embd.shape[1] if embd is not None and len(embd.shape) >= 2 else None


_FIM_KEYS: Final = (
    ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
     "tokenizer.ggml.fim_mid_token_id"),
    ("tokenizer.ggml.prefix_token_id", "tokenizer.ggml.suffix_token_id",
     "tokenizer.ggml.middle_token_id"),
)  # fmt: skip


def _has_fim(metadata: dict[str, Any]) -> bool:
    """Fill-in-the-middle (code completion) needs all three of prefix, suffix and middle."""

    def present(key: str) -> bool:
        token_id = _as_int(metadata.get(key))
        return token_id is not None and token_id >= 0  # id 0 is a valid token

    return any(all(present(k) for k in keys) for keys in _FIM_KEYS)


# --- memory --------------------------------------------------------------------------------

# Layers attend to a sliding window in a fixed pattern, as llama.cpp's set_swa_pattern(n):
# layer il uses the window when il % n < n - 1 (Gemma 2 alternates; Gemma 3 has five local
# layers, then one global). Other architectures with a window are sized as full (conservative).
_SWA_PERIODS: Final = {"gemma2": 2, "gemma3": 6, "cohere2": 4}
_COMPUTE_FIXED: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes needed to run a model at ``n_ctx`` tokens; see :func:`estimate_memory`."""

    n_ctx: int
    weights_bytes: int
    kv_cache_bytes: int
    compute_bytes: int
    total_bytes: int
    gpu_bytes: int = 0  # the part of the weights and KV cache that lives on the GPU

    @property
    def ram_bytes(self) -> int:
        return self.total_bytes - self.gpu_bytes


def estimate_memory(
    info: GGUFInfo,
    n_ctx: int,
    *,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_gpu_layers: int = 0,
    n_batch: int = 512,
    n_seq: int = 1,
    flash_attn: bool = False,
    swa_full: bool = True,
) -> MemoryEstimate:
    """Estimate what llama.cpp allocates to run ``info`` with an ``n_ctx``-token context.

    - weights: all tensor data. mmap'd weights are still paged into RAM while generating.
    - KV cache: per layer, cells x (kv_heads x key_length x K bytes + kv_heads x value_length
      x V bytes), with quantized cache types at their block sizes. Cells are ``n_ctx`` padded
      to 256 (``n_ctx=0`` means the trained context, as in llama.cpp). Sliding-window layers of
      architectures with a known pattern keep only ``min(cells, pad256(window + n_batch))``
      cells per sequence, as llama.cpp's ISWA cache does, unless ``swa_full``. The default
      is ``swa_full=True``, like llama.cpp's and what Ember's engine loads: only a full-size
      SWA cache lets a follow-up turn reuse the conversation's KV cache.
    - compute: 64 MiB fixed + f32 logits for a full batch (n_vocab x n_batch x 4) + f32
      activations (n_batch x 4 x (4 x embedding + 2 x feed_forward)) + without flash
      attention the f32 attention scores of the widest layer (heads x cells x n_batch x 4).
      ggml reuses compute memory between layers, so it is sized for one layer, not all.
    - gpu: with ``n_gpu_layers`` (-1 = all), the last layers' weights and KV cache, plus the
      output layer when every layer is offloaded, as llama.cpp assigns them.
    Slightly conservative by design: better to offer 8192 tokens that load than 16384 that don't.
    """
    if n_ctx < 0 or n_batch <= 0 or n_seq <= 0:
        raise ValueError("n_ctx must be >= 0, n_batch and n_seq > 0")
    n_ctx = n_ctx or info.context_length or _FALLBACK_CONTEXT
    k_type, v_type = ggml_type(cache_type_k), ggml_type(cache_type_v)
    cells = _kv_cells(info, n_ctx, n_batch, n_seq, swa_full)
    layer_kv = _layer_kv_bytes(info, cells, (k_type, v_type))
    kv_bytes = sum(layer_kv)
    compute = _compute_bytes(info, cells[0], n_batch, flash_attn)
    gpu = _gpu_bytes(info, layer_kv, n_gpu_layers)
    weights = info.tensor_data_size
    return MemoryEstimate(
        n_ctx=n_ctx,
        weights_bytes=weights,
        kv_cache_bytes=kv_bytes,
        compute_bytes=compute,
        total_bytes=weights + kv_bytes + compute,
        gpu_bytes=gpu,
    )


def max_context_for_memory(
    info: GGUFInfo,
    available_bytes: int,
    *,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    n_batch: int = 512,
    n_seq: int = 1,
    flash_attn: bool = False,
    swa_full: bool = True,
) -> int:
    """The largest context (a multiple of 256) whose estimate fits in ``available_bytes``.

    Capped by the trained context, which is returned as is when it fits. 0 when not even 256
    tokens fit, e.g. when the weights alone are too big.
    """
    trained = info.context_length or _FALLBACK_CONTEXT

    def fits(n_ctx: int) -> bool:
        estimate = estimate_memory(
            info,
            n_ctx,
            cache_type_k=cache_type_k,
            cache_type_v=cache_type_v,
            n_batch=n_batch,
            n_seq=n_seq,
            flash_attn=flash_attn,
            swa_full=swa_full,
        )
        return estimate.total_bytes <= available_bytes

    if fits(trained):
        return trained
    low, high = 0, trained // _KV_PAD  # fits(low * 256) holds (or low == 0); high does not
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid * _KV_PAD) else (low, mid)
    return low * _KV_PAD


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _swa_layers(info: GGUFInfo) -> tuple[bool, ...]:
    """Which layers keep only a sliding window of the cache; all False when not known."""
    n_layer = info.block_count or 0
    if not info.sliding_window:
        return (False,) * n_layer
    pattern = info.metadata.get(f"{info.architecture}.attention.sliding_window_pattern")
    if isinstance(pattern, list) and len(pattern) == n_layer:
        return tuple(bool(flag) for flag in pattern)
    period = _SWA_PERIODS.get(info.architecture or "")
    if period is None:
        return (False,) * n_layer
    return tuple(il % period < period - 1 for il in range(n_layer))


def _kv_cells(
    info: GGUFInfo, n_ctx: int, n_batch: int, n_seq: int, swa_full: bool
) -> tuple[int, int]:
    """Cells of the full cache and of the sliding-window cache (one window + a batch per
    sequence, as llama.cpp's ISWA cache sizes it)."""
    cells = _pad(n_ctx, _KV_PAD)
    per_seq = min(-(-cells // n_seq), _pad((info.sliding_window or 0) + n_batch, _KV_PAD))
    return cells, cells if swa_full else min(cells, n_seq * per_seq)


def _layer_kv_bytes(
    info: GGUFInfo, cells: tuple[int, int], kv_types: tuple[GGMLType, GGMLType]
) -> list[int]:
    full_cells, swa_cells = cells
    k_type, v_type = kv_types
    k_len = info.key_length or 0
    v_len = info.value_length or 0
    return [
        (swa_cells if swa else full_cells)
        * (k_type.row_bytes(heads * k_len) + v_type.row_bytes(heads * v_len))
        for heads, swa in zip(info.layer_kv_heads(), _swa_layers(info), strict=False)
    ]


def _compute_bytes(info: GGUFInfo, cells: int, n_batch: int, flash_attn: bool) -> int:
    embd = info.embedding_length or 0
    ffn = info.feed_forward_length or 4 * embd
    logits = (info.vocab_size or 0) * n_batch * 4
    activations = n_batch * 4 * (4 * embd + 2 * ffn)
    scores = 0 if flash_attn else (info.head_count or 0) * cells * n_batch * 4
    return _COMPUTE_FIXED + logits + activations + scores


def _layer_of(tensor_name: str) -> int | None:
    parts = tensor_name.split(".", 2)
    if len(parts) >= 2 and parts[0] == "blk" and parts[1].isdigit():
        return int(parts[1])
    return None


def _gpu_bytes(info: GGUFInfo, layer_kv: list[int], n_gpu_layers: int) -> int:
    n_layer = info.block_count or 0
    if n_gpu_layers < 0:
        n_gpu_layers = n_layer + 1
    first = n_layer - min(n_gpu_layers, n_layer)  # llama.cpp offloads the last layers first
    total = sum(layer_kv[first:])
    for tensor in info.tensors:
        layer = _layer_of(tensor.name)
        on_gpu = (
            layer >= first if layer is not None else n_gpu_layers > n_layer
            and tensor.name.startswith("output")
        )  # fmt: skip
        total += tensor.n_bytes if on_gpu else 0
    return total


# --- presentation --------------------------------------------------------------------------


def human_bytes(n: int) -> str:
    """A size in decimal units (1 GB = 10^9 bytes), as the Hugging Face Hub and LM Studio show."""
    if n < 0:
        return "-" + human_bytes(-n)
    if n < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("KB", "MB", "GB", "TB", "PB"):
        value /= 1000
        if round(value, 1) < 1000 or unit == "PB":
            break
    return f"{value:.1f} {unit}" if round(value, 1) < 100 else f"{value:.0f} {unit}"


def format_info(info: GGUFInfo) -> list[tuple[str, str]]:
    """Human-readable (label, value) rows for ``ember info`` and the model details pane."""

    def number(value: int | None, unit: str = "") -> str:
        return "unknown" if value is None else f"{value:,}{unit}"

    kv_heads = set(info.layer_kv_heads())
    kv_text = (
        f"{min(kv_heads)}-{max(kv_heads)} (varies by layer)"
        if len(kv_heads) > 1
        else number(info.head_count_kv)
    )
    if info.file_size is not None:
        size_text = human_bytes(info.file_size)
    else:
        size_text = f"{human_bytes(info.expected_file_size)} (from the header)"
    return [
        ("Architecture", info.architecture or "unknown"),
        ("Name", info.name or "-"),
        ("Parameters", f"{info.size_label or '?'} ({info.parameter_count:,})"),
        ("Quantization", info.quantization),
        ("Context length (trained)", number(info.context_length, " tokens")),
        ("Layers", number(info.block_count)),
        ("Attention heads", number(info.head_count)),
        ("KV heads", kv_text),
        ("Embedding size", number(info.embedding_length)),
        ("Sliding window", number(info.sliding_window, " tokens") if info.sliding_window
         else "none"),
        ("Tokenizer", info.tokenizer_model or "unknown"),
        ("Vocabulary", number(info.vocab_size, " tokens")),
        ("Chat template", "present" if info.chat_template else "none - fallback used"),
        ("FIM support", "yes" if info.has_fim else "no"),
        ("File size", size_text),
    ]  # fmt: skip
