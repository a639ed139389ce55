"""``--gpu-layers auto|N|-1`` (automatic by default), ``--device auto|cpu|NAME``, and ``ember run``
saying on stderr that the CPU took over from a GPU that failed while the model loaded."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.commands import info as info_cmd
from app.commands.options import add_load_flags, load_params
from app.engine.sizing import AUTO_GPU_LAYERS
from app.engine.types import LoadedModel, LoadParams
from tests.helpers.cli import ember
from tests.helpers.gpu import GPU, failing_gpu


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_load_flags(parser)
    return parser.parse_args(argv)


def test_gpu_layers_is_automatic_unless_given() -> None:
    assert load_params(_parse()).n_gpu_layers == AUTO_GPU_LAYERS
    for given, value in (("auto", AUTO_GPU_LAYERS), ("Auto", AUTO_GPU_LAYERS), ("-1", -1)):
        assert load_params(_parse("--gpu-layers", given)).n_gpu_layers == value
    assert load_params(_parse("--gpu-layers", "0")).n_gpu_layers == 0
    assert load_params(_parse("--gpu-layers", "12")).n_gpu_layers == 12


def test_a_bad_gpu_layers_value_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    for bad, says in (("many", "'many' is not auto, -1 or a number"), ("-2", "-2 layers")):
        with pytest.raises(SystemExit) as stop:
            main(["info", "model.gguf", "--gpu-layers", bad])
        assert stop.value.code == 2
        assert says in capsys.readouterr().err


def test_device_is_auto_cpu_or_a_name() -> None:
    assert load_params(_parse()).device == "auto"
    assert load_params(_parse("--device", "CPU")).device == "cpu"
    assert load_params(_parse("--device", "Vulkan1")).device == "Vulkan1"


def _info(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["info", *argv, "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out)["offload"])


def test_info_offloads_automatically_and_follows_device(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    monkeypatch.setattr(info_cmd.backends, "gpu_memory", lambda: GPU)
    auto = _info(capsys, str(gemma_path))  # no flag: automatic
    assert auto["automatic"] and auto["n_gpu_layers"] == 19 and auto["label"] == "fits on the GPU"
    cpu = _info(capsys, str(gemma_path), "--device", "cpu")
    assert cpu["n_gpu_layers"] == 0 and cpu["label"] == "CPU only"
    one = _info(capsys, str(gemma_path), "--device", "Vulkan0")
    assert one["n_gpu_layers"] == 19 and one["devices"] == ["Vulkan0"]
    gone = _info(capsys, str(gemma_path), "--device", "Vulkan7")
    assert gone["n_gpu_layers"] == 0 and gone["devices"] == []


def test_run_says_on_stderr_that_the_cpu_took_over(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    failing_gpu(monkeypatch)
    argv = ["run", str(gemma_path), "-c", "512", "--parallel", "1", "--temp", "0", "-n", "3"]
    assert main([*argv, "Say hi"]) == 0
    out, err = capsys.readouterr()
    assert out.strip()  # answered, on the CPU
    sentence = f"Loading {gemma_path.name} on the GPU (Vulkan0) failed, so it runs on the CPU"
    assert f"ember: {sentence} instead.\n" in err


def test_run_says_where_the_model_runs(gemma_path: Path) -> None:
    r = ember("run", str(gemma_path), "-c", "512", "--parallel", "1", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert f"Chatting with {gemma_path} (512 tokens of context, on the CPU)." in r.stderr


def _loaded(n_gpu_layers: int = 0, gpu_devices: tuple[str, ...] = ()) -> LoadedModel:
    return LoadedModel(
        "m", "/m.gguf", 512, 512, 2, LoadParams(), None, False, 0.0,
        n_gpu_layers=n_gpu_layers, gpu_devices=gpu_devices,
    )  # fmt: skip


def test_runs_on_names_the_devices_and_layers() -> None:
    assert _loaded().runs_on == "the CPU"
    assert _loaded(19, ("Vulkan0",)).runs_on == "Vulkan0 (19 layers)"
    assert _loaded(0, ("Vulkan0",)).runs_on == "the CPU"
