"""Images through llama.cpp's multimodal library with the real test model and a built projector.

The projector (tests/helpers/projector.py) has Gemma 3's projector type and random weights.
What these tests prove: the real native path runs end to end for the real text model
(projector loaded and checked against the model, PNG decoded, image tokenized into its own
chunk, encoded into n_tokens x 640 finite embeddings that depend on the image, decoded into the
model's context so the positions advance by the image's n_pos and the next-token logits depend
on the image, then greedy decoding goes on); bad images and a projector of the wrong size are
clear errors, not crashes. What they cannot prove: that an answer describes the image (the
weights are noise).
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine.image_bounds import MAX_IMAGE_BYTES, ImageError, inspect_image
from app.engine.types import BadRequestError, ProjectorError
from app.engine.vision import Projector, decode_embeddings
from tests.helpers.images import png
from tests.helpers.projector import (
    IMAGE_TOKENS,
    TEXT_N_EMBD,
    gguf_from,
    projector_metadata,
    projector_tensors,
    write_projector,
)


@pytest.fixture(scope="module")
def native() -> Any:
    from llama_cpp import llama_cpp

    llama_cpp.llama_backend_init()
    return llama_cpp


@pytest.fixture(scope="module")
def text_model(native: Any, gemma_path: Path) -> Iterator[Any]:
    """The real test model loaded with llama.cpp's low-level API (CPU)."""
    params = native.llama_model_default_params()
    params.n_gpu_layers = 0
    model = native.llama_model_load_from_file(str(gemma_path).encode("utf-8"), params)
    assert model, "the test model did not load"
    yield model
    native.llama_model_free(model)


@pytest.fixture(scope="module")
def llama_ctx(native: Any, text_model: Any) -> Iterator[Any]:
    c = native.llama_context_default_params()
    c.n_ctx = c.n_batch = c.n_ubatch = 512
    c.n_threads = c.n_threads_batch = 2
    c.no_perf = True
    ctx = native.llama_init_from_model(text_model, c)
    assert ctx, "no llama context"
    yield ctx
    native.llama_free(ctx)


@pytest.fixture(scope="module")
def projector(text_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projector]:
    path = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-test.gguf")
    with Projector(path, text_model, n_threads=2) as p:
        yield p


def prompt(marker: str) -> str:
    return (
        f"<start_of_turn>user\n{marker}What is in this picture?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_the_projector_loads_for_the_model_and_takes_images(projector: Projector) -> None:
    assert projector.ctx
    assert projector.n_embd == TEXT_N_EMBD
    assert projector.marker  # the media marker the prompt carries where an image goes


def test_an_image_becomes_an_image_chunk_between_text_chunks(projector: Projector) -> None:
    image = png(64, 48)
    with projector.tokenize(prompt(projector.marker), [image]) as chunks:
        infos = chunks.infos()
    kinds = [i.kind for i in infos]
    assert kinds == ["text", "image", "text"]
    before, img, after = infos
    assert before.tokens and after.tokens and len(before.tokens) == before.n_tokens
    assert img.n_tokens == IMAGE_TOKENS and img.n_pos == IMAGE_TOKENS
    # the image chunk's id is the hash of the file: the key for a prefix cache
    assert img.id == inspect_image(image).sha256


def test_a_jpeg_is_read_too(projector: Projector) -> None:
    from PIL import Image  # a dev dependency (through fpdf2): the standard library writes no JPEG

    out = io.BytesIO()
    Image.new("RGB", (50, 30), (200, 40, 90)).save(out, "JPEG", quality=80)
    info = inspect_image(out.getvalue())
    assert (info.format, info.width, info.height) == ("jpeg", 50, 30)
    with projector.tokenize(prompt(projector.marker), [out.getvalue()]) as chunks:
        assert [i.kind for i in chunks.infos()] == ["text", "image", "text"]
        assert np.isfinite(chunks.encode(1)).all()


def test_encoding_the_image_gives_finite_embeddings_of_the_models_width(
    projector: Projector,
) -> None:
    embeddings = []
    for seed in (0, 1):
        with projector.tokenize(prompt(projector.marker), [png(64, 48, seed)]) as chunks:
            embeddings.append(chunks.encode(1))
    first, second = embeddings
    assert first.shape == (IMAGE_TOKENS, TEXT_N_EMBD)
    assert first.dtype == np.float32 and np.isfinite(first).all()
    assert not np.allclose(first, second)  # the pixels reach the projector


def _greedy(native: Any, ctx: Any, n_vocab: int) -> int:
    logits = native.llama_get_logits_ith(ctx, -1)
    row = np.ctypeslib.as_array(logits, shape=(n_vocab,))
    assert np.isfinite(row).all()
    return int(row.argmax())


def _logits_after_image(
    native: Any, ctx: Any, projector: Projector, image: bytes, n_vocab: int
) -> tuple[np.ndarray, int, int]:
    mem = native.llama_get_memory(ctx)
    native.llama_memory_clear(mem, True)
    with projector.tokenize(prompt(projector.marker), [image]) as chunks:
        expected = sum(i.n_pos for i in chunks.infos())
        n_past = chunks.evaluate(ctx, 0, seq_id=0, n_batch=512)
    row = np.ctypeslib.as_array(native.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).copy()
    return row, n_past, expected


def test_the_image_embeddings_are_decoded_and_generation_goes_on(
    native: Any, text_model: Any, llama_ctx: Any, projector: Projector
) -> None:
    vocab = native.llama_model_get_vocab(text_model)
    n_vocab = int(native.llama_vocab_n_tokens(vocab))
    mem = native.llama_get_memory(llama_ctx)

    other, _, _ = _logits_after_image(native, llama_ctx, projector, png(64, 48, 1), n_vocab)
    logits, n_past, expected = _logits_after_image(
        native, llama_ctx, projector, png(64, 48, 0), n_vocab
    )
    text_tokens = expected - IMAGE_TOKENS
    # positions advanced by the text and by the image's n_pos, and the cache holds them all
    assert n_past == expected == text_tokens + IMAGE_TOKENS
    assert native.llama_memory_seq_pos_max(mem, 0) == n_past - 1
    assert not np.allclose(logits, other)  # the embeddings reached the decoder

    batch = native.llama_batch_init(1, 0, 1)
    try:
        generated = []
        for _ in range(4):
            token = _greedy(native, llama_ctx, n_vocab)
            assert 0 <= token < n_vocab
            generated.append(token)
            batch.n_tokens = 1
            batch.token[0] = token
            batch.pos[0] = n_past
            batch.n_seq_id[0] = 1
            batch.seq_id[0][0] = 0
            batch.logits[0] = 1
            assert native.llama_decode(llama_ctx, batch) == 0
            n_past += 1
        assert native.llama_memory_seq_pos_max(mem, 0) == n_past - 1 == expected + 3
        assert len(generated) == 4
    finally:
        native.llama_batch_free(batch)


def _decode_tokens(native: Any, ctx: Any, tokens: tuple[int, ...], pos0: int) -> int:
    batch = native.llama_batch_init(len(tokens), 0, 1)
    try:
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = pos0 + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if i == len(tokens) - 1 else 0
        batch.n_tokens = len(tokens)
        assert native.llama_decode(ctx, batch) == 0
    finally:
        native.llama_batch_free(batch)
    return pos0 + len(tokens)


def test_an_image_decoded_as_an_embeddings_batch_matches_llama_cpps_own_path(
    native: Any, text_model: Any, llama_ctx: Any, projector: Projector
) -> None:
    """The way the scheduler will add an image (text tokens, then the image's embeddings in
    a llama_batch of their own at the next positions, then text) gives the logits llama.cpp's
    mtmd_helper_eval_chunks gives."""
    n_vocab = int(native.llama_vocab_n_tokens(native.llama_model_get_vocab(text_model)))
    image = png(40, 40, 2)
    reference, n_ref, _ = _logits_after_image(native, llama_ctx, projector, image, n_vocab)

    native.llama_memory_clear(native.llama_get_memory(llama_ctx), True)
    with projector.tokenize(prompt(projector.marker), [image]) as chunks:
        before, _image, after = chunks.infos()
        pos = _decode_tokens(native, llama_ctx, before.tokens, 0)
        assert chunks.non_causal(1)  # Gemma 3 attends both ways across an image
        pos = decode_embeddings(llama_ctx, chunks.encode(1), pos, 0, non_causal=True)
        pos = _decode_tokens(native, llama_ctx, after.tokens, pos)
    assert pos == n_ref
    logits = np.ctypeslib.as_array(native.llama_get_logits_ith(llama_ctx, -1), shape=(n_vocab,))
    np.testing.assert_allclose(logits, reference, rtol=1e-3, atol=1e-3)
    assert int(logits.argmax()) == int(reference.argmax())

    with pytest.raises(BadRequestError, match="320 wide"):
        decode_embeddings(llama_ctx, np.zeros((4, 320), np.float32), pos)


def test_garbage_is_refused_before_it_reaches_llama_cpp(projector: Projector) -> None:
    with pytest.raises(ImageError, match="not a PNG or JPEG"):
        projector.tokenize(prompt(projector.marker), [b"GIF89a" + bytes(200)])
    with pytest.raises(ImageError, match="empty"):
        projector.tokenize(prompt(projector.marker), [b""])


def test_a_damaged_png_is_a_clear_error_from_the_native_decoder(projector: Projector) -> None:
    good = png(16, 16)
    # a valid signature and header, then noise where the pixels are
    damaged = good[:33] + struct.pack(">I", 64) + b"IDAT" + bytes(range(64)) + b"\0" * 4
    with pytest.raises(ImageError, match="could not be decoded"):
        projector.tokenize(prompt(projector.marker), [damaged])
    # the projector still works afterwards
    with projector.tokenize(prompt(projector.marker), [good]) as chunks:
        assert [i.kind for i in chunks.infos()] == ["text", "image", "text"]


def test_a_damaged_png_never_launches_ffmpeg(
    projector: Projector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp hands what stb_image cannot decode to ffprobe/ffmpeg (found on PATH) as a
    video; Ember points that fallback at a folder without them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launched = tmp_path / "launched"
    for name in ("ffprobe", "ffmpeg"):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\necho {name} >> '{launched}'\nexit 1\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '')}")
    damaged = png(16, 16)[:33] + struct.pack(">I", 8) + b"IDAT" + bytes(8) + b"\0" * 4
    with pytest.raises(ImageError, match="could not be decoded"):
        projector.tokenize(prompt(projector.marker), [damaged])
    assert not launched.exists()


def test_a_huge_image_is_refused_by_its_header(projector: Projector) -> None:
    header = png(16, 16)[:16] + struct.pack(">II", 20000, 20000) + png(16, 16)[24:]
    with pytest.raises(ImageError, match="20000x20000 pixels"):
        projector.tokenize(prompt(projector.marker), [header])
    with pytest.raises(ImageError, match="MB"):
        inspect_image(png(16, 16) + bytes(MAX_IMAGE_BYTES))


def test_images_and_markers_must_pair_up(projector: Projector) -> None:
    with pytest.raises(BadRequestError, match="1 image marker"):
        projector.tokenize(prompt(projector.marker), [])


def test_a_projector_of_the_wrong_embedding_size_is_a_clear_error(
    text_model: Any, tmp_path: Path
) -> None:
    path = write_projector(tmp_path / "mmproj-320.gguf", text_n_embd=320)
    with pytest.raises(ProjectorError, match="embedding size must match"):
        Projector(path, text_model)


def test_a_missing_or_damaged_projector_is_a_clear_error(
    text_model: Any, tmp_path: Path, gemma_path: Path
) -> None:
    with pytest.raises(ProjectorError, match="No projector file"):
        Projector(tmp_path / "absent.gguf", text_model)
    damaged = tmp_path / "mmproj-damaged.gguf"
    damaged.write_bytes(write_projector(tmp_path / "p.gguf").read_bytes()[:5000])
    with pytest.raises(ProjectorError, match="cannot be used"):
        Projector(damaged, text_model)
    with pytest.raises(ProjectorError, match="not a vision projector"):
        Projector(gemma_path, text_model)  # a language model is no projector


def test_a_projector_llama_cpp_refuses_is_a_clear_error(text_model: Any, tmp_path: Path) -> None:
    meta = {**projector_metadata(), "clip.projector_type": "no-such-projector"}
    path = tmp_path / "mmproj-unknown.gguf"
    path.write_bytes(gguf_from(meta, projector_tensors()))
    with pytest.raises(ProjectorError, match="could not load"):
        Projector(path, text_model)


def test_jpeg_size_is_read_from_its_start_of_frame() -> None:
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 300, 400, 3) + b"\x01\x22\x00"
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0" + bytes(9)
    info = inspect_image(b"\xff\xd8" + app0 + sof + b"\xff\xd9")
    assert (info.format, info.width, info.height) == ("jpeg", 400, 300)
    with pytest.raises(ImageError, match="JPEG image is damaged"):
        inspect_image(b"\xff\xd8\xff\xe0" + b"\x00")
