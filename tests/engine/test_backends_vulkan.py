"""The DL + Vulkan build of llama.cpp (scripts/build_llama.py) for real, on lavapipe.

Needs that build installed and Mesa's lavapipe (Debian: mesa-vulkan-drivers): the CI's
llama-cpp-python is the static CPU build, so these tests carry the ``vulkan`` marker, which
the default run deselects; run them with ``pytest -m vulkan`` in a venv holding the DL build.

Two environment variables, set before the back-ends load: llama.cpp hides CPU-type Vulkan
devices such as lavapipe unless listed in ``GGML_VK_VISIBLE_DEVICES`` (rightly, for users),
and Mesa 22.3's lavapipe crashes on ggml's graph optimisation with two or more offloaded
layers (``GGML_VK_DISABLE_GRAPH_OPTIMIZE``). lavapipe decodes the test model at about a token
a second here: the answers are short.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

import pytest

from app.engine import backends
from app.engine.backends import Hardware
from app.engine.sizing import AUTO_GPU_LAYERS
from app.engine.types import CompletionRequest, LoadedModel, LoadParams, SamplingParams
from app.engine.worker import EngineWorker
from tests.helpers.cli import EMBER, ember
from tests.helpers.cpu_variant import best_variant
from tests.helpers.engine_checks import NO_END

pytestmark = pytest.mark.vulkan

GREEDY = SamplingParams(temperature=0.0, max_tokens=6, logit_bias=NO_END)
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def hardware() -> Hardware:
    os.environ["GGML_VK_VISIBLE_DEVICES"] = "0"
    os.environ["GGML_VK_DISABLE_GRAPH_OPTIMIZE"] = "1"
    # What llamacpp's _init_backend will do once it calls backends.load(): without it a
    # GGML_BACKEND_DL build has no back-end at all ("no backends are loaded").
    return backends.hardware()


def test_the_dl_build_loads_the_best_cpu_variant_and_vulkan(hardware: Hardware) -> None:
    assert hardware.dynamic and hardware.errors == ()
    assert "CPU" in hardware.backends and "Vulkan" in hardware.backends
    assert hardware.cpu_variant == best_variant()
    (gpu,) = hardware.gpus
    assert gpu.backend == "Vulkan" and gpu.name == "Vulkan0"
    assert "llvmpipe" in gpu.description  # lavapipe's device name
    assert 0 < gpu.memory_free <= gpu.memory_total
    assert backends.gpu_memory()[0].name == "Vulkan0"
    assert "CPU : " in hardware.system_info
    lib = Path(hardware.library_dir)
    modules = {p.name for p in lib.glob("libggml-*.so")}
    for variant in ("x64", "sse42", "sandybridge", "haswell", "skylakex", "sapphirerapids"):
        assert f"libggml-cpu-{variant}.so" in modules  # build_llama.py's install patch
    assert "libggml-vulkan.so" in modules


def _answer(gemma_path: Path, n_gpu_layers: int) -> str:
    worker = EngineWorker()
    try:
        params = LoadParams(n_ctx=512, n_gpu_layers=n_gpu_layers, n_parallel=1, flash_attn=False)
        worker.load(str(gemma_path), params).result(600)
        text: str = worker.run(CompletionRequest(PROMPT, GREEDY), 600)
        return text
    finally:
        worker.shutdown()


@pytest.fixture(scope="module")
def cpu_answer(hardware: Hardware, gemma_path: Path) -> str:
    """The same build with no layer offloaded: the CPU back-end's answer."""
    return _answer(gemma_path, 0)


def test_every_layer_runs_on_lavapipe_and_answers_as_the_cpu_does(
    hardware: Hardware, gemma_path: Path, cpu_answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="llama.cpp"):
        answer = _answer(gemma_path, -1)
    logs = [r.getMessage() for r in caplog.records if r.name == "llama.cpp"]
    assert any("offloaded 19/19 layers to GPU" in line for line in logs), logs[-20:]
    assigned = [line for line in logs if "assigned to device" in line]
    assert len(assigned) == 19 and all("Vulkan0" in line for line in assigned), assigned
    assert answer and answer == cpu_answer


def test_ember_info_hardware_lists_lavapipe_and_keeps_stderr_clean(hardware: Hardware) -> None:
    """ggml's "load_backend: loaded ..." lines go to logging (shown with -v), not to stderr."""
    r = ember("info", "--hardware")
    assert r.returncode == 0 and r.stderr == ""
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in r.stdout.splitlines())
    assert rows["CPU variant"] == best_variant()
    assert rows["Back-ends"] == "Vulkan, CPU"
    assert "llvmpipe" in rows["Device Vulkan0"] and "(gpu, Vulkan); " in rows["Device Vulkan0"]
    verbose = ember("-v", "info", "--hardware")
    assert "llama.cpp: load_backend: loaded Vulkan backend from " in verbose.stderr


def _load_logged(
    gemma_path: Path, params: LoadParams, caplog: pytest.LogCaptureFixture
) -> tuple[LoadedModel, list[str]]:
    """Load with ``params`` and return what was loaded and llama.cpp's device assignments."""
    worker = EngineWorker()
    try:
        with caplog.at_level(logging.DEBUG, logger="llama.cpp"):
            loaded = worker.load(str(gemma_path), params).result(600)
    finally:
        worker.shutdown()
    logs = [r.getMessage() for r in caplog.records if r.name == "llama.cpp"]
    caplog.clear()
    assert isinstance(loaded, LoadedModel)
    return loaded, [line for line in logs if "assigned to device" in line or "offloaded" in line]


def test_automatic_offload_puts_every_layer_on_lavapipe(
    hardware: Hardware, gemma_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No flag, no setting: the default (automatic) layers go to the Vulkan device."""
    params = LoadParams(n_ctx=512, n_parallel=1, flash_attn=False)
    assert params.n_gpu_layers == AUTO_GPU_LAYERS
    loaded, lines = _load_logged(gemma_path, params, caplog)
    assert (loaded.n_gpu_layers, loaded.gpu_devices, loaded.placement) == (19, ("Vulkan0",), "gpu")
    assert loaded.notice is None
    assert any("offloaded 19/19 layers to GPU" in line for line in lines), lines
    assigned = [line for line in lines if "assigned to device" in line]
    assert len(assigned) == 19 and all("Vulkan0" in line for line in assigned), assigned


def test_the_back_end_choice_reaches_llama_cpp(
    hardware: Hardware, gemma_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One device named: llama.cpp gets that device alone (llama_model_params.devices);
    CPU only: an empty device list, every layer on the CPU even with -1 asked."""
    one = LoadParams(n_ctx=512, n_parallel=1, flash_attn=False, device="Vulkan0")
    loaded, lines = _load_logged(gemma_path, one, caplog)
    assert loaded.n_gpu_layers == 19 and loaded.gpu_devices == ("Vulkan0",)
    assert any("offloaded 19/19 layers to GPU" in line for line in lines), lines
    cpu = LoadParams(n_ctx=512, n_parallel=1, flash_attn=False, n_gpu_layers=-1, device="cpu")
    loaded, lines = _load_logged(gemma_path, cpu, caplog)
    assert (loaded.n_gpu_layers, loaded.placement) == (0, "cpu")
    assert not any("Vulkan0" in line for line in lines), lines
    assert any("offloaded 0/19 layers to GPU" in line for line in lines), lines


def test_a_vulkan_device_that_cannot_allocate_falls_back_to_the_cpu(
    hardware: Hardware, gemma_path: Path
) -> None:
    """For real: ggml-vulkan told that no buffer may exceed 1 MiB fails to allocate the
    model's buffers mid-load; ``ember run`` loads it again on the CPU, says so in one line on
    stderr, and answers as the CPU does."""
    env = {**os.environ, "GGML_VK_FORCE_MAX_BUFFER_SIZE": str(1024 * 1024)}
    argv = ["run", str(gemma_path), "-c", "512", "--parallel", "1", "--no-flash-attn"]
    r = subprocess.run(
        [*EMBER, *argv, "--temp", "0", "-n", "4", "--raw", PROMPT],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    sentence = (
        f"ember: Loading {gemma_path.name} on the GPU (Vulkan0) failed, so it runs on the CPU "
        "instead."
    )
    assert sentence in r.stderr.splitlines(), r.stderr
    assert r.stderr.count("so it runs on the CPU instead") == 1  # once, not again as a log line
    assert r.stdout.strip()
