"""Moved: the icon and the stylesheets are in the top-level ``resources/`` folder, found by
:mod:`app.resources`. ``importlib.resources.files("app.ui.resources")`` is redirected there
until its last callers (app/ui/theme.py, app/ui/app.py, app/ui/chat/empty_state.py) ask
:mod:`app.resources` instead; then this package goes."""

from __future__ import annotations

from importlib.abc import Loader
from importlib.resources.abc import TraversableResources
from pathlib import Path
from typing import Any

from app import resources as _resources


class _Redirect(TraversableResources):
    def files(self) -> Path:
        return _resources.root()


class _Loader(Loader):
    """This package's own loader, but its resources are read from ``resources/``."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def get_resource_reader(self, _name: str) -> _Redirect:
        return _Redirect()


__spec__.loader = _Loader(__spec__.loader)
__loader__ = __spec__.loader
