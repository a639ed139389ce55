"""A tiny but valid vision projector (mmproj) GGUF for the test model, Gemma 3 270M.

There is no small vision model to download offline, so the tests build one: the tensor names
and hyper-parameters of llama.cpp's ``gemma3`` projector type (Gemma 3's own, read by
``tools/mtmd/clip.cpp`` in the llama.cpp that llama-cpp-python 0.3.36 vendors), with a SigLIP
vision tower shrunk to one layer of width 32 over a 32x32 image in 8x8 patches, and seeded
random weights. The 4x4 patches are average-pooled 2x2 (``clip.vision.projector.scale_factor``)
into 4 image tokens, each projected to the text model's embedding size (640).

What it proves: llama.cpp's multimodal library accepts the file for the real text model (the
embedding sizes match), preprocesses a real decoded image, runs the vision graph, and hands back
embeddings that the text model decodes like any prompt: the whole path
image -> projector -> embeddings -> decode, with the real native code.
What it cannot prove: anything about the answer. The weights are noise, so the model does
not "see" the image; the quality of a real projector's answers is not tested here.

Written with the repository's own GGUF encoding (tests/helpers/gguf_writer.py) rather than the
``gguf`` package, which is not a dependency (llama-cpp-python's wheel does not ship it). Every
tensor is F32; integers are UINT32 as clip.cpp's ``get_u32`` requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.gguf_writer import assemble

TEXT_N_EMBD = 640  # Gemma 3 270M's embedding size: the projector's output must match it
VISION_N_EMBD = 32
VISION_N_FF = 64
VISION_N_HEAD = 2
VISION_LAYERS = 1
IMAGE_SIZE = 32
PATCH_SIZE = 8
MERGE = 2  # pooling kernel over the patch grid: (32 / 8 / 2) ** 2 = 4 image tokens
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE // MERGE) ** 2


def projector_tensors(text_n_embd: int = TEXT_N_EMBD, seed: int = 0) -> dict[str, np.ndarray]:
    """The projector's tensors by name. numpy shapes are ggml's ``ne`` reversed (row-major)."""
    rng = np.random.default_rng(seed)
    e, f = VISION_N_EMBD, VISION_N_FF
    n_patches = (IMAGE_SIZE // PATCH_SIZE) ** 2

    def noise(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    t: dict[str, np.ndarray] = {
        # conv kernel, ne = [patch, patch, 3, n_embd]
        "v.patch_embd.weight": noise(e, 3, PATCH_SIZE, PATCH_SIZE),
        "v.patch_embd.bias": zeros(e),
        "v.position_embd.weight": noise(n_patches, e),  # ne = [n_embd, n_patches]
        "v.post_ln.weight": ones(e),
        "v.post_ln.bias": zeros(e),
        "mm.soft_emb_norm.weight": ones(e),
        # ne = [text n_embd, vision n_embd]: clip.cpp multiplies by its transpose
        "mm.input_projection.weight": noise(e, text_n_embd),
    }
    for il in range(VISION_LAYERS):
        p = f"v.blk.{il}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t[f"{p}.{name}.weight"] = noise(e, e)
            t[f"{p}.{name}.bias"] = zeros(e)
        for name in ("ln1", "ln2"):
            t[f"{p}.{name}.weight"] = ones(e)
            t[f"{p}.{name}.bias"] = zeros(e)
        # up: ne = [n_embd, n_ff]; down: ne = [n_ff, n_embd] (clip.cpp swaps them otherwise)
        t[f"{p}.ffn_up.weight"] = noise(f, e)
        t[f"{p}.ffn_up.bias"] = zeros(f)
        t[f"{p}.ffn_down.weight"] = noise(e, f)
        t[f"{p}.ffn_down.bias"] = zeros(e)
    return t


def projector_metadata(text_n_embd: int = TEXT_N_EMBD) -> dict[str, Any]:
    """The key-value pairs clip.cpp's loader reads for a ``gemma3`` vision projector."""
    return {
        "general.architecture": "clip",
        "general.name": "Ember test projector (random weights)",
        "clip.projector_type": "gemma3",
        "clip.has_vision_encoder": True,
        "clip.use_gelu": True,
        "clip.vision.image_size": IMAGE_SIZE,
        "clip.vision.patch_size": PATCH_SIZE,
        "clip.vision.embedding_length": VISION_N_EMBD,
        "clip.vision.feed_forward_length": VISION_N_FF,
        "clip.vision.block_count": VISION_LAYERS,
        "clip.vision.projection_dim": text_n_embd,
        "clip.vision.attention.head_count": VISION_N_HEAD,
        "clip.vision.attention.layer_norm_epsilon": 1e-6,
        "clip.vision.image_mean": [0.5, 0.5, 0.5],
        "clip.vision.image_std": [0.5, 0.5, 0.5],
        "clip.vision.projector.scale_factor": MERGE,
    }


def gguf_from(metadata: Mapping[str, Any], tensors: Mapping[str, np.ndarray]) -> bytes:
    """A GGUF v3 file of the F32 ``tensors`` (numpy shapes: slowest dimension first)."""
    return assemble(
        metadata,
        [
            (name, tuple(reversed(a.shape)), np.ascontiguousarray(a, dtype="<f4").tobytes())
            for name, a in tensors.items()
        ],
    )


def write_projector(path: Path, text_n_embd: int = TEXT_N_EMBD, seed: int = 0) -> Path:
    """Write the test projector to ``path`` (parents created) and return the path.
    ``text_n_embd`` other than 640 makes a projector that does not fit the test model."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = gguf_from(projector_metadata(text_n_embd), projector_tensors(text_n_embd, seed))
    path.write_bytes(data)
    return path


def model_folder(gemma_path: Path, folder: Path, projector: bool) -> Path:
    """The test model linked into ``folder``, with the test projector beside it or not."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "gemma-3-270m-q4_k_m.gguf"
    model.symlink_to(gemma_path)
    if projector:
        write_projector(folder / "mmproj-gemma-f16.gguf")
    return model
