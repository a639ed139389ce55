"""A tiny GGUF v3 writer for tests: a valid header, a few KV pairs and small F32 tensors.

The files are real GGUF (llama.cpp's layout: header, KV pairs, tensor infos, aligned data), just
tiny. ``vocab_size`` fills ``tokenizer.ggml.tokens`` so a header can be made as large as a test
needs (Gemma 3's real header is 6.5 MB because its vocabulary lives there).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

GGUF_MAGIC = b"GGUF"
ALIGNMENT = 32

# GGUF value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = range(
    10
)
T_UINT64, T_INT64, T_FLOAT64 = 10, 11, 12

GGML_TYPE_F32 = 0
# llama.cpp's LLAMA_FTYPE values for general.file_type
FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18}


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(v: Any) -> tuple[int, bytes]:
    if isinstance(v, bool):
        return T_BOOL, struct.pack("<?", v)
    if isinstance(v, int):
        return (
            (T_UINT32, struct.pack("<I", v)) if 0 <= v < 2**32 else (T_INT64, struct.pack("<q", v))
        )
    if isinstance(v, float):
        return T_FLOAT32, struct.pack("<f", v)
    if isinstance(v, str):
        return T_STRING, _string(v)
    if isinstance(v, list | tuple):
        if not v:
            return T_ARRAY, struct.pack("<IQ", T_STRING, 0)
        types = {_value(x)[0] for x in v}
        if len(types) != 1:
            raise ValueError("GGUF arrays must be homogeneous")
        item_type = types.pop()
        body = b"".join(_value(x)[1] for x in v)
        return T_ARRAY, struct.pack("<IQ", item_type, len(v)) + body
    raise TypeError(f"unsupported GGUF value {v!r}")


def _pad(n: int, alignment: int = ALIGNMENT) -> int:
    return (alignment - n % alignment) % alignment


def gguf_bytes(
    *,
    arch: str = "llama",
    name: str = "Tiny Test Model",
    quant: str = "Q4_K_M",
    context_length: int = 4096,
    embedding_length: int = 64,
    block_count: int = 2,
    head_count: int = 4,
    head_count_kv: int = 2,
    vocab_size: int = 32,
    size_label: str | None = "1B",
    chat_template: str | None = None,
    extra_kv: Mapping[str, Any] | None = None,
    tensors: Sequence[tuple[str, Sequence[int]]] = (
        ("token_embd.weight", (8, 4)),
        ("output.weight", (4, 4)),
    ),
    payload: int = 0,
) -> bytes:
    """The bytes of a small valid GGUF file. ``payload`` appends that many bytes of tensor data."""
    kv: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": name,
        "general.file_type": FILE_TYPES.get(quant.upper(), 15),
        f"{arch}.context_length": context_length,
        f"{arch}.embedding_length": embedding_length,
        f"{arch}.block_count": block_count,
        f"{arch}.feed_forward_length": embedding_length * 4,
        f"{arch}.attention.head_count": head_count,
        f"{arch}.attention.head_count_kv": head_count_kv,
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(vocab_size)],
    }
    if size_label:
        kv["general.size_label"] = size_label
    if chat_template:
        kv["tokenizer.chat_template"] = chat_template
    kv.update(extra_kv or {})
    all_tensors = list(tensors)
    if payload:
        all_tensors.append(("blob.weight", (max(1, payload // 4),)))

    blobs = []
    for i, (tname, shape) in enumerate(all_tensors):
        nbytes = 4
        for d in shape:
            nbytes *= d
        # Deterministic, non-constant data so a flipped byte changes the sha256.
        pattern = bytes((i * 7 + j) % 251 for j in range(251))
        blobs.append((tname, shape, (pattern * (nbytes // 251 + 1))[:nbytes]))
    return assemble(kv, blobs)


def assemble(kv: Mapping[str, Any], tensors: Sequence[tuple[str, Sequence[int], bytes]]) -> bytes:
    """A GGUF v3 file of F32 tensors: header, key-values, tensor infos (``shape`` in ggml's
    order, fastest dimension first), then each tensor's bytes, aligned."""
    out = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, v in kv.items():
        vtype, body = _value(v)
        out += _string(key) + struct.pack("<I", vtype) + body
    offset = 0
    for tname, shape, data in tensors:
        out += _string(tname) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", GGML_TYPE_F32, offset)
        offset += len(data) + _pad(len(data))
    out += b"\0" * _pad(len(out))
    for _, _, data in tensors:
        out += data + b"\0" * _pad(len(data))
    return bytes(out)


def write_gguf(path: Path, **kwargs: Any) -> Path:
    """Write ``gguf_bytes(**kwargs)`` to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gguf_bytes(**kwargs))
    return path
