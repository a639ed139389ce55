"""Settings -> LoadParams and the KV cache types live in one core module, without Qt."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import get_args

import llama_cpp
import pytest

from app.commands.options import add_load_flags
from app.commands.options import load_params as cli_load_params
from app.config import Settings
from app.engine.load_settings import (
    KV_CACHE_CHOICES,
    KV_CACHE_TYPES,
    kv_cache_type,
    kv_cache_type_id,
    load_params,
)
from app.engine.types import DEFAULT_KV_CACHE_TYPE, KVCacheType, LoadParams


def test_load_params_follow_the_settings() -> None:
    settings = Settings()
    assert load_params(settings) == LoadParams(n_ctx=None, n_threads=None)
    for key, value in {
        "load.n_ctx": 4096,
        "load.n_threads": 3,
        "load.n_gpu_layers": -1,
        "load.n_batch": 256,
        "load.flash_attn": True,
        "load.use_mmap": False,
        "load.use_mlock": True,
        "load.cache_type": "q8_0",
        "load.parallel": 2,
        "load.draft_max": 0,
    }.items():
        settings.set(key, value)
    assert load_params(settings) == LoadParams(
        n_ctx=4096,
        n_gpu_layers=-1,
        n_threads=3,
        n_batch=256,
        n_ubatch=256,
        flash_attn=True,
        use_mmap=False,
        use_mlock=True,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        n_parallel=2,
        draft_max=0,
    )


@pytest.mark.parametrize(("value", "loaded"), [(-5, 0), (8, 8), (10_000, 32)])
def test_the_draft_max_setting_is_bounded(value: int, loaded: int) -> None:
    settings = Settings()
    settings.set("load.draft_max", value)
    assert load_params(settings).draft_max == loaded


@pytest.mark.parametrize("value", ["q3_k", "", "F16 ", None, 8])
def test_an_unknown_cache_type_loads_as_f16(value: object) -> None:
    assert kv_cache_type(value) == DEFAULT_KV_CACHE_TYPE == "f16"


def test_kv_cache_ids_are_llama_cpps() -> None:
    """The ids handed to llama.cpp come from the ggml type table: each matches llama.cpp's own
    constant (bf16 is 30 in ggml.h; the Python bindings do not export it)."""
    assert get_args(KVCacheType) == KV_CACHE_TYPES
    for name in KV_CACHE_TYPES:
        expected = getattr(llama_cpp, f"GGML_TYPE_{name.upper()}", 30 if name == "bf16" else None)
        assert kv_cache_type_id(name) == expected, name


def test_every_place_offers_the_same_kv_cache_types() -> None:
    parser = argparse.ArgumentParser()
    add_load_flags(parser)
    for value in KV_CACHE_TYPES:
        assert parser.parse_args(["--kv-type", value]).kv_type == value
    with pytest.raises(SystemExit):
        parser.parse_args(["--kv-type", "q3_k"])
    assert set(KV_CACHE_CHOICES) <= set(KV_CACHE_TYPES)
    assert Settings().get("load.cache_type") in KV_CACHE_CHOICES


def test_the_rule_imports_no_qt() -> None:
    """`ember serve` and `ember run` turn settings into LoadParams on machines without a display."""
    code = (
        "import sys, app.engine.load_settings, app.engine.sizing; "
        "print(sorted(m for m in sys.modules if m.startswith('PySide6')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_flash_attention_is_on_by_default_everywhere_and_can_be_turned_off(
    tmp_path: Path,
) -> None:
    """On by default (as llama.cpp's 'auto'): with conversations cached beside the answers
    being written, a decode step costs 0.6-0.8x as much (bench/flash_attn.py)."""
    from types import SimpleNamespace

    from app.engine.llamacpp import LlamaCppModel

    assert LoadParams().flash_attn
    assert Settings(tmp_path / "settings.json").get("load.flash_attn")
    parser = argparse.ArgumentParser()
    add_load_flags(parser)
    assert cli_load_params(parser.parse_args([])).flash_attn
    assert not cli_load_params(parser.parse_args(["--no-flash-attn"])).flash_attn
    assert cli_load_params(parser.parse_args(["--flash-attn"])).flash_attn

    native = llama_cpp.llama_cpp
    model = SimpleNamespace(n_ctx=512, n_batch=512, n_threads=1)
    for flash, kind in (
        (True, native.LLAMA_FLASH_ATTN_TYPE_AUTO),  # llama.cpp falls back where it lacks it
        (False, native.LLAMA_FLASH_ATTN_TYPE_DISABLED),
    ):
        params = LoadParams(flash_attn=flash)
        c = LlamaCppModel._context_params(model, native, params)  # type: ignore[arg-type]
        assert c.flash_attn_type == kind
