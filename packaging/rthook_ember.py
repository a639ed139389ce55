"""PyInstaller runtime hook: runs inside the frozen app before ``ember_entry.py``."""

import os
import sys

_bundle = getattr(sys, "_MEIPASS", None)
if _bundle is not None:
    # llama_cpp finds its libraries next to its own module (bundled at llama_cpp/lib); these
    # are the variables it honours, set so a moved or renamed layout still loads them.
    _lib = os.path.join(_bundle, "llama_cpp", "lib")
    if os.path.isdir(_lib):
        os.environ.setdefault("LLAMA_CPP_LIB_PATH", _lib)
        os.environ.setdefault("MTMD_CPP_LIB", _lib)

# A windowed executable (Windows' Ember.exe) has no stdout/stderr: writes to None would raise
# inside libraries that print progress (tqdm) or log to stderr.
if sys.stdout is None:
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
if sys.stderr is None:
    sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
