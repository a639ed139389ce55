"""Where Ember's resources are: the app icon, the stylesheets and the Linux desktop entry.

They live in the repository's top-level ``resources/`` folder and are found wherever Ember runs:

- a source checkout (or an editable install): ``<repository>/resources``;
- the PyInstaller bundle: ``resources/`` in the bundle's data folder (``sys._MEIPASS``), put
  there by ``packaging/bundle_config.datas()``;
- an installed wheel: ``<prefix>/share/ember`` (pyproject's data-files), located through the
  distribution's own file list, so a venv, ``--user`` or system install all work.

Only the standard library here: the window imports it before it is shown.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Final

DISTRIBUTION: Final = "ember"
APP_ICON_SVG: Final = "icon.svg"
APP_ICON_PNG: Final = "icon.png"
THEMES: Final = "themes"
DESKTOP_ENTRY: Final = "linux/ember.desktop"
# A file every copy of the resources has: how a candidate folder is recognised.
_MARKER: Final = f"{THEMES}/app.qss"
_INSTALLED: Final = "share/ember"


@functools.cache
def root() -> Path:
    """The resources folder; FileNotFoundError (saying what to do) if no copy is found."""
    searched = []
    for candidate in _candidates():
        if (candidate / _MARKER).is_file():
            return candidate
        searched.append(str(candidate))
    raise FileNotFoundError(
        "Ember's resources (icons, stylesheets) are missing"
        + (f" (looked in {', '.join(searched)})" if searched else "")
        + "; reinstall Ember."
    )


def path(name: str) -> Path:
    """A resource by its path inside ``resources/`` (``"icon.svg"``, ``"themes/app.qss"``)."""
    found = root() / name
    if not found.is_file():
        raise FileNotFoundError(f"Ember's resource {name} is missing from {root()}; reinstall.")
    return found


def stylesheets() -> list[Path]:
    """Every ``themes/*.qss``: ``app.qss`` first, then each page's sheet by name."""
    return sorted((root() / THEMES).glob("*.qss"), key=lambda p: (p.name != "app.qss", p.name))


def _candidates() -> list[Path]:
    found: list[Path] = []
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        found.append(Path(frozen) / "resources")
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file():
        found.append(checkout / "resources")
    installed = _installed()
    if installed is not None:
        found.append(installed)
    return found


def _installed() -> Path | None:
    """``share/ember`` of the installed distribution, wherever its data files went."""
    import importlib.metadata

    try:
        files = importlib.metadata.files(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    suffix = f"{_INSTALLED}/{_MARKER}"
    for file in files:
        if file.as_posix().endswith(suffix):
            return Path(str(file.locate())).resolve().parent.parent
    return None
