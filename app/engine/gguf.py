"""Read a GGUF model's header without loading the model.

A GGUF file holds gigabytes of weights behind a header of a few megabytes. What Ember shows
about a model before loading it (architecture, quantization, trained context, chat template,
whether it fits in memory) comes from that header alone, so this module reads only the header
(metadata key/values and tensor descriptions) and never the tensor data. One parser serves a
local file (:func:`read_gguf`) and the head of a remote file fetched with an HTTP range
request (:func:`parse_gguf_bytes`).

Format: ggml's ``docs/gguf.md``. The parts: :mod:`app.engine.gguf_reader` (bounded reads and
the errors), :mod:`app.engine.ggml_types` (type tables), this module (the header and what it
says), :mod:`app.engine.gguf_format` (in words) and :mod:`app.engine.sizing` (the memory a
model needs). Pure Python, stdlib only: no Qt, no llama_cpp, no numpy.
"""

from __future__ import annotations

import io
import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from app.engine.ggml_types import FILE_TYPES, FTYPE_GUESSED, GGML_TYPES, GGMLType
from app.engine.gguf_reader import (
    ARRAY,
    SCALAR_FORMATS,
    STRING,
    GGUFCorruptError,
    GGUFError,
    GGUFNeedMoreData,
    GGUFNotFoundError,
    GGUFTruncatedError,
    GGUFUnsupportedError,
    NotGGUFError,
    Reader,
)

__all__ = ["ArrayInfo", "GGUFInfo", "TensorInfo", "parse_gguf_bytes", "read_gguf"]

GGUF_MAGIC: Final = b"GGUF"
DEFAULT_ALIGNMENT: Final = 32
SMALL_ARRAY_MAX: Final = 64  # metadata arrays up to this length are kept as values
# Per-layer arrays (head_count_kv, sliding_window_pattern, ...) must survive even in models
# with more than SMALL_ARRAY_MAX layers; only tokenizer.* arrays are ever vocabulary-sized.
_LAYER_ARRAY_MAX: Final = 4096
_MAX_ARRAY: Final = 100_000_000  # vocabularies are < 1M; anything this large is garbage
_MAX_TENSORS: Final = 10_000_000
_MAX_KV: Final = 1_000_000
_MAX_DIMS: Final = 4  # GGML_MAX_DIMS
TOKENS_KEY: Final = "tokenizer.ggml.tokens"
MAX_KEPT_TOKENS: Final = 2_000_000  # the largest vocabulary read whole (real ones: < 300k)


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


# Architectures that only embed (no chat): the API's capabilities and the attachments' choice
# of an embedding model read them from a GGUF's ``general.architecture``.
EMBEDDING_ARCHITECTURES = frozenset(
    {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "t5encoder", "modern-bert", "neo-bert"}
)


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


# --- parsing -------------------------------------------------------------------------------

# The last headers read (without tokens), by path and the file's identity, size and time:
# a load reads its model's header for the memory budget, then to load it (~40 ms for a
# 262k-token vocabulary walked past). A file changed in place is read again.
_READ_KEPT: Final = 16
_READ: dict[tuple[str, int, int, int, int], GGUFInfo] = {}
_READ_LOCK = threading.Lock()


def read_gguf(path: str | os.PathLike[str], *, tokens: bool = False) -> GGUFInfo:
    """Read a local GGUF file's header (never its tensor data) and check the file is whole.
    With ``tokens``, the vocabulary's token texts are kept (``tokenizer.ggml.tokens`` in
    ``metadata``, a list of str), not skipped: :mod:`app.engine.draft_vocab` compares them."""
    file_path = Path(path)
    label = str(file_path)
    try:
        stream = open(file_path, "rb", buffering=0)  # noqa: SIM115 - closed below; Reader buffers
    except FileNotFoundError:
        raise GGUFNotFoundError(f"No model file at {label}") from None
    except IsADirectoryError:
        raise GGUFError(f"{label} is a folder, not a model file; choose a .gguf file") from None
    except OSError as exc:
        raise GGUFError(f"Cannot read {label}: {exc.strerror or exc}") from exc
    try:
        with stream:
            stat = os.fstat(stream.fileno())
            size = stat.st_size
            key = (label, stat.st_dev, stat.st_ino, size, stat.st_mtime_ns)
            if not tokens:
                with _READ_LOCK:
                    known = _READ.pop(key, None)
                    if known is not None:
                        _READ[key] = known  # the most recent last
                if known is not None:
                    return known

            def short(total: int) -> GGUFError:
                return GGUFTruncatedError(label, total, size, at_least=True)

            reader = Reader(stream, size, label, short)
            info = _parse(reader, path=label, file_size=size, tokens=tokens)
    except OSError as exc:
        raise GGUFError(f"Cannot read {label}: {exc.strerror or exc}") from exc
    if size < info.expected_file_size:
        raise GGUFTruncatedError(label, info.expected_file_size, size)
    if not tokens:
        with _READ_LOCK:
            _READ[key] = info
            while len(_READ) > _READ_KEPT:
                del _READ[next(iter(_READ))]
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

    return _parse(Reader(io.BytesIO(head), have, name, short), path=None, file_size=file_size)


def _parse(
    reader: Reader, *, path: str | None, file_size: int | None, tokens: bool = False
) -> GGUFInfo:
    _check_magic(reader)
    version = _read_version(reader)
    tensor_count = _read_count(reader, "tensors", _MAX_TENSORS)
    kv_count = _read_count(reader, "metadata entries", _MAX_KV)
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = reader.string()
        kept = tokens and key == TOKENS_KEY
        metadata[key] = _read_value(reader, reader.u32(), key, kept)
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


def _check_magic(reader: Reader) -> None:
    head = reader.peek(64)
    if not head.startswith(GGUF_MAGIC) and not (len(head) < 4 and GGUF_MAGIC.startswith(head)):
        raise NotGGUFError(
            f"{reader.name} is not a GGUF model file (it starts with {_describe_start(head)}). "
            "Ember runs GGUF models; convert it or download a .gguf file."
        )
    reader.take(4)  # raises the reader's "short" error for a file of fewer than 4 bytes


def _shown_start(head: bytes) -> str:
    """The first bytes as a person reads them: text in quotes, else hexadecimal."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    if text and text.isprintable():
        return f"the text “{text}…”"
    return "the bytes " + " ".join(f"{b:02X}" for b in head)


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
    shown = _shown_start(head[:8])
    for prefix, kind in kinds:
        if head.startswith(prefix):
            return f"{shown}, {kind}"
    if head[8:10] == b'{"':
        return f"{shown}, a safetensors file"
    return shown


def _read_version(reader: Reader) -> int:
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


def _read_count(reader: Reader, what: str, limit: int) -> int:
    count = reader.u64()
    if count > limit:
        raise GGUFCorruptError(
            f"{reader.name} is damaged: its header claims {count:,} {what}; download it again"
        )
    return count


def _read_value(reader: Reader, vtype: int, key: str, keep: bool = False) -> Any:
    if vtype in SCALAR_FORMATS:
        return reader.scalar(vtype)
    if vtype == STRING:
        return reader.string()
    if vtype == ARRAY:
        elem, count = reader.u32(), reader.u64()
        _check_array(reader, key, elem, count)
        if (keep and count <= MAX_KEPT_TOKENS) or _keep_array(key, elem, count):
            if elem in SCALAR_FORMATS:
                return reader.scalars(elem, count)
            return [_read_value(reader, elem, key) for _ in range(count)]
        _skip_array(reader, elem, count)
        return ArrayInfo(elem, count)
    raise GGUFCorruptError(
        f"{reader.name} is damaged: metadata {key!r} has unknown value type {vtype}; "
        "download it again"
    )


def _check_array(reader: Reader, key: str, elem: int, count: int) -> None:
    if count > _MAX_ARRAY or not (elem in SCALAR_FORMATS or elem in (STRING, ARRAY)):
        raise GGUFCorruptError(
            f"{reader.name} is damaged: metadata {key!r} claims an array of {count:,} "
            f"elements of type {elem}; download it again"
        )


def _keep_array(key: str, elem: int, count: int) -> bool:
    if count <= SMALL_ARRAY_MAX:
        return True
    numeric = elem in SCALAR_FORMATS
    return numeric and count <= _LAYER_ARRAY_MAX and not key.startswith("tokenizer.")


def _skip_array(reader: Reader, elem: int, count: int) -> None:
    if elem in SCALAR_FORMATS:
        reader.skip(count * struct.calcsize(SCALAR_FORMATS[elem]))
    elif elem == STRING:
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


def _read_tensor(reader: Reader, alignment: int) -> TensorInfo:
    name = reader.string()
    n_dims = reader.u32()
    if n_dims > _MAX_DIMS:
        raise GGUFCorruptError(
            f"{reader.name} is damaged: tensor {name!r} claims {n_dims:,} dimensions"
        )
    shape = tuple(reader.u64() for _ in range(n_dims))
    type_id, offset = reader.u32(), reader.u64()
    gtype = GGML_TYPES.get(type_id)
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
    if file_type is not None and file_type != FTYPE_GUESSED:
        return FILE_TYPES.get(file_type, f"file type {file_type}")
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
        ((s, x) for s, x in ((10**12, "T"), (10**9, "B"), (10**6, "M")) if parameter_count >= s),
        (10**3, "K"),
    )
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
    (
        "tokenizer.ggml.fim_pre_token_id",
        "tokenizer.ggml.fim_suf_token_id",
        "tokenizer.ggml.fim_mid_token_id",
    ),
    (
        "tokenizer.ggml.prefix_token_id",
        "tokenizer.ggml.suffix_token_id",
        "tokenizer.ggml.middle_token_id",
    ),
)


def _has_fim(metadata: dict[str, Any]) -> bool:
    """Fill-in-the-middle (code completion) needs all three of prefix, suffix and middle."""

    def present(key: str) -> bool:
        token_id = _as_int(metadata.get(key))
        return token_id is not None and token_id >= 0  # id 0 is a valid token

    return any(all(present(k) for k in keys) for keys in _FIM_KEYS)
