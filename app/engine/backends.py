"""llama.cpp's compute back-ends: load them, list their devices, say which CPU code runs.

A llama.cpp built with ``GGML_BACKEND_DL`` (scripts/build_llama.py) ships each back-end as a
module next to libggml: one per CPU variant (``libggml-cpu-haswell.so`` ...), Vulkan, CUDA.
Nothing is registered until someone loads them, and llama-cpp-python never does, so
:func:`load` calls ``ggml_backend_load_all_from_path`` on the installed package's lib
directory (``ggml_backend_load_all`` would search the Python executable's directory). ggml
scores each CPU variant on the running CPU and keeps the best; a GPU module whose driver is
missing fails to open and is skipped. A static build (bootstrap.py's CPU build) has its CPU
back-end linked in: there is nothing to load and the CPU device is listed all the same.

Everything goes through ctypes on libggml and libllama, without importing ``llama_cpp``
(``ember info --hardware`` and the Settings page stay light). Each symbol is looked up before
use: a build that lacks one gives a :class:`BackendError` naming it, never a crash; counts and
strings read from C are bounded.

Load before the first model: ``ggml_backend_load_all`` registers modules again on each call,
so :func:`load` runs it once per process. Environment variables the Vulkan back-end reads
(``GGML_VK_VISIBLE_DEVICES``, ``GGML_VK_DISABLE_GRAPH_OPTIMIZE``) must be set before it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import logging
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from app.engine.gguf_format import human_bytes
from app.engine.sizing import GpuMemory

MAX_DEVICES: Final = 64  # more than any machine has; a larger count is a broken library
MAX_FEATURES: Final = 128
MAX_C_STRING: Final = 4096  # device names, descriptions, one feature
MAX_SYSTEM_INFO: Final = 16384

DeviceKind = Literal["cpu", "gpu", "igpu", "accel", "other"]
_KINDS: Final[tuple[DeviceKind, ...]] = ("cpu", "gpu", "igpu", "accel")  # ggml_backend_dev_type


class BackendError(RuntimeError):
    """llama.cpp's back-ends cannot be loaded or queried; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Device:
    """One device a back-end drives, with its memory as the back-end reports it now."""

    name: str  # "CPU", "Vulkan0"
    description: str  # the CPU's or GPU's model name
    backend: str  # the back-end that drives it: "CPU", "Vulkan", "CUDA"
    kind: DeviceKind
    memory_free: int
    memory_total: int

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("gpu", "igpu")


@dataclass(frozen=True, slots=True)
class Hardware:
    """What ``ember info --hardware`` and the Hardware page show."""

    library_dir: str
    dynamic: bool  # back-ends are modules chosen at run time (GGML_BACKEND_DL)
    backends: tuple[str, ...]  # registered back-ends, in ggml's order
    devices: tuple[Device, ...]
    cpu_variant: str  # "haswell", "x64" ...; "built in" for a static build
    cpu_features: tuple[str, ...]  # what the CPU code in use was built for ("AVX2", ...)
    system_info: str  # llama_print_system_info()
    errors: tuple[str, ...] = field(default=())  # what could not be read, one sentence each
    # GPU modules of the build that did not load here, each with the system's reason
    not_loaded: tuple[str, ...] = field(default=())

    @property
    def gpus(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.is_gpu)


def _names(stem: str) -> tuple[str, ...]:
    if sys.platform == "win32":
        return (f"{stem}.dll",)
    if sys.platform == "darwin":
        return (f"lib{stem}.dylib",)
    return (f"lib{stem}.so",)


def _library_file(lib_dir: Path, stem: str) -> Path | None:
    """The file to open so the process has one copy of the library, not two.

    A wheel cannot hold symbolic links: ``libggml.so``, ``libggml.so.0`` and
    ``libggml.so.0.25.3`` are three copies. libllama loads libggml by its soname
    (``libggml.so.0``), so that is the copy to open: the dynamic loader then shares one libggml,
    and one back-end registry, whichever is loaded first. llama_cpp itself opens
    ``libllama.so``, so libllama is opened by that name.
    """
    if stem == "ggml" and sys.platform.startswith("linux"):
        sonames = [
            p for p in lib_dir.glob("libggml.so.*") if re.fullmatch(r"libggml\.so\.\d+", p.name)
        ]
        if sonames:
            return sorted(sonames)[-1]
    return next((lib_dir / n for n in _names(stem) if (lib_dir / n).exists()), None)


def library_dir() -> Path:
    """The installed llama_cpp package's lib directory (found without importing it)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(
            "llama-cpp-python is not installed: run `python3 scripts/bootstrap.py` (see README)."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


# A GPU back-end's module (``libggml-vulkan.so``, ``ggml-cuda.dll``), not the CPU's or the core
_GPU_MODULE = re.compile(r"^(?:lib)?ggml-(?!cpu|base)([a-z0-9]+)\.(?:so|dll|dylib)$")
# The name a module's back-end registers under, where it is not the module's (case aside)
_REGISTERED_AS = {"hip": "rocm"}
# What to install when a module's system library is missing
_DRIVER_HINTS = {
    "vulkan": " Install the GPU driver and the Vulkan loader (libvulkan1 and "
    "mesa-vulkan-drivers on Debian and Ubuntu, vulkan-loader on Fedora and Arch; on Windows "
    "the GPU maker's driver); until then models run on the CPU.",
    "cuda": " Install NVIDIA's driver; until then models run on the CPU.",
}


def not_loaded(lib_dir: Path, registered: tuple[str, ...]) -> tuple[str, ...]:
    """A sentence for each GPU module in ``lib_dir`` that registered no back-end, with the
    system's reason (ggml skips a module that fails to open without saying why): most often
    the driver's library it links against is missing, such as ``libvulkan.so.1``, which the
    bundle leaves to the system. Opening it again here only reads the loader's error."""
    names = {name.lower() for name in registered}
    out = []
    paths = sorted(lib_dir.iterdir()) if lib_dir.is_dir() else []
    for path in paths:
        match = _GPU_MODULE.match(path.name)
        if match is None or path.is_symlink():
            continue
        module = match.group(1)
        if _REGISTERED_AS.get(module, module) in names:
            continue
        try:
            ctypes.CDLL(str(path))
        except OSError as e:
            why = str(e).replace(f"{path}: ", "").strip() or type(e).__name__
            reason = f"{why}.{_DRIVER_HINTS.get(module, '')}"
        else:
            reason = "it opens, but registered no back-end."
        out.append(f"{path.name}: {reason}")
    return tuple(out)


def has_cpu_variants(lib_dir: Path) -> bool:
    """Whether ``lib_dir`` holds one CPU module per variant (``libggml-cpu-haswell.so`` ...)."""
    prefix = "ggml-cpu-" if sys.platform == "win32" else "libggml-cpu-"
    return any(p.name.startswith(prefix) for p in lib_dir.iterdir()) if lib_dir.is_dir() else False


class _Library:
    """One shared library whose functions are looked up, typed, on first use."""

    def __init__(self, lib_dir: Path, stem: str) -> None:
        path = _library_file(lib_dir, stem)
        if path is None:
            raise BackendError(
                f"{lib_dir} has no {_names(stem)[0]}: reinstall llama-cpp-python "
                "(`python3 scripts/bootstrap.py`)."
            )
        try:
            self._cdll = ctypes.CDLL(str(path))
        except OSError as e:
            raise BackendError(f"Cannot open {path}: {e}") from e
        self.path = path
        self._funcs: dict[str, Any] = {}

    def func(self, name: str, restype: Any, *argtypes: Any) -> Any:
        if name not in self._funcs:
            try:
                fn = getattr(self._cdll, name)
            except AttributeError:
                raise BackendError(
                    f"{self.path.name} has no {name}: this llama.cpp is older or newer than "
                    "Ember expects; reinstall the llama-cpp-python version in pyproject.toml."
                ) from None
            fn.restype = restype
            fn.argtypes = list(argtypes)
            self._funcs[name] = fn
        return self._funcs[name]


@functools.cache
def _strnlen() -> Any:
    libc = ctypes.CDLL(None) if sys.platform != "win32" else ctypes.cdll.msvcrt
    fn = libc.strnlen
    fn.restype = ctypes.c_size_t
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return fn


def _c_string(ptr: int | None, limit: int = MAX_C_STRING) -> str:
    """A NUL-terminated C string read at most ``limit`` bytes far."""
    if not ptr:
        return ""
    n = int(_strnlen()(ptr, limit))
    return ctypes.string_at(ptr, n).decode("utf-8", errors="replace")


class _Feature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("value", ctypes.c_void_p)]


_GetFeatures = ctypes.CFUNCTYPE(ctypes.POINTER(_Feature), ctypes.c_void_p)


class Ggml:
    """ctypes access to one libggml (and its libllama): the back-end registry and devices."""

    def __init__(self, lib_dir: Path) -> None:
        self.lib_dir = lib_dir
        self.ggml = _Library(lib_dir, "ggml")
        self._llama: _Library | None = None
        self.dynamic = False  # back-ends loaded as modules (set by load)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        f = self.ggml.func
        self.load_all_from_path = f("ggml_backend_load_all_from_path", None, ctypes.c_char_p)
        self.reg_count = f("ggml_backend_reg_count", sz)
        self.reg_get = f("ggml_backend_reg_get", vp, sz)
        self.reg_name = f("ggml_backend_reg_name", vp, vp)
        self.reg_proc = f("ggml_backend_reg_get_proc_address", vp, vp, ctypes.c_char_p)
        self.dev_count = f("ggml_backend_dev_count", sz)
        self.dev_get = f("ggml_backend_dev_get", vp, sz)
        self.dev_name = f("ggml_backend_dev_name", vp, vp)
        self.dev_description = f("ggml_backend_dev_description", vp, vp)
        self.dev_memory = f(
            "ggml_backend_dev_memory", None, vp, ctypes.POINTER(sz), ctypes.POINTER(sz)
        )
        self.dev_type = f("ggml_backend_dev_type", ctypes.c_int, vp)
        self.dev_reg = f("ggml_backend_dev_backend_reg", vp, vp)
        self.dev_by_name = f("ggml_backend_dev_by_name", vp, ctypes.c_char_p)

    def backends(self) -> tuple[str, ...]:
        count = _bounded(self.reg_count(), MAX_DEVICES, "back-ends")
        return tuple(_c_string(self.reg_name(self.reg_get(i))) for i in range(count))

    def devices(self) -> tuple[Device, ...]:
        count = _bounded(self.dev_count(), MAX_DEVICES, "devices")
        out = []
        for i in range(count):
            dev = self.dev_get(i)
            if not dev:
                continue
            free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
            self.dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
            kind_id = int(self.dev_type(dev))
            out.append(
                Device(
                    name=_c_string(self.dev_name(dev)),
                    description=_c_string(self.dev_description(dev)).strip(),
                    backend=_c_string(self.reg_name(self.dev_reg(dev))),
                    kind=_KINDS[kind_id] if 0 <= kind_id < len(_KINDS) else "other",
                    memory_free=int(free.value),
                    memory_total=int(total.value),
                )
            )
        return tuple(out)

    def cpu_reg(self) -> int | None:
        for i in range(_bounded(self.reg_count(), MAX_DEVICES, "back-ends")):
            reg = self.reg_get(i)
            if _c_string(self.reg_name(reg)) == "CPU":
                return int(reg)
        return None

    def cpu_features(self) -> tuple[str, ...]:
        """The CPU back-end's features (``ggml_backend_get_features``), "NAME" or "NAME=value"
        when the value is not "1"."""
        reg = self.cpu_reg()
        addr = self.reg_proc(reg, b"ggml_backend_get_features") if reg else None
        if not addr:
            return ()
        feats = _GetFeatures(addr)(reg)
        out = []
        for i in range(MAX_FEATURES):
            feat = feats[i]
            if not feat.name:
                break
            name, value = _c_string(feat.name), _c_string(feat.value)
            out.append(name if value == "1" else f"{name}={value}")
        return tuple(out)

    def cpu_variant(self) -> str:
        """The CPU module in use (``libggml-cpu-haswell.so`` -> "haswell"); "built in" for the
        one CPU back-end of a build without variants (static, or DL with one CPU module)."""
        reg = self.cpu_reg()
        addr = self.reg_proc(reg, b"ggml_backend_get_features") if reg else None
        path = _library_of(addr) if addr else None
        match = re.search(r"ggml-cpu-([\w.]+?)\.(?:so|dll|dylib)", path or "")
        if match:
            return match.group(1)
        return "built in" if path else "unknown"

    def system_info(self) -> str:
        if self._llama is None:
            self._llama = _Library(self.lib_dir, "llama")
        fn = self._llama.func("llama_print_system_info", ctypes.c_void_p)
        return _c_string(fn(), MAX_SYSTEM_INFO).strip()


def _bounded(count: int, limit: int, what: str) -> int:
    if count > limit:
        raise BackendError(f"llama.cpp reports {count} {what}: over {limit}, a broken build.")
    return int(count)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_void_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_void_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _library_of(addr: int) -> str | None:
    """The file of the shared library that holds ``addr`` (dladdr; on Windows the module that
    GetModuleHandleExW finds for the address)."""
    if sys.platform == "win32":
        from ctypes import wintypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        from_address, unchanged_refcount = 0x4, 0x2  # GET_MODULE_HANDLE_EX_FLAG_*
        handle = wintypes.HMODULE()
        get_handle = kernel32.GetModuleHandleExW
        get_handle.argtypes = [wintypes.DWORD, ctypes.c_void_p, ctypes.POINTER(wintypes.HMODULE)]
        get_handle.restype = wintypes.BOOL
        if not get_handle(from_address | unchanged_refcount, addr, ctypes.byref(handle)):
            return None
        buffer = ctypes.create_unicode_buffer(32768)
        file_name = kernel32.GetModuleFileNameW
        file_name.argtypes = [wintypes.HMODULE, wintypes.LPWSTR, wintypes.DWORD]
        file_name.restype = wintypes.DWORD
        length = file_name(handle, buffer, len(buffer))
        return buffer.value[:length] or None
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    if not dladdr(addr, ctypes.byref(info)):
        return None
    return _c_string(info.dli_fname)


_lock = threading.Lock()
_loaded: dict[Path, Ggml] = {}


def loaded() -> bool:
    """Whether this process loaded llama.cpp's back-ends already (:func:`load`)."""
    return bool(_loaded)


_native_log = logging.getLogger("llama.cpp")  # the engine's logger for llama.cpp's messages
_LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


@_LogCallback
def _forward_log(level: int, text: bytes | None, _user_data: int | None) -> None:
    message = (text or b"").decode("utf-8", errors="replace").rstrip()
    if message:  # ggml's levels: 4 error, 3 warning, below: info and debug
        _native_log.log(logging.WARNING if level >= 3 else logging.DEBUG, "%s", message)


def _route_logs(ggml: Ggml) -> None:
    """ggml writes "load_backend: loaded ..." to stderr while loading: send it to logging,
    as the engine does once llama_cpp is imported (then its own route stays in place)."""
    if "llama_cpp" in sys.modules:
        return
    with contextlib.suppress(BackendError):  # an older ggml: its messages stay on stderr
        ggml.ggml.func("ggml_log_set", None, _LogCallback, ctypes.c_void_p)(_forward_log, None)


def load(lib_dir: Path | None = None) -> Ggml:
    """Load every back-end the machine supports from ``lib_dir`` (default: the installed
    llama_cpp's), once per process; a static build has nothing to load. Raises BackendError."""
    lib_dir = (lib_dir or library_dir()).resolve()
    with _lock:
        if lib_dir in _loaded:
            return _loaded[lib_dir]
        ggml = Ggml(lib_dir)
        # A static build registers its linked-in CPU back-end on first use; a DL build has none
        ggml.dynamic = ggml.reg_count() == 0
        if ggml.dynamic:
            _route_logs(ggml)
            ggml.load_all_from_path(str(lib_dir).encode())
            if "CPU" not in ggml.backends():
                raise BackendError(
                    f"No CPU back-end in {lib_dir} loads on this processor; reinstall "
                    "llama-cpp-python with scripts/build_llama.py."
                )
        _loaded[lib_dir] = ggml
        return ggml


def hardware(lib_dir: Path | None = None) -> Hardware:
    """The back-ends, devices, CPU variant and system info (loading the back-ends first)."""
    ggml = load(lib_dir)
    errors: list[str] = []

    def attempt(what: str, fn: Any, default: Any) -> Any:
        try:
            return fn()
        except BackendError as e:
            errors.append(f"{what}: {e}")
            return default

    registered = ggml.backends()
    return Hardware(
        library_dir=str(ggml.lib_dir),
        dynamic=ggml.dynamic,
        backends=registered,
        devices=ggml.devices(),
        cpu_variant=attempt("CPU variant", ggml.cpu_variant, "unknown"),
        cpu_features=attempt("CPU features", ggml.cpu_features, ()),
        system_info=attempt("system info", ggml.system_info, ""),
        errors=tuple(errors),
        not_loaded=not_loaded(ggml.lib_dir, registered) if ggml.dynamic else (),
    )


def gpu_devices(lib_dir: Path | None = None) -> tuple[Device, ...]:
    """The GPUs llama.cpp can offload to (after loading the back-ends); () on any error."""
    try:
        return tuple(d for d in load(lib_dir).devices() if d.is_gpu)
    except BackendError:
        return ()


def gpu_memory(lib_dir: Path | None = None) -> tuple[GpuMemory, ...]:
    """The GPUs' free and total memory, as the offload rule (:mod:`app.engine.sizing`) takes it."""
    return tuple(GpuMemory(d.name, d.memory_free, d.memory_total) for d in gpu_devices(lib_dir))


def device_handle(name: str, lib_dir: Path | None = None) -> int | None:
    """The ``ggml_backend_dev_t`` of the device called ``name`` ("Vulkan0"), for
    ``llama_model_params.devices``; None when llama.cpp lists no such device."""
    try:
        handle = load(lib_dir).dev_by_name(name.encode("utf-8"))
    except BackendError:
        return None
    return int(handle) if handle else None


def describe(hw: Hardware) -> list[tuple[str, str]]:
    """``hw`` as labelled rows: what ``ember info --hardware`` prints and Settings shows."""
    cpu = next((d for d in hw.devices if d.kind == "cpu"), None)
    fixed = hw.cpu_variant == "built in"
    variant = hw.cpu_variant + (" (one CPU build, chosen when compiled)" if fixed else "")
    rows = [
        ("CPU", cpu.description if cpu else "unknown"),
        ("CPU variant", variant),
        ("CPU features", " ".join(hw.cpu_features) or "unknown"),
        ("Back-ends", ", ".join(hw.backends)),
    ]
    from app.engine.sizing import available_memory

    for dev in hw.devices:
        # the CPU's memory as the fit checks and the loader measure it (llama.cpp's own count
        # differs by gigabytes: "25.3 GB free" here and "22.5 GB is free" on a model's badge)
        free_bytes = available_memory() if dev.kind == "cpu" else dev.memory_free
        free, total = human_bytes(free_bytes), human_bytes(dev.memory_total)
        what = f"{dev.description} ({dev.kind}, {dev.backend}); {free} free of {total}"
        rows.append((f"Device {dev.name}", what))
    if not hw.gpus:
        rows.append(("GPU", "none found: models run on the CPU"))
    rows += [("Not loaded", sentence) for sentence in hw.not_loaded]
    rows += [("System info", hw.system_info or "unknown"), ("Library", hw.library_dir)]
    rows += [("Could not read", error) for error in hw.errors]
    return rows
