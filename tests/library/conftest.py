"""Fixtures for the library tests: a fake Hub on 127.0.0.1 that huggingface_hub and Ember use.

Ember reads ``HF_ENDPOINT`` when each call is made, so setting it with monkeypatch is enough
(huggingface_hub's own ``constants.ENDPOINT`` was fixed at import and is never relied on).
Tokens are isolated: no ``HF_TOKEN`` and no token file unless a test sets one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import paths
from app.library.downloads import DownloadManager
from tests.helpers.downloads import FAST_BACKOFF, Recorder


@pytest.fixture
def models_dir(ember_home: Path) -> Path:
    return paths().models_dir


@pytest.fixture
def manager(ember_home: Path) -> Iterator[DownloadManager]:
    p = paths()
    m = DownloadManager(p.models_dir, p.downloads_dir, backoff=FAST_BACKOFF)
    yield m
    m.shutdown()


@pytest.fixture
def recorder(manager: DownloadManager) -> Recorder:
    return Recorder(manager)
