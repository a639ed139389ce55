"""The library as the app and every command see it: Ember's models plus the user's folders.

One definition for the GUI (``app/ui/services.py``), ``ember ls``/``rm``/``run``/``serve`` and
the API, so a folder added in Settings is listed everywhere. No Qt.
"""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from app.library.local import Library


def default_library(settings: Settings | None = None) -> Library:
    """A :class:`Library` of ``models/`` and the folders in ``library.extra_dirs``; nothing is
    scanned yet (``Library.scan`` reads the disk)."""
    extra = (settings or Settings()).get("library.extra_dirs")
    return Library(extra_dirs=[Path(p) for p in extra])
