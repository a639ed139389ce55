"""A real server for the server tests: uvicorn on 127.0.0.1 (a free port), run by ServerRunner,
with the real Gemma 3 270M model loaded once per module."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.server.catalog import ChainCatalog, LibraryCatalog, StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.scripted_model import scripted_factory
from tests.helpers.served import MODEL_ID, N_CTX, Served, serving


def make_library(root: Path, gemma_path: Path) -> LibraryCatalog:
    """A library holding a second file of the test model, for just-in-time loads. (A request
    naming a file that is loaded already, under any id, reuses it: so not a symlink.)"""
    from app.library.local import Library

    folder = root / "models" / "test" / "gemma-copy"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "gemma-copy.gguf"
    if not copy.exists():
        try:
            os.link(gemma_path, copy)
        except OSError:  # another file system
            shutil.copyfile(gemma_path, copy)
    linked = root / "models" / "test" / "gemma-link" / "gemma-link.gguf"
    if not linked.exists():
        linked.parent.mkdir(parents=True)
        linked.symlink_to(gemma_path)
    library = Library(
        models_dir=root / "models",
        hf_cache_dir=root / "hf",
        lmstudio_dirs=(),
        cache_path=root / "library.json",
    )
    return LibraryCatalog(library, rescan_after=0.5)


@pytest.fixture(scope="module")
def served(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("served")
    worker = EngineWorker()
    catalog = ChainCatalog(
        StaticCatalog([entry_for_file(gemma_path, MODEL_ID)]), make_library(root, gemma_path)
    )
    gateway = Gateway(worker, catalog, LoadParams(n_ctx=N_CTX))
    gateway.load(str(gemma_path), MODEL_ID).wait(120)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield Served(runner, gateway, worker, root)


@pytest.fixture(scope="module")
def base_url(served: Served) -> str:
    """The module's OpenAI-compatible API (``…/v1``): ``served``'s, unless the module serves
    its own."""
    return served.base_url


@pytest.fixture
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture
def http(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.root, timeout=120) as c:
        yield c


@pytest.fixture(scope="module")
def fuzz_base(gemma_path: Path) -> Iterator[str]:
    """The server's root URL, in front of a scripted model named ``fuzz`` (the real model's
    file, never read, stands for it in the catalog)."""
    worker = EngineWorker(model_factory=scripted_factory())
    gateway = Gateway(worker, StaticCatalog([entry_for_file(gemma_path, "fuzz")]))
    gateway.load("scripted", "fuzz", LoadParams(n_ctx=4096)).wait(30)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield f"http://127.0.0.1:{runner.port}"
