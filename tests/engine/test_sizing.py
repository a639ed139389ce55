"""One rule for the context a model loads with and whether it fits: the loader
(``choose_n_ctx``), ``ember info`` and the Models page's fit badge give the same answers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import build_parser
from app.commands import info as info_cmd
from app.commands.options import load_params
from app.config import Settings
from app.engine import sizing
from app.engine.fit import fit_check
from app.engine.gguf import GGUFInfo, parse_gguf_bytes, read_gguf
from app.engine.load_settings import load_params as settings_load_params
from app.engine.model_file import choose_n_ctx
from app.engine.types import FORCE_HINT, LoadParams, OutOfMemoryError
from app.library.hub import ModelFile, RemoteFile
from app.ui.models import fit
from tests.helpers.gguf_writer import gguf_bytes

FLAGS: tuple[tuple[str, ...], ...] = (
    (),
    ("--batch", "2048"),
    ("--flash-attn",),
    ("--kv-type", "q8_0"),
    ("-c", "4096"),
    ("-c", "32768", "--batch", "1024", "--flash-attn"),
)


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> GGUFInfo:
    return read_gguf(gemma_path)


@pytest.fixture(scope="module")
def big() -> GGUFInfo:
    """An 8B-class llama (32 layers, GQA 32/8, 128k trained context) with 4.5 GB of weights."""
    info = parse_gguf_bytes(
        gguf_bytes(
            context_length=131072,
            embedding_length=4096,
            block_count=32,
            head_count=32,
            head_count_kv=8,
            vocab_size=32000,
        )
    )
    return dataclasses.replace(info, tensor_data_size=4_500_000_000)


def run_params(path: Path, flags: tuple[str, ...]) -> LoadParams:
    """The LoadParams `ember run PATH FLAGS` loads with."""
    args = build_parser("run").parse_args(["run", str(path), *flags])
    return load_params(args)


def info_json(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    path: Path,
    flags: tuple[str, ...],
    available: int,
    *,
    info: GGUFInfo | None = None,
) -> dict[str, Any]:
    """What `ember info PATH --json FLAGS` reports with ``available`` bytes free."""
    monkeypatch.setattr(info_cmd, "available_memory", lambda: available)
    if info is not None:
        monkeypatch.setattr(info_cmd, "inspect_model_file", lambda _path: info)
    args = build_parser("info").parse_args(["info", str(path), "--json", *flags])
    assert args.func(args) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def budgets(info: GGUFInfo) -> list[int]:
    """Free memory around the interesting edges: plenty, exactly the default context, a byte
    short of it, half-way down, exactly the smallest context, a byte short, almost nothing."""
    default = sizing.estimate(info, sizing.default_context(info), LoadParams()).total_bytes
    smallest = sizing.estimate(info, sizing.MIN_N_CTX, LoadParams()).total_bytes
    return [
        10**13,
        default,
        default - 1,
        (default + smallest) // 2,
        smallest,
        smallest - 1,
        info.tensor_data_size // 2,
    ]


def assert_all_agree(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    info: GGUFInfo,
    path: Path,
    *,
    patch_info: bool,
) -> set[str]:
    """For every budget and set of flags: the loader, `ember info` and the fit check agree.
    Returns the outcomes seen, so a test can check it covered them all."""
    seen: set[str] = set()
    for available in budgets(info):
        for flags in FLAGS:
            params = run_params(path, flags)
            where = f"{flags} with {available} bytes free"
            data = info_json(
                monkeypatch, capsys, path, flags, available, info=info if patch_info else None
            )
            checked = params.n_ctx or sizing.default_context(info)
            badge = fit_check(info, checked, available_ram=available, params=params)
            assert data["max_ctx"] == badge.max_context, where
            try:
                n_ctx = choose_n_ctx(info, params, available)
            except OutOfMemoryError as err:
                seen.add("oom")
                assert not data["fits"] and data["error"] == str(err), where
                assert err.fits_n_ctx == (
                    data["max_ctx"] if data["max_ctx"] >= sizing.MIN_N_CTX else None
                ), where
                assert badge.level == "wont_fit", where
                if params.n_ctx:
                    assert data["n_ctx"] == params.n_ctx, where
                    assert data["memory"]["total_bytes"] == badge.needed_bytes, where
                else:
                    assert badge.max_context < sizing.MIN_N_CTX, where
                continue
            assert data["fits"] and data["error"] is None, where
            assert data["n_ctx"] == n_ctx == data["memory"]["n_ctx"], where
            if n_ctx == checked:
                seen.add("loads as asked")
                assert badge.level in ("fits", "tight"), where
                assert data["memory"]["total_bytes"] == badge.needed_bytes <= available, where
            else:  # the automatic context shrank to what fits: the badge saw it would not
                seen.add("shrinks")
                assert not params.n_ctx, where
                assert badge.level == "wont_fit" and badge.max_context == n_ctx, where
    return seen


def test_loader_info_and_fit_check_agree_on_the_real_model(
    gemma: GGUFInfo,
    gemma_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen = assert_all_agree(monkeypatch, capsys, gemma, gemma_path, patch_info=False)
    assert seen == {"loads as asked", "shrinks", "oom"}


def test_loader_info_and_fit_check_agree_on_a_big_model(
    big: GGUFInfo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = assert_all_agree(monkeypatch, capsys, big, Path("big-8B.gguf"), patch_info=True)
    assert seen == {"loads as asked", "shrinks", "oom"}


def test_info_reports_the_shrunk_context_run_would_use(
    big: GGUFInfo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """5.5 GB free: 8192 tokens of the 8B model do not fit; `ember run` loads with fewer, and
    `ember info` says so instead of "8192, won't fit"."""
    path = Path("big-8B.gguf")
    n_ctx = choose_n_ctx(big, run_params(path, ()), 5_500_000_000)
    assert sizing.MIN_N_CTX <= n_ctx < sizing.DEFAULT_N_CTX
    data = info_json(monkeypatch, capsys, path, (), 5_500_000_000, info=big)
    assert data["n_ctx"] == n_ctx and data["automatic_ctx"] and data["fits"]
    args = build_parser("info").parse_args(["info", str(path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"Memory at {n_ctx} ctx" in out
    assert f"shortened from {sizing.DEFAULT_N_CTX} to fit free memory" in out


@pytest.mark.parametrize(
    "change", [{"n_batch": 2048}, {"flash_attn": False}, {"n_batch": 128, "flash_attn": False}]
)
def test_batch_and_flash_attn_change_the_fit_check_as_they_change_the_loader(
    gemma: GGUFInfo, change: dict[str, Any]
) -> None:
    default = LoadParams(n_ctx=8192)
    changed = dataclasses.replace(default, **change)
    needed = sizing.estimate(gemma, 8192, changed).total_bytes
    assert needed != sizing.estimate(gemma, 8192, default).total_bytes
    for available in (needed, needed - 1):
        badge = fit_check(gemma, 8192, available_ram=available, params=changed)
        assert badge.needed_bytes == needed
        assert badge.estimate == sizing.estimate(gemma, 8192, changed)
        assert badge.max_context == sizing.max_context(gemma, changed, available)
        try:
            choose_n_ctx(gemma, changed, available)
        except OutOfMemoryError:
            assert available == needed - 1 and badge.level == "wont_fit"
        else:
            assert available == needed and badge.level != "wont_fit"


def _badge(info: GGUFInfo, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> fit.FitBadge:
    monkeypatch.setattr(fit, "header", lambda *_args: info)
    model = ModelFile("m", "Q4_K_M", (RemoteFile("m-Q4_K_M.gguf", 1, None, None),))
    return fit.check("owner/repo", "0" * 40, model, settings)


def test_the_models_page_badge_uses_the_load_settings(
    gemma: GGUFInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The badge checks with the batch size, flash attention and KV cache type the app loads
    with; with the automatic context it names the context the loader would pick."""
    settings = Settings()
    settings.set("load.n_ctx", 8192)
    fits_default = sizing.estimate(gemma, 8192, LoadParams()).total_bytes
    monkeypatch.setattr(sizing, "available_memory", lambda: fits_default)
    assert _badge(gemma, settings, monkeypatch).label != "Won't fit"
    settings.set("load.n_batch", 2048)  # a bigger batch needs more working memory
    params = settings_load_params(settings)
    with pytest.raises(OutOfMemoryError):
        choose_n_ctx(gemma, params, fits_default)
    assert _badge(gemma, settings, monkeypatch).label == "Won't fit"

    settings.set("load.n_batch", 512)
    settings.set("load.flash_attn", True)  # no attention scores: 8192 fits with less
    with_flash = sizing.estimate(gemma, 8192, LoadParams(flash_attn=True)).total_bytes
    monkeypatch.setattr(sizing, "available_memory", lambda: with_flash)
    choose_n_ctx(gemma, settings_load_params(settings), with_flash)
    assert _badge(gemma, settings, monkeypatch).label != "Won't fit"
    settings.set("load.flash_attn", False)
    assert _badge(gemma, settings, monkeypatch).label == "Won't fit"

    settings.set("load.n_ctx", 0)  # automatic: the loader shrinks the context to fit
    n_ctx = choose_n_ctx(gemma, settings_load_params(settings), with_flash)
    assert n_ctx < 8192
    badge = _badge(gemma, settings, monkeypatch)
    assert badge.label == "Tight"
    assert f"Ember would load it with {n_ctx:,} tokens instead" in badge.tooltip


def test_a_model_trained_on_a_short_context_loads_with_all_of_it() -> None:
    tiny = parse_gguf_bytes(gguf_bytes(context_length=256))
    plan = sizing.plan_load(tiny, LoadParams(), 10**12)
    assert plan.fits and plan.n_ctx == 256
    assert choose_n_ctx(tiny, LoadParams(), 10**12) == 256
    with pytest.raises(OutOfMemoryError, match="Not enough memory to load this model"):
        choose_n_ctx(tiny, LoadParams(), tiny.tensor_data_size)


def test_out_of_memory_messages_say_what_to_try(gemma: GGUFInfo) -> None:
    fits = sizing.max_context(gemma, LoadParams(), 700_000_000)
    with pytest.raises(OutOfMemoryError) as exc:
        choose_n_ctx(gemma, LoadParams(n_ctx=32768), 700_000_000)
    assert str(exc.value).startswith("Not enough memory for 32768 tokens of context: it needs ")
    assert f"700 MB is free; try a context of {fits} tokens, a smaller quantization or fewer " in (
        str(exc.value)
    )
    assert str(exc.value).endswith(FORCE_HINT)
    assert exc.value.fits_n_ctx == fits
    with pytest.raises(OutOfMemoryError) as exc:
        choose_n_ctx(gemma, LoadParams(), 250_000_000)
    assert str(exc.value).startswith("Not enough memory to load this model: it needs at least ")
    assert str(exc.value).endswith(
        "Close other programs, pick a smaller quantization or put fewer layers on the GPU. "
        + FORCE_HINT
    )
    assert exc.value.fits_n_ctx is None


def test_fit_check_levels() -> None:
    info = parse_gguf_bytes(gguf_bytes(context_length=4096, embedding_length=256, block_count=4))
    needed = fit_check(info, 4096, available_ram=10**12).needed_bytes
    roomy = fit_check(info, 4096, available_ram=needed * 4)
    assert roomy.level == "fits" and roomy.message.startswith("Fits")
    assert roomy.available_bytes == needed * 4
    tight = fit_check(info, 4096, available_ram=int(needed * 1.2))
    assert tight.level == "tight" and "Tight" in tight.message
    short = fit_check(info, 4096, available_ram=needed - 1)
    assert short.level == "wont_fit" and "Won't fit" in short.message
    pooled = fit_check(info, 4096, available_ram=needed // 2, available_vram=needed * 4)
    assert pooled.level == "fits" and "RAM + VRAM" in pooled.message
    assert fit_check(info, 4096).available_bytes == pytest.approx(
        sizing.available_memory(), rel=0.5
    )


def test_a_model_without_a_trained_context_is_sized_by_one_assumption() -> None:
    """A header that does not say its trained context: the memory model, the largest context
    that fits and the automatic plan all take the same length for it."""
    info = dataclasses.replace(
        parse_gguf_bytes(gguf_bytes(embedding_length=256, block_count=4)), context_length=None
    )
    assumed = sizing.trained_context(info)
    plenty = 10**12
    assert sizing.estimate_memory(info, 0).n_ctx == assumed
    assert sizing.max_context(info, LoadParams(), plenty) == assumed
    plan = sizing.plan_load(info, LoadParams(), plenty)
    assert plan.trained == plan.n_ctx == plan.max_context == assumed
