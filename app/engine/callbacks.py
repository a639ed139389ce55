"""The callbacks llama.cpp calls back into Ember with, from its compute threads: the abort flag
polled between graph nodes, and the eval callback that ends an embedding's graph early."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from typing import Any


def _llama_cpp() -> Any:
    from app.engine.llamacpp import _llama_cpp as load

    return load()


class AbortFlag:
    """llama.cpp polls its abort callback between graph nodes, hundreds of times per decode,
    from its own compute threads. A Python callback would take the GIL each time and stall
    decoding whenever another thread runs Python. So the callback is C's ``strlen`` over a
    two-byte buffer: it returns 0 while the flag byte is NUL and 1 once it is set — no Python
    and no GIL in the hot path. Falls back to a Python callback where no C library is found.
    """

    def __init__(self) -> None:
        llama_cpp = _llama_cpp()
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
