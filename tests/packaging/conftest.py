"""Smoke tests of the BUILT bundle (``make bundle-test``), plus the single-instance unit test.

The bundle tests need ``EMBER_BUNDLE``: a built bundle folder (``dist/Ember``, or
``dist/Ember.app`` on macOS) or its archive (``dist/Ember-*.tar.gz`` / ``.zip``, extracted to a
temporary folder first, which also proves it runs away from the source tree). Without it they
skip: ``make test`` never builds the bundle; ``make bundle-test`` builds it and runs them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.bundle import Bundle, open_bundle


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bundle]:
    location = os.environ.get("EMBER_BUNDLE")
    if not location:
        pytest.skip("EMBER_BUNDLE is not set: `make bundle-test` builds the bundle and runs these")
    yield open_bundle(Path(location), tmp_path_factory.mktemp("bundle"))
