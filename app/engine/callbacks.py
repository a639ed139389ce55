"""The callbacks llama.cpp calls back into Ember with, from its compute threads: the abort flag
polled between graph nodes, the eval callback that ends an embedding's graph early, and the log
callback that routes llama.cpp's messages to Python logging (set by :func:`load_llama_cpp`,
the one place that imports llama_cpp for the engine)."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
import threading
from typing import Any

from app.engine import memory_breakdown

_native_log = logging.getLogger("llama.cpp")
# What llama.cpp logs as errors when our abort flag stops a decode (GGML_STATUS_ABORTED, and
# llama_decode's own "2: aborted"): a cancel, not a fault
_ABORTED_STATUS = ("compute status: 1", "failed with error 1", "failed to decode, ret = 2")
_log_callbacks: list[Any] = []  # keeps the ctypes callback alive: C holds only a pointer


def load_llama_cpp() -> Any:
    """Import llama_cpp lazily: importing it loads the native library (slow, and ``ember
    --version`` or the API's schema generation should not need it)."""
    import llama_cpp

    if not _log_callbacks:
        _route_native_logs(llama_cpp)
    return llama_cpp


def _route_native_logs(llama_cpp: Any) -> None:
    """llama.cpp writes to stderr by default, which would litter ``ember run``'s output.
    Send its messages to Python logging instead: errors as warnings, the rest as debug.
    (ggml's levels: 1 debug, 2 info, 3 warn, 4 error, 5 continues the previous message.)"""
    last = [logging.DEBUG]

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, _user_data: Any) -> None:
        py_level = last[0] if level == 5 else logging.WARNING if level == 4 else logging.DEBUG
        last[0] = py_level
        message = text.decode("utf-8", errors="replace").rstrip()
        if py_level == logging.WARNING and message.endswith(_ABORTED_STATUS):
            py_level = logging.DEBUG  # a decode stopped by our abort flag: a cancel, not a fault
        if message:
            _native_log.log(py_level, "%s", message)
            memory_breakdown.hear(message)

    _log_callbacks.append(forward)
    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))


class AbortFlag:
    """llama.cpp polls its abort callback between graph nodes, hundreds of times per decode,
    from its own compute threads. A Python callback would take the GIL each time and stall
    decoding whenever another thread runs Python. So the callback is C's ``strlen`` over a
    two-byte buffer: it returns 0 while the flag byte is NUL and 1 once it is set — no Python
    and no GIL in the hot path. Falls back to a Python callback where no C library is found.
    """

    def __init__(self) -> None:
        llama_cpp = load_llama_cpp()
        self._buf = ctypes.create_string_buffer(2)
        self._py_flag = threading.Event()
        strlen = _find_strlen()
        if strlen is not None:
            self.callback = llama_cpp.ggml_abort_callback(strlen)
        else:  # pragma: no cover - every supported platform has a C library
            self.callback = llama_cpp.ggml_abort_callback(lambda _data: self._py_flag.is_set())
        self.data = ctypes.cast(self._buf, ctypes.c_void_p)

    def set(self) -> None:
        self._buf[0] = b"\x01"
        self._py_flag.set()

    def clear(self) -> None:
        self._buf[0] = b"\x00"
        self._py_flag.clear()

    def is_set(self) -> bool:
        return self._buf[0] != b"\x00"


def _find_strlen() -> int | None:
    try:
        if sys.platform == "win32":
            libc = ctypes.CDLL("msvcrt")
        else:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        return ctypes.cast(libc.strlen, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


class StopAtHiddenStates:
    """An eval callback for the embedding context that ends each graph at the hidden states
    embeddings are made of: the model's ``result_norm``, which llama.cpp's pooling step
    renames ``result_embd_pooled`` (with no pooling it is the same tensor).

    llama.cpp builds the vocabulary projection (``result_output``) into every graph, and an
    embedding context makes every token an output, so without this it multiplies each token's
    hidden state by the whole output matrix — for Gemma's 262k vocabulary a third of the
    model's weights, and 2-3x the time of reading the input. ggml's scheduler asks the callback
    about each node (``ask``), computes up to the one it wants, shows it, and stops the graph
    when the callback then answers false; the logits buffer is left unwritten, which nothing
    reads. A graph without that node is computed whole, as before (``stops`` counts the
    graphs cut short)."""

    TARGET = b"result_embd_pooled"

    def __init__(self, native: Any, get_name: Any) -> None:
        self.stops = 0
        self._get_name = get_name

        def callback(tensor: int, ask: bool, _data: int) -> bool:
            if ask:
                return bool(get_name(tensor) == self.TARGET)
            self.stops += 1
            return False  # the hidden states are computed: stop before the projection

        self.callback = native.ggml_backend_sched_eval_callback(callback)

    @classmethod
    def make(cls, native: Any) -> StopAtHiddenStates | None:
        try:
            from llama_cpp import _ggml

            get_name = _ggml.libggml.ggml_get_name
        except (ImportError, AttributeError, OSError):  # pragma: no cover - older bindings
            return None
        get_name.argtypes = [ctypes.c_void_p]
        get_name.restype = ctypes.c_char_p
        return cls(native, get_name)
