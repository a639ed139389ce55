"""The issue's "on a CPU without AVX2 it still runs", on emulated processors: the bundle built
from the run-time back-ends build (``EMBER_LLAMA_BUILD=runtime``) runs under QEMU's user-mode
emulation (``qemu-x86_64 -cpu MODEL``) as an Intel Nehalem (SSE4.2, no AVX), Sandy Bridge (AVX,
no AVX2, FMA or F16C), Ivy Bridge (AVX and F16C, no AVX2 or FMA) and an AMD Piledriver (QEMU's
Opteron_G5: AVX, F16C and FMA, no AVX2). QEMU's TCG raises #UD for an instruction whose CPUID
feature the model lacks; each model is checked first (a few bytes of machine code run in the
test's own Python under it: what the model lacks must stop with SIGILL, what it has must run).
So a stray AVX2 instruction (or FMA, F16C, AVX where the model lacks them) wherever these runs
go (the bootloader, Python, numpy, Qt, libggml-base, libllama, libmtmd, the CPU variant) fails
them, which a copy of the bundle without the AVX2 variants, run natively, cannot see.

For each model, ggml must pick that model's variant (``libggml-cpu-sse42.so``, ``-sandybridge``,
``-ivybridge``, ``-piledriver``), and the greedy answer must equal a native run of a copy of the
bundle that holds only that variant. On the Nehalem, the app also starts and quits cleanly
(offscreen), and ``ember serve`` answers a chat completion through the openai SDK.

PyInstaller's Linux bootloader puts ``_internal`` on ``LD_LIBRARY_PATH`` and re-executes
itself; qemu-user cannot follow an ``execve`` (the new program runs natively), so the emulated
process is started as that second stage, with the variables the bootloader gives it. The
first stage is run under emulation on its own (``--version``). Programs the process starts
run natively too; on these paths they are only system tools (``ldconfig -p`` and ``gcc``, run
by ``ctypes.util.find_library``), none of the bundle's code.

What this cannot prove: a run on real pre-AVX2 silicon. QEMU 7.2 (Debian 12) ran all four
here; QEMU before 7.2 emulates no AVX at all, so the models with AVX skip there (the Nehalem
case still holds: any AVX instruction stops it). The bundle needs SSE4.2 and POPCNT
(x86-64-v2) whatever llama.cpp has: Qt refuses older CPUs ("This Qt build requires the
following features: sse4.2 popcnt", QEMU's Penryn), so the ``x64`` variant is never used.

Marked ``emulated_cpu`` (deselected by default). Run with ``EMBER_BUNDLE=... pytest -m
emulated_cpu tests/packaging`` and ``qemu-x86_64`` on PATH (Debian/Ubuntu: qemu-user).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from tests.helpers.bundle import Bundle, mapped_files, open_bundle
from tests.helpers.cli import reaped, stop
from tests.helpers.net import free_port, wait_for_health

pytestmark = pytest.mark.emulated_cpu

PROMPT = "The sky is"
TOKENS = 8

# One instruction for each feature (then ``ret``); vzeroupper after a 256-bit one
PROBES = {
    "SSE4.2": "f20f38f1c0",  # crc32 eax, eax
    "AVX": "c5fc57c0c5f877",  # vxorps ymm0, ymm0, ymm0
    "F16C": "c4e27913c0",  # vcvtph2ps xmm0, xmm0
    "FMA": "c4e279b8c0",  # vfmadd231ps xmm0, xmm0, xmm0
    "AVX2": "c5f5fec9c5f877",  # vpaddd ymm1, ymm1, ymm1
}
PROBE = """
import ctypes, mmap, sys
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes.fromhex(sys.argv[1]) + b"\\xc3")
ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
print("ran")
"""


@dataclass(frozen=True)
class Cpu:
    model: str  # QEMU's -cpu
    variant: str  # the libggml-cpu-<variant>.so ggml must pick
    has: frozenset[str]  # which of PROBES it runs

    def __str__(self) -> str:
        return self.model


NEHALEM = Cpu("Nehalem", "sse42", frozenset({"SSE4.2"}))
CPUS = [
    NEHALEM,
    Cpu("SandyBridge", "sandybridge", frozenset({"SSE4.2", "AVX"})),
    Cpu("IvyBridge", "ivybridge", frozenset({"SSE4.2", "AVX", "F16C"})),
    Cpu("Opteron_G5", "piledriver", frozenset({"SSE4.2", "AVX", "F16C", "FMA"})),  # Piledriver
]


@pytest.fixture(scope="module")
def qemu() -> str:
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        pytest.skip("emulates x86-64 CPUs for the Linux bundle: x86-64 Linux only")
    path = shutil.which("qemu-x86_64")
    if path is None:
        pytest.fail("qemu-x86_64 is not on PATH (Debian/Ubuntu: apt-get install qemu-user)")
    return path


def _no_core_dumps() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _runs(qemu: str, model: str, code: str) -> bool:
    """Whether ``code`` runs on the emulated ``model`` (False: it stopped with SIGILL)."""
    result = subprocess.run(
        [qemu, "-cpu", model, sys.executable, "-I", "-c", PROBE, code],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
        preexec_fn=_no_core_dumps,
        timeout=120,
        check=False,
    )
    if result.returncode == -signal.SIGILL:
        return False
    assert result.returncode == 0 and result.stdout == "ran\n", result
    return True


@pytest.fixture(scope="module", params=CPUS, ids=str)
def cpu(request: pytest.FixtureRequest, qemu: str) -> Cpu:
    """The CPU model, once its emulation is checked: what it lacks stops with SIGILL."""
    cpu: Cpu = request.param
    for feature, code in PROBES.items():
        runs = _runs(qemu, cpu.model, code)
        if feature in cpu.has and not runs and feature != "SSE4.2":
            pytest.skip(f"this QEMU does not emulate {feature} (its TCG has AVX from 7.2)")
        assert runs == (feature in cpu.has), f"{feature} on {cpu.model}: ran={runs}"
    return cpu


def _env(bundle: Bundle, home: Path, **extra: str) -> dict[str, str]:
    """A user's environment (Bundle.env) without ggml's variables: lavapipe stays hidden, as
    llama.cpp hides CPU-type Vulkan devices from users, so the CPU does the work."""
    env = bundle.env(home, **extra)
    return {k: v for k, v in env.items() if not k.startswith("GGML_")}


def _run(
    command: list[str], env: dict[str, str], home: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    home.mkdir(exist_ok=True)
    return subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=home, timeout=timeout, check=False
    )


def second_stage(bundle: Bundle, home: Path, **extra: str) -> dict[str, str]:
    """The environment the bootloader's first stage gives its second (see the docstring)."""
    restarted = {
        "_PYI_ARCHIVE_FILE": str(bundle.cli),
        "_PYI_PARENT_PROCESS_LEVEL": "-1",
        "_PYI_LINUX_PROCESS_NAME": bundle.cli.name,
        "LD_LIBRARY_PATH": str(bundle.root / "_internal"),
    }
    return _env(bundle, home, **restarted, **extra)


def emulated(
    qemu: str, cpu: Cpu, bundle: Bundle, home: Path, *args: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``ember ARGS`` on the emulated CPU, started as the bootloader's second stage."""
    env = second_stage(bundle, home, **extra)
    return _run([qemu, "-cpu", cpu.model, str(bundle.cli), *args], env, home)


def answer(result: subprocess.CompletedProcess[str]) -> str:
    """The text of ``ember run --json``'s answer, once it is checked to be TOKENS long."""
    assert result.returncode == 0, result.stderr[-2000:]
    *text, last = result.stdout.splitlines()
    assert json.loads(last)["usage"]["completion_tokens"] == TOKENS, result.stdout
    return "\n".join(text)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def only_variant(bundle: Bundle, variant: str, scratch: Path) -> Bundle:
    """A copy of the bundle (hard links where it can) whose only CPU module is ``variant``."""
    copy = scratch / "Ember"
    shutil.copytree(bundle.root, copy, symlinks=True, copy_function=_link_or_copy)
    for module in (copy / "_internal" / "llama_cpp" / "lib").glob("libggml-cpu-*.so"):
        if module.name != f"libggml-cpu-{variant}.so":
            module.unlink()
    return open_bundle(copy, scratch)


def test_the_bootloaders_first_stage_runs_on_the_oldest_cpu(
    qemu: str, bundle: Bundle, tmp_path: Path
) -> None:
    """Started as a user starts it: the first stage runs emulated, then re-executes itself
    (natively, see the module's docstring) and the version is printed."""
    command = [qemu, "-cpu", NEHALEM.model, str(bundle.cli), "--version"]
    result = _run(command, _env(bundle, tmp_path), tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Ember "), result.stdout


def test_the_bundle_uses_the_cpus_variant(
    qemu: str, cpu: Cpu, bundle: Bundle, tmp_path: Path
) -> None:
    result = emulated(qemu, cpu, bundle, tmp_path / "home", "info", "--hardware", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # the host's variant here would mean the bootloader re-executed itself natively
    assert report["cpu_variant"] == cpu.variant, report
    assert report["errors"] == [], report
    assert "AVX2" not in report["cpu_features"], report
    for feature in ("AVX", "F16C", "FMA"):
        assert (feature in report["cpu_features"]) == (feature in cpu.has), report


def test_the_bundle_answers_as_it_does_natively_with_that_variant(
    qemu: str, cpu: Cpu, bundle: Bundle, gemma_path: Path, tmp_path: Path
) -> None:
    args = ("run", str(gemma_path), PROMPT, "-n", str(TOKENS), "--raw", "--json", "--temp", "0")
    on_cpu = answer(emulated(qemu, cpu, bundle, tmp_path / "home", *args))
    native = only_variant(bundle, cpu.variant, tmp_path / "native")
    home = tmp_path / "native-home"
    assert answer(_run([str(native.cli), *args], _env(native, home), home)) == on_cpu
    assert on_cpu.strip()


@pytest.mark.parametrize("cpu", [NEHALEM], ids=str, indirect=True)
def test_the_app_starts_and_quits_cleanly_on_the_oldest_cpu(
    qemu: str, cpu: Cpu, bundle: Bundle, tmp_path: Path
) -> None:
    """Qt (widgets, offscreen painting) on a CPU without AVX: the window is shown, then closed
    through the normal shutdown path (``EMBER_QUIT_AFTER_START``, app/ui/app.py)."""
    home = tmp_path / "home"
    result = emulated(qemu, cpu, bundle, home, EMBER_QUIT_AFTER_START="1")
    log = home / "logs" / "ember.log"
    text = log.read_text("utf-8", errors="replace") if log.exists() else ""
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{text}"
    assert "Traceback" not in result.stderr + text, f"{result.stderr}\n{text}"
    assert "Ember stopped" in text, text


@pytest.mark.parametrize("cpu", [NEHALEM], ids=str, indirect=True)
def test_the_api_answers_on_the_oldest_cpu(
    qemu: str, cpu: Cpu, bundle: Bundle, gemma_path: Path, tmp_path: Path
) -> None:
    """``ember serve`` (uvicorn, the API, the engine's threads) on a CPU without AVX: one chat
    completion through the openai SDK, then Ctrl+C stops it cleanly."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    home = tmp_path / "home"
    home.mkdir()
    args = ("serve", "--model", str(gemma_path), "--port", str(port), "-c", "1024")
    process = subprocess.Popen(
        [qemu, "-cpu", cpu.model, str(bundle.cli), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=second_stage(bundle, home),
        cwd=home,
    )
    with reaped(process):
        wait_for_health(root, process, timeout=300)
        client = openai.OpenAI(base_url=f"{root}/v1", api_key="unused", timeout=300)
        model = client.models.list().data[0].id
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=4,
            temperature=0,
            logit_bias={"1": -100, "106": -100},  # no end of turn: text every time
        )
        assert reply.usage is not None and reply.usage.completion_tokens == 4, reply
        assert reply.choices[0].message.content, reply
        # the emulated process's files are mapped into qemu's: the variant for this CPU
        cpu_code = {p.name for p in mapped_files(process.pid) if p.name.startswith("libggml-cpu")}
        assert cpu_code == {f"libggml-cpu-{cpu.variant}.so"}, cpu_code
        # qemu passes SIGINT on to the emulated process
        out, err = stop(process, timeout=120, sig=signal.SIGINT)
    assert process.returncode == 0, err
    assert out.splitlines()[0] == f"Ember API at {root}/v1"
    assert "Traceback" not in err, err
