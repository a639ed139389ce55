"""ggml's tensor types and llama.cpp's file types: the tables a GGUF header refers to.

Each tensor type stores ``block_size`` elements in ``type_size`` bytes (llama.cpp's ``ggml.h``
``ggml_type`` and gguf-py's ``GGML_QUANT_SIZES``); the ids are also what llama.cpp takes for
its KV cache type (``type_k``/``type_v``). Pure Python, stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


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
GGML_TYPES: Final[dict[int, GGMLType]] = {
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
_BY_NAME: Final = {t.name.lower(): t for t in GGML_TYPES.values()}

# llama.cpp's llama_ftype (general.file_type) -> the name people know the file by.
FILE_TYPES: Final[dict[int, str]] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    4: "Q4_1_SOME_F16",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    33: "Q4_0_4_4",
    34: "Q4_0_4_8",
    35: "Q4_0_8_8",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
}
FTYPE_GUESSED: Final = 1024


def ggml_type(name_or_id: str | int) -> GGMLType:
    """Look up a ggml type by id or case-insensitive name ("q8_0", "F16")."""
    found = (
        GGML_TYPES.get(name_or_id)
        if isinstance(name_or_id, int)
        else _BY_NAME.get(name_or_id.lower())
    )
    if found is None:
        raise ValueError(f"Unknown ggml type {name_or_id!r}")
    return found
