"""GGUF header reader and memory estimate: the real Gemma 3 270M file plus small built files."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import random
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from app.engine import ggml_types, gguf
from app.engine.gguf import ArrayInfo, GGUFInfo, parse_gguf_bytes, read_gguf
from app.engine.gguf_format import format_info, human_bytes
from app.engine.gguf_reader import (
    GGUFCorruptError,
    GGUFError,
    GGUFNeedMoreData,
    GGUFNotFoundError,
    GGUFTruncatedError,
    GGUFUnsupportedError,
    NotGGUFError,
)
from app.engine.sizing import estimate_memory, max_context_for_memory
from tests.helpers.gguf_writer import write_gguf

# The test model's true values, cross-checked with gguf-py 0.19.0's GGUFReader.
GEMMA_FILE_SIZE = 253_113_024
GEMMA_DATA_OFFSET = 6_525_120
GEMMA_PARAMETERS = 268_098_176

# GGUF value types used by the builder below.
U8, I32, F32, BOOL, STR, ARR, U32, U64 = 0, 5, 6, 7, 8, 9, 4, 10
_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q"}
Q8_0, F32_TYPE = 8, 0


# --- a tiny GGUF writer, so every header field can be set (or broken) on purpose ----------


def _pack_str(order: str, text: str) -> bytes:
    raw = text.encode()
    return struct.pack(order + "Q", len(raw)) + raw


def _pack_value(order: str, vtype: int, value: Any) -> bytes:
    if vtype == STR:
        return _pack_str(order, value)
    if vtype == ARR:
        elem, items = value
        head = struct.pack(order + "IQ", elem, len(items))
        return head + b"".join(_pack_value(order, elem, item) for item in items)
    return struct.pack(order + _FORMATS[vtype], value)


def build_gguf(
    meta: Sequence[tuple[str, int, Any]],
    tensors: Sequence[tuple[str, tuple[int, ...], int]] = (),
    *,
    version: int = 3,
    order: str = "<",
    with_data: bool = True,
) -> bytes:
    out = bytearray(b"GGUF" + struct.pack(order + "IQQ", version, len(tensors), len(meta)))
    for key, vtype, value in meta:
        out += _pack_str(order, key) + struct.pack(order + "I", vtype)
        out += _pack_value(order, vtype, value)
    offset = end = 0
    for name, shape, type_id in tensors:
        out += _pack_str(order, name) + struct.pack(f"{order}I{len(shape)}Q", len(shape), *shape)
        out += struct.pack(order + "IQ", type_id, offset)
        n_elements = 1
        for dim in shape:
            n_elements *= dim
        known = type_id in ggml_types.GGML_TYPES
        end = offset + (ggml_types.ggml_type(type_id).row_bytes(n_elements) if known else 0)
        offset = -(-end // 32) * 32
    if with_data and tensors:
        out += bytes(-len(out) % 32) + bytes(end)
    return bytes(out)


def tiny_meta(**extra: tuple[int, Any]) -> list[tuple[str, int, Any]]:
    """A 2-layer llama-like model's metadata; ``extra`` adds or replaces keys ('.' as '__')."""
    meta = {
        "general.architecture": (STR, "llama"),
        "general.file_type": (U32, 7),
        "llama.context_length": (U32, 4096),
        "llama.embedding_length": (U32, 64),
        "llama.block_count": (U32, 2),
        "llama.feed_forward_length": (U32, 128),
        "llama.attention.head_count": (U32, 4),
        "llama.attention.head_count_kv": (U32, 2),
        "tokenizer.ggml.model": (STR, "gpt2"),
        "tokenizer.ggml.tokens": (ARR, (STR, [f"t{i}" for i in range(100)])),
    }
    meta.update({k.replace("__", "."): v for k, v in extra.items()})
    return [(k, t, v) for k, (t, v) in meta.items()]


TINY_TENSORS = [
    ("token_embd.weight", (64, 100), Q8_0),
    ("blk.0.attn_q.weight", (64, 64), Q8_0),
    ("blk.1.attn_q.weight", (64, 64), Q8_0),
    ("output_norm.weight", (64,), F32_TYPE),
]


def write(tmp_path: Path, data: bytes, name: str = "model.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- the real model ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def gemma(gemma_path: Path) -> GGUFInfo:
    return read_gguf(gemma_path)


@pytest.fixture(scope="session")
def gemma_head(gemma_path: Path) -> bytes:
    with gemma_path.open("rb") as f:
        return f.read(GEMMA_DATA_OFFSET)


def test_gemma_metadata_matches_the_known_values(gemma: GGUFInfo, gemma_path: Path) -> None:
    assert gemma.path == str(gemma_path)
    assert (gemma.version, gemma.byte_order) == (3, "little")
    assert (gemma.architecture, gemma.name, gemma.size_label) == ("gemma3", "Gemma 3 270m", "270M")
    assert (gemma.file_type, gemma.quantization) == (15, "Q4_K_M")
    assert gemma.context_length == 32768
    assert gemma.block_count == 18
    assert (gemma.head_count, gemma.head_count_kv) == (4, 1)
    assert gemma.layer_kv_heads() == (1,) * 18
    assert (gemma.embedding_length, gemma.feed_forward_length) == (640, 2048)
    assert (gemma.key_length, gemma.value_length) == (256, 256)
    assert gemma.sliding_window == 512
    assert (gemma.tokenizer_model, gemma.vocab_size) == ("llama", 262_144)
    assert (gemma.bos_token_id, gemma.eos_token_id) == (2, 1)
    assert gemma.chat_template is None
    assert gemma.has_fim is False
    assert gemma.tensor_count == len(gemma.tensors) == 236
    assert 265_000_000 < gemma.parameter_count < 271_000_000
    assert gemma.parameter_count == GEMMA_PARAMETERS


def test_gemma_sizes_add_up_to_the_file(gemma: GGUFInfo, gemma_path: Path) -> None:
    size = gemma_path.stat().st_size
    assert gemma.file_size == gemma.expected_file_size == size == GEMMA_FILE_SIZE
    assert gemma.is_complete is True
    assert gemma.tensor_data_offset == GEMMA_DATA_OFFSET
    assert gemma.tensor_data_offset % gemma.alignment == 0
    assert gemma.tensor_data_size == 246_587_904
    assert {t.type.name for t in gemma.tensors} == {"F32", "Q5_0", "Q4_K", "Q8_0", "Q6_K"}


def test_vocabulary_arrays_are_skipped_small_arrays_kept(gemma: GGUFInfo) -> None:
    meta = gemma.metadata
    assert meta["tokenizer.ggml.tokens"] == ArrayInfo(STR, 262_144)
    assert meta["tokenizer.ggml.scores"] == ArrayInfo(F32, 262_144)
    assert len(meta["tokenizer.ggml.token_type"]) == 262_144
    assert meta["general.tags"] == ["gemma3", "gemma", "google", "text-generation"]
    assert meta["tokenizer.ggml.add_bos_token"] is True


def test_read_gguf_reads_only_the_header(
    gemma_path: Path, gemma: GGUFInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_sizes: list[int] = []

    class CountingFile(io.FileIO):
        def read(self, size: int | None = -1, /) -> bytes:
            data = super().read(size)
            read_sizes.append(len(data))
            return data

    def counting_open(file: Path, mode: str = "r", buffering: int = -1) -> io.FileIO:
        assert mode == "rb"
        return CountingFile(file, "rb")

    monkeypatch.setattr(gguf, "open", counting_open, raising=False)
    monkeypatch.setattr(gguf, "_READ", {})  # not the header read before
    assert read_gguf(gemma_path) == gemma
    # The 6.5 MB header (mostly the 262k-token vocabulary) plus at most one read-ahead chunk.
    assert read_sizes
    assert sum(read_sizes) <= GEMMA_DATA_OFFSET + (1 << 20)
    assert sum(read_sizes) < GEMMA_FILE_SIZE // 25


def test_a_header_read_again_is_the_one_read_before_until_the_file_changes(
    tmp_path: Path,
) -> None:
    path = write_gguf(tmp_path / "m.gguf", vocab_size=64)
    first = read_gguf(path)
    assert read_gguf(path) is first  # a load reads it twice: the budget, then the load
    assert read_gguf(path, tokens=True) is not first  # the vocabulary's texts: read
    write_gguf(path, vocab_size=96)
    changed = read_gguf(path)
    assert changed is not first and changed.vocab_size == 96 != first.vocab_size
    path.unlink()
    with pytest.raises(GGUFNotFoundError):
        read_gguf(path)


def test_parse_bytes_gives_the_same_info(gemma: GGUFInfo, gemma_head: bytes) -> None:
    parsed = parse_gguf_bytes(gemma_head, file_size=GEMMA_FILE_SIZE)
    assert parsed.path is None
    assert dataclasses.replace(parsed, path=gemma.path) == gemma


def test_parse_bytes_without_file_size(gemma: GGUFInfo, gemma_head: bytes) -> None:
    parsed = parse_gguf_bytes(gemma_head)
    assert parsed.file_size is None and parsed.is_complete is None
    assert parsed.expected_file_size == GEMMA_FILE_SIZE
    assert dict(format_info(parsed))["File size"] == "253 MB (from the header)"


def test_fetching_what_need_more_data_asks_for_converges(
    gemma: GGUFInfo, gemma_head: bytes
) -> None:
    data = gemma_head[:4096]
    rounds = 0
    while True:
        try:
            parsed = parse_gguf_bytes(data, file_size=GEMMA_FILE_SIZE)
            break
        except GGUFNeedMoreData as exc:
            assert exc.needed > len(data) and exc.minimum > len(data)
            assert exc.minimum <= exc.needed <= GEMMA_FILE_SIZE
            data = gemma_head[: exc.needed]
            rounds += 1
            assert rounds < 20
    assert dataclasses.replace(parsed, path=gemma.path) == gemma
    assert rounds <= 12  # geometric growth, not one string at a time


@pytest.mark.parametrize("data", [b"", b"GG", b"GGUF", b"GGUF\x03\x00\x00\x00\x01"])
def test_a_head_too_short_asks_for_more(data: bytes) -> None:
    with pytest.raises(GGUFNeedMoreData) as info:
        parse_gguf_bytes(data)
    assert info.value.needed > len(data)


def test_format_info_rows(gemma: GGUFInfo) -> None:
    rows = format_info(gemma)
    assert [label for label, _ in rows] == [
        "Architecture", "Name", "Parameters", "Quantization", "Context length (trained)",
        "Layers", "Attention heads", "KV heads", "Embedding size", "Sliding window",
        "Tokenizer", "Vocabulary", "Chat template", "FIM support", "File size",
    ]  # fmt: skip
    values = dict(rows)
    assert values["Parameters"] == "270M (268,098,176)"
    assert values["Quantization"] == "Q4_K_M"
    assert values["Context length (trained)"] == "32,768 tokens"
    assert values["Sliding window"] == "512 tokens"
    assert values["Vocabulary"] == "262,144 tokens"
    assert values["Chat template"].startswith("none")
    assert values["FIM support"] == "no"
    assert values["File size"] == "253 MB"


# --- errors --------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GGUFNotFoundError, match=r"No model file at .*nope\.gguf"):
        read_gguf(tmp_path / "nope.gguf")


def test_folder(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="is a folder"):
        read_gguf(tmp_path)


@pytest.mark.parametrize(
    ("content", "hint"),
    [
        (b"hello, this is a text file\n", "hello, t"),
        (b"<!DOCTYPE html><html>Not Found</html>", "a web page"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:ab", "Git LFS pointer"),
        (struct.pack("<Q", 50) + b'{"__metadata__": {}}', "safetensors"),
        (b"PK\x03\x04" + bytes(60), "ZIP"),
    ],
)
def test_not_a_gguf_file(tmp_path: Path, content: bytes, hint: str) -> None:
    path = write(tmp_path, content, "model.bin")
    with pytest.raises(NotGGUFError) as info:
        read_gguf(path)
    message = str(info.value)
    assert message.startswith(f"{path} is not a GGUF model file (it starts with ")
    assert hint in message
    assert message.endswith("Ember runs GGUF models; convert it or download a .gguf file.")
    assert "b'" not in message  # no Python bytes literal
    with pytest.raises(NotGGUFError):
        parse_gguf_bytes(content)


def test_empty_file_is_incomplete(tmp_path: Path) -> None:
    with pytest.raises(GGUFTruncatedError, match="incomplete"):
        read_gguf(write(tmp_path, b""))


@pytest.mark.parametrize("seed", range(20))
def test_random_bytes_after_the_magic_give_a_clear_error(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    body = bytes(rng.randrange(256) for _ in range(4096))
    version = struct.pack("<I", 3) if seed % 2 else body[:4]
    data = b"GGUF" + version + body
    with pytest.raises(GGUFError):
        read_gguf(write(tmp_path, data))
    with pytest.raises(GGUFError):
        parse_gguf_bytes(data)


GARBAGE = {
    "tensor count": b"GGUF" + struct.pack("<IQQ", 3, 10**12, 0),
    "kv count": b"GGUF" + struct.pack("<IQQ", 3, 0, 10**10),
    "key length": b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 40) + bytes(64),
    "array length": build_gguf([("a.b", ARR, (U8, []))]).replace(
        struct.pack("<IQ", U8, 0), struct.pack("<IQ", U8, 10**12)
    ),
    "dims": build_gguf([], [("t", (32, 1, 1, 1, 1), F32_TYPE)]),
    "block": build_gguf([], [("t", (33,), Q8_0)]),
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_absurd_header_values_are_corrupt(tmp_path: Path, case: str) -> None:
    with pytest.raises(GGUFCorruptError, match="is damaged"):
        read_gguf(write(tmp_path, GARBAGE[case]))


def test_unknown_value_and_tensor_types(tmp_path: Path) -> None:
    bad_value = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _pack_str("<", "k") + struct.pack("<I", 99)
    with pytest.raises(GGUFCorruptError, match="unknown value type 99"):
        parse_gguf_bytes(bad_value + bytes(16))
    with pytest.raises(GGUFUnsupportedError, match=r"ggml type 200.*update Ember"):
        read_gguf(write(tmp_path, build_gguf([], [("t", (32,), 200)], with_data=False)))


@pytest.mark.parametrize(
    ("version", "error", "text"),
    [
        (1, GGUFUnsupportedError, "version 1, which llama.cpp no longer loads"),
        (4, GGUFUnsupportedError, "version 4, newer than .* update Ember"),
        (0, GGUFCorruptError, "version field reads 0"),
    ],
)
def test_wrong_version(tmp_path: Path, version: int, error: type[GGUFError], text: str) -> None:
    data = build_gguf(tiny_meta(), TINY_TENSORS, version=version)
    with pytest.raises(error, match=text):
        read_gguf(write(tmp_path, data))


def test_truncated_copies_of_the_model(tmp_path: Path, gemma_path: Path) -> None:
    with gemma_path.open("rb") as f:
        head_100mb = f.read(100 * 1024 * 1024)
    with pytest.raises(GGUFTruncatedError) as info:
        read_gguf(write(tmp_path, head_100mb, "big.gguf"))
    assert (info.value.expected, info.value.actual) == (GEMMA_FILE_SIZE, len(head_100mb))
    assert str(info.value) == (
        f"{tmp_path / 'big.gguf'} is incomplete: expected 253,113,024 bytes but the file has "
        "104,857,600 (the download was probably interrupted); download it again"
    )
    with pytest.raises(GGUFTruncatedError, match=r"expected at least [\d,]+ bytes .* 1,024"):
        read_gguf(write(tmp_path, head_100mb[:1024], "small.gguf"))
    # From the Hub the data part is never fetched: only the header matters.
    assert parse_gguf_bytes(head_100mb[:GEMMA_DATA_OFFSET]).architecture == "gemma3"


def test_every_cut_of_a_small_file_is_reported(tmp_path: Path) -> None:
    data = build_gguf(tiny_meta(), TINY_TENSORS)
    header_end = len(build_gguf(tiny_meta(), TINY_TENSORS, with_data=False))
    for cut in range(header_end):
        with pytest.raises(GGUFNeedMoreData):
            parse_gguf_bytes(data[:cut])
        with pytest.raises(GGUFTruncatedError):
            parse_gguf_bytes(data[:cut], file_size=cut)
    # Neither the padding after the header nor the tensor data is needed from a head.
    assert parse_gguf_bytes(data[:header_end]) == parse_gguf_bytes(data)
    path = tmp_path / "cut.gguf"
    for cut in [*range(0, header_end, 37), header_end, len(data) // 2, len(data) - 1]:
        path.write_bytes(data[:cut])
        with pytest.raises(GGUFTruncatedError):
            read_gguf(path)


def test_flipped_bytes_never_escape_as_other_errors() -> None:
    data = build_gguf(tiny_meta(), TINY_TENSORS)
    rng = random.Random(7)
    for _ in range(300):
        broken = bytearray(data)
        for _ in range(3):
            broken[rng.randrange(8, 400)] = rng.randrange(256)
        with contextlib.suppress(GGUFError):  # any other exception fails the test
            parse_gguf_bytes(bytes(broken), file_size=len(broken))


# --- format details on built files ---------------------------------------------------------


def test_tiny_model_fields(tmp_path: Path) -> None:
    info = read_gguf(write(tmp_path, build_gguf(tiny_meta(), TINY_TENSORS)))
    assert (info.architecture, info.quantization, info.vocab_size) == ("llama", "Q8_0", 100)
    assert info.metadata["tokenizer.ggml.tokens"] == ArrayInfo(STR, 100)
    assert (info.key_length, info.value_length) == (16, 16)  # embedding // heads
    assert info.sliding_window is None and info.chat_template is None
    assert info.parameter_count == 64 * 100 + 2 * 64 * 64 + 64
    assert info.size_label == "15K"  # 14,656 parameters
    assert info.tensor_data_size == (6400 + 2 * 4096) // 32 * 34 + 64 * 4


def test_big_endian_and_version_2_files(tmp_path: Path) -> None:
    little = read_gguf(write(tmp_path, build_gguf(tiny_meta(), TINY_TENSORS), "le.gguf"))
    for order, version in ((">", 3), ("<", 2)):
        data = build_gguf(tiny_meta(), TINY_TENSORS, order=order, version=version)
        info = read_gguf(write(tmp_path, data, "other.gguf"))
        assert info.version == version
        assert info.byte_order == ("big" if order == ">" else "little")
        assert dataclasses.replace(info, path=little.path, version=3, byte_order="little") == little


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (("fim_pre", "fim_suf", "fim_mid"), True),
        (("prefix", "suffix", "middle"), True),
        (("fim_pre", "fim_suf"), False),
        ((), False),
    ],
)
def test_fim_detection(keys: tuple[str, ...], expected: bool) -> None:
    extra = {f"tokenizer__ggml__{k}_token_id": (U32, i) for i, k in enumerate(keys)}
    info = parse_gguf_bytes(build_gguf(tiny_meta(**extra), TINY_TENSORS))
    assert info.has_fim is expected


def test_per_layer_head_counts_survive_beyond_the_small_array_limit() -> None:
    kv = [0 if i % 4 == 0 else 8 for i in range(80)]  # hybrid: every 4th layer has no attention
    meta = tiny_meta(
        llama__block_count=(U32, 80),
        llama__attention__head_count=(ARR, (I32, [32] * 80)),
        llama__attention__head_count_kv=(ARR, (I32, kv)),
        llama__embedding_length=(U32, 4096),
    )
    info = parse_gguf_bytes(build_gguf(meta, TINY_TENSORS))
    assert info.metadata["llama.attention.head_count_kv"] == kv
    assert (info.head_count, info.head_count_kv, info.key_length) == (32, 8, 128)
    assert info.layer_kv_heads() == tuple(kv)
    assert dict(format_info(info))["KV heads"] == "0-8 (varies by layer)"
    estimate = estimate_memory(info, 1024)
    assert estimate.kv_cache_bytes == 60 * 1024 * (8 * 128 * 2) * 2


def test_quantization_without_file_type_is_the_dominant_tensor_type() -> None:
    meta = [m for m in tiny_meta() if m[0] != "general.file_type"]
    assert parse_gguf_bytes(build_gguf(meta, TINY_TENSORS)).quantization == "Q8_0"
    guessed = tiny_meta(general__file_type=(U32, 1024))
    assert parse_gguf_bytes(build_gguf(guessed, TINY_TENSORS)).quantization == "Q8_0"


@pytest.mark.parametrize(
    ("count", "label"),
    [(268_098_176, "268M"), (1_543_714_304, "1.5B"), (7_241_732_096, "7.2B"),
     (70_553_706_496, "71B"), (0, None)],
)  # fmt: skip
def test_size_label_from_parameter_count(count: int, label: str | None) -> None:
    assert gguf._size_label(count) == label


def test_type_table_spot_checks() -> None:
    assert ggml_types.ggml_type("q4_k").row_bytes(256) == 144
    assert ggml_types.ggml_type("Q6_K").row_bytes(512) == 420
    assert ggml_types.ggml_type("iq4_xs").row_bytes(256) == 136
    assert (
        ggml_types.ggml_type(39).name == "MXFP4"
        and ggml_types.ggml_type("mxfp4").row_bytes(32) == 17
    )
    assert ggml_types.ggml_type("bf16").row_bytes(10) == 20
    with pytest.raises(ValueError, match="Unknown ggml type"):
        ggml_types.ggml_type("q3_0")


# --- memory --------------------------------------------------------------------------------


def test_kv_cache_matches_the_hand_computation(gemma: GGUFInfo) -> None:
    # 18 layers, 1 KV head x 256 dims, f16 K and V: 1024 bytes per cell per layer.
    # Gemma 3 layers 5, 11 and 17 are global (32768 cells); the other 15 slide over a
    # 512-token window plus one 512-token batch (1024 cells).
    # The default is the full-size SWA cache, what the engine loads (so KV reuse works).
    estimate = estimate_memory(gemma, 32768, swa_full=False)
    assert estimate.kv_cache_bytes == 3 * 32768 * 1024 + 15 * 1024 * 1024 == 116_391_936
    full = estimate_memory(gemma, 32768)
    assert full.kv_cache_bytes == 18 * 32768 * 1024
    q8 = estimate_memory(gemma, 32768, cache_type_k="q8_0", cache_type_v="q8_0", swa_full=False)
    assert q8.kv_cache_bytes == 116_391_936 * (2 * 8 * 34) // 1024  # 8 blocks of 34 bytes
    q4k = estimate_memory(gemma, 32768, cache_type_k="q4_0")
    assert q4k.kv_cache_bytes < full.kv_cache_bytes


def test_estimate_parts_are_sane(gemma: GGUFInfo) -> None:
    estimate = estimate_memory(gemma, 4096)
    assert estimate.weights_bytes == gemma.tensor_data_size
    assert 0.95 < estimate.weights_bytes / GEMMA_FILE_SIZE <= 1
    assert estimate.total_bytes == (
        estimate.weights_bytes + estimate.kv_cache_bytes + estimate.compute_bytes
    )
    # logits of one token per sequence (llama.cpp's output buffer), not of a whole batch
    assert estimate.compute_bytes > 262_144 * 4
    assert estimate.compute_bytes < 262_144 * 512 * 4
    assert estimate_memory(gemma, 4096, n_outputs=12).compute_bytes == (
        estimate.compute_bytes + 11 * 262_144 * 4
    )
    flash = estimate_memory(gemma, 4096, flash_attn=True)
    assert flash.compute_bytes < estimate.compute_bytes
    assert estimate_memory(gemma, 0).n_ctx == 32768  # 0 means "trained", as in llama.cpp
    with pytest.raises(ValueError, match="n_ctx"):
        estimate_memory(gemma, -1)


def test_estimate_grows_with_context(gemma: GGUFInfo) -> None:
    sizes = [256, 512, 1000, 2048, 4096, 8192, 16384, 32768]
    totals = [estimate_memory(gemma, n).total_bytes for n in sizes]
    assert totals == sorted(totals) and totals[0] < totals[-1]
    caches = [estimate_memory(gemma, n, swa_full=True).kv_cache_bytes for n in sizes]
    assert len(set(caches)) == len(caches)


def test_gpu_offload_split(gemma: GGUFInfo) -> None:
    assert estimate_memory(gemma, 4096).gpu_bytes == 0
    everything = estimate_memory(gemma, 4096, n_gpu_layers=-1)
    embeddings = next(t.n_bytes for t in gemma.tensors if t.name == "token_embd.weight")
    assert everything.gpu_bytes == (gemma.tensor_data_size - embeddings + everything.kv_cache_bytes)
    some = estimate_memory(gemma, 4096, n_gpu_layers=6).gpu_bytes
    assert 0 < some < everything.gpu_bytes
    assert everything.ram_bytes == everything.total_bytes - everything.gpu_bytes


def test_max_context_for_memory(gemma: GGUFInfo) -> None:
    assert max_context_for_memory(gemma, 10**12) == 32768
    budget = estimate_memory(gemma, 8192).total_bytes
    assert max_context_for_memory(gemma, budget) == 8192
    tight = max_context_for_memory(gemma, budget - 1)
    assert 0 < tight < 8192 and tight % 256 == 0
    assert estimate_memory(gemma, tight).total_bytes <= budget - 1
    assert estimate_memory(gemma, tight + 256).total_bytes > budget - 1
    q8 = max_context_for_memory(gemma, budget, cache_type_k="q8_0", cache_type_v="q8_0")
    assert q8 > 8192
    assert max_context_for_memory(gemma, gemma.tensor_data_size) == 0


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (999_999, "1.0 MB"),
     (253_113_024, "253 MB"), (1_200_000_000, "1.2 GB"), (12_500_000_000, "12.5 GB"),
     (-2048, "-2.0 KB")],
)  # fmt: skip
def test_human_bytes(n: int, text: str) -> None:
    assert human_bytes(n) == text
