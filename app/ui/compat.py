"""Work around PySide6 6.12.0 on Python < 3.12: it drops a reference to ``None`` (and other
objects that are immortal from Python 3.12 on) in almost every call that returns nothing, so
``None``'s reference count falls by one per call until CPython aborts with "Fatal Python error:
none_dealloc". Measured here: ``QLabel.setText`` 50 times -> ``sys.getrefcount(None)`` 50 lower;
PySide6 6.11.3 on the same Python does not do it.

The right fix is a PySide6 that works (pin ``PySide6-Essentials<6.12`` while Python 3.11 is
supported). Until then ``protect_immortals()`` gives these objects what Python 3.12 gives them:
a reference count so large that no realistic number of lost references reaches zero.
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_RESERVE = 1 << 40  # a trillion lost references before anything can go wrong
_protected = False


def needs_protection() -> bool:
    if sys.version_info >= (3, 12):
        return False  # None, True, False, small ints... are immortal there
    import PySide6

    return PySide6.__version__.startswith("6.12.")


def protect_immortals() -> bool:
    """Raise the reference counts of the objects PySide6 6.12 over-releases. Idempotent;
    returns whether it did anything."""
    global _protected  # noqa: PLW0603 - once per process
    if _protected or not needs_protection():
        return False
    objects: list[object] = [None, True, False, Ellipsis, NotImplemented, (), "", b""]
    objects += list(range(-5, 257))
    for obj in objects:
        refcount = ctypes.c_ssize_t.from_address(id(obj))
        refcount.value += _RESERVE
    _protected = True
    log.info("Applied the PySide6 6.12 / Python 3.11 reference-count workaround")
    return True
