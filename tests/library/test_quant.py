"""File-name conventions: quantization, split parts, projectors, parameter counts."""

from __future__ import annotations

import pytest

from app.library.quant import (
    is_projector,
    model_stem,
    params_label,
    parse_param_hint,
    parse_quant,
    preferred_quant,
    quant_sort_key,
    split_name,
)


@pytest.mark.parametrize(
    ("filename", "quant"),
    [
        ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("model.q8_0.gguf", "Q8_0"),
        ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "Q4_K_XL"),
        ("phi-IQ3_XXS.gguf", "IQ3_XXS"),
        ("m-iq4_nl.gguf", "IQ4_NL"),
        ("gemma-bf16.gguf", "BF16"),
        ("gemma-f16.gguf", "F16"),
        ("gemma-fp16.gguf", "F16"),
        ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
        ("Q6_K/m-Q6_K-00001-of-00002.gguf", "Q6_K"),
        ("BF16/m-00001-of-00002.gguf", "BF16"),
        ("model.gguf", None),
        ("tinyllama-v1.1-chat.gguf", None),
    ],
)
def test_parse_quant(filename: str, quant: str | None) -> None:
    assert parse_quant(filename) == quant


def test_quant_order_and_default() -> None:
    quants = ["F16", "Q8_0", "Q2_K", "IQ3_XS", "Q4_K_M", "Q4_0", "WEIRD"]
    assert sorted(quants, key=quant_sort_key) == [
        "Q2_K", "IQ3_XS", "Q4_0", "Q4_K_M", "Q8_0", "F16", "WEIRD",
    ]  # fmt: skip
    assert preferred_quant(quants) == "Q4_K_M"
    assert preferred_quant(["Q8_0", "F16"]) == "Q8_0"
    assert preferred_quant(["Q2_K"]) == "Q2_K"
    assert preferred_quant([]) is None


def test_split_names_and_projectors() -> None:
    split = split_name("dir/model-Q4_K_M-00002-of-00005.gguf")
    assert split is not None and (split.base, split.index, split.count) == ("model-Q4_K_M", 2, 5)
    assert split_name("model-00006-of-00005.gguf") is None
    assert split_name("model-Q4_K_M.gguf") is None
    assert model_stem("a/model-00001-of-00002.gguf") == "model"
    assert model_stem("a/b/model-Q8_0.gguf") == "model-Q8_0"
    assert is_projector("mmproj-model-f16.gguf") and is_projector("sub/Model.mmproj-Q8_0.gguf")
    assert not is_projector("mmproj/model.gguf")


@pytest.mark.parametrize(
    ("text", "label", "billions"),
    [
        ("Llama-3.1-8B-Instruct", "8B", 8.0),
        ("Mixtral-8x7B-v0.1", "8x7B", 56.0),
        ("gemma-3-270m-it", "270M", 0.27),
        ("Qwen2.5-1.5B", "1.5B", 1.5),
        ("Qwen3-30B-A3B", "30B", 30.0),
        ("Phi-3.5-mini", None, None),
    ],
)
def test_param_hints(text: str, label: str | None, billions: float | None) -> None:
    hint = parse_param_hint(text)
    if label is None:
        assert hint is None
    else:
        assert hint is not None and hint.label.upper() == label.upper()
        assert hint.billions == pytest.approx(billions)


def test_params_label() -> None:
    assert params_label(7_241_732_096) == "7.2B"
    assert params_label(8_030_261_248) == "8B"
    assert params_label(268_098_176) == "268M"
    assert params_label(70_553_706_496) == "71B"
