"""A ``model`` no file could be named (over 255 bytes, '~someone' unknown) is looked up in the
library like any other name and answers 404 in OpenAI's shape (it raised ENAMETOOLONG: a 500);
the connection goes on serving."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.engine.types import LoadParams
from app.engine.worker import EngineWorker
from app.library.local import Library
from app.server.catalog import ChainCatalog, LibraryCatalog, StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.scripted_model import scripted_factory
from tests.helpers.served import serving

MODEL = "scripted"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("names")
    library = Library(
        models_dir=root / "models",
        hf_cache_dir=root / "hf",
        lmstudio_dirs=(),
        cache_path=root / "library.json",
    )
    catalog = ChainCatalog(
        StaticCatalog([entry_for_file(root / "scripted.gguf", MODEL)]), LibraryCatalog(library)
    )
    worker = EngineWorker(model_factory=scripted_factory())
    gateway = Gateway(worker, catalog)
    gateway.load("scripted", MODEL, LoadParams(n_ctx=4096)).wait(30)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield f"http://127.0.0.1:{runner.port}"


@pytest.mark.parametrize(
    "name", ["m" * 300, "/" + "m" * 300 + ".gguf", "d/" * 2000, "~nobody-ember-test/m.gguf"]
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"])
def test_a_name_no_file_can_have_is_a_404(base: str, name: str, path: str) -> None:
    body = {"model": name, "messages": [{"role": "user", "content": "hi"}], "prompt": "hi"}
    with httpx.Client(base_url=base, timeout=60) as http:
        r = http.post(path, json={**body, "input": "hi"})
        assert r.status_code == 404, r.text[:300]
        error = r.json()["error"]
        assert error["code"] == "model_not_found" and error["param"] == "model"
        assert http.get("/health").status_code == 200  # the same connection
