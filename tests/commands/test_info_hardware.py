"""``ember info --hardware`` and where ``ember info MODEL`` says the layers would run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.commands import info as info_cmd
from app.engine import backends
from app.engine.backends import BackendError
from app.engine.sizing import GpuMemory
from tests.helpers.cli import ember


def _steady(rows: dict[str, str]) -> dict[str, str]:
    return {k: re.sub(r"[\d.,]+ [KMGT]?B free", "? free", v) for k, v in rows.items()}


def test_hardware_lists_the_cpu_its_variant_and_llama_cpp_system_info() -> None:
    r = ember("info", "--hardware")
    assert r.returncode == 0, r.stderr
    rows = _rows(r.stdout)
    hw = backends.hardware()  # this process reads the same hardware
    assert list(rows)[:4] == ["CPU", "CPU variant", "CPU features", "Back-ends"]
    # free memory moves between the two readings (another process's, a moment apart)
    assert _steady(rows) == _steady(dict(backends.describe(hw)))
    assert rows["CPU"] == next(d.description for d in hw.devices if d.kind == "cpu")
    assert rows["Back-ends"].endswith("CPU")
    assert "(cpu, CPU); " in rows["Device CPU"] and " free of " in rows["Device CPU"]
    assert "AVX2 = 1" in rows["System info"]
    if not hw.dynamic:  # bootstrap.py's static build
        assert rows["CPU variant"] == "built in (one CPU build, chosen when compiled)"
        assert rows["GPU"] == "none found: models run on the CPU"


def test_hardware_json() -> None:
    r = ember("info", "--hardware", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    hw = backends.hardware()
    assert data["backends"] == list(hw.backends) and data["dynamic"] == hw.dynamic
    assert data["gpus"] == [d.name for d in hw.gpus]
    (cpu,) = [d for d in data["devices"] if d["kind"] == "cpu"]
    assert cpu["backend"] == "CPU" and cpu["memory_total"] > 0
    assert data["cpu_variant"] == hw.cpu_variant
    assert "AVX2" in data["cpu_features"] and data["system_info"].startswith("CPU : ")
    assert data["errors"] == []


def test_model_or_hardware_not_both_not_neither(
    capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    assert main(["info"]) == 1
    assert capsys.readouterr().err.strip() == (
        "ember: error: give a MODEL (a .gguf path or a model in the library), or --hardware"
    )
    assert main(["info", str(gemma_path), "--hardware"]) == 1
    assert "give either MODEL or --hardware, not both" in capsys.readouterr().err


def test_a_broken_llama_cpp_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(lib_dir: Path | None = None) -> Any:
        raise BackendError("libggml.so has no ggml_backend_dev_count: reinstall it.")

    monkeypatch.setattr(backends, "hardware", broken)
    assert main(["info", "--hardware"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ember: error: libggml.so has no ggml_backend_dev_count: reinstall it."]


def _rows(text: str) -> dict[str, str]:
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines())


def _info(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["info", *argv]) == 0
    return capsys.readouterr().out


def test_info_says_where_the_layers_would_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gemma_path: Path
) -> None:
    data = json.loads(_info(capsys, str(gemma_path), "--json", "-c", "4096"))
    assert data["offload"]["placement"] == "cpu" and data["offload"]["label"] == "CPU only"
    assert _rows(_info(capsys, str(gemma_path)))["Runs on"] == "CPU only: llama.cpp found no GPU."

    gpus = (GpuMemory("Vulkan0", 8 * 1024**3, 8 * 1024**3),)
    monkeypatch.setattr(info_cmd.backends, "gpu_memory", lambda: gpus)
    data = json.loads(_info(capsys, str(gemma_path), "--json", "--gpu-layers", "-1"))
    assert data["offload"]["n_gpu_layers"] == 19 and data["offload"]["label"] == "fits on the GPU"
    text = _info(capsys, str(gemma_path), "--gpu-layers", "6")
    assert (
        "Runs on" in text and "Partly on the GPU (as set by --gpu-layers or the setting): " in text
    )
    assert "6 of 18 layers on Vulkan0" in text


def test_watch_prints_the_machine_in_use_each_interval() -> None:
    r = ember("info", "--hardware", "--watch", "--interval", "0.05", "--samples", "3")
    assert r.returncode == 0, r.stderr
    blocks = r.stdout.split("\nRAM ")[1:]  # piped: each refresh follows the last
    assert len(blocks) == 3
    for block in blocks:
        rows = _rows("RAM " + block)
        assert re.fullmatch(r"[\d.]+ [KMGT]?B of [\d.]+ [KMGT]?B \(\d+%\)", rows["RAM"])
        assert rows["CPU"].endswith("%")


def test_watch_json_is_one_sample_a_line() -> None:
    r = ember("info", "--hardware", "--watch", "--json", "--interval", "0.05", "--samples", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()[-2:]
    samples = [json.loads(line) for line in lines]
    assert all(s["ram_total"] > s["ram_used"] > 0 < s["ram_ember"] for s in samples)
    assert samples[1]["time"] > samples[0]["time"]


def test_watch_needs_hardware_and_a_sane_interval() -> None:
    r = ember("info", "--watch")
    assert r.returncode != 0 and "--watch goes with --hardware" in r.stderr
    r = ember("info", "--hardware", "--watch", "--interval", "0")
    assert r.returncode != 0 and "--interval" in r.stderr
