"""Hostile request fields (issue 26), on a real server without a model (none is needed: each is
refused before one would be loaded):

- an Ollama ``keep_alive`` of 30,000 digits and a letter held the event loop 25 s (a regex
  scan retried the digits at every start): it is a 400 now after a bounded number of steps;
- ``/api/show`` of a ``.gguf`` path outside every library folder answered 404 but read the
  file's header and wrote the path into the library cache: no route that takes a model name
  opens, lists or remembers a file outside the library.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.engine import durations
from app.engine.worker import EngineWorker
from app.library.local import Library
from app.server.catalog import LibraryCatalog
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from app.server.ollama import convert
from tests.helpers.gguf_writer import write_gguf
from tests.helpers.served import serving


class _Touched:
    """Paths under ``watched`` that this process opened or listed (an audit hook: hooks stay
    for the process's life, so one hook serves every test and watches while armed)."""

    def __init__(self) -> None:
        self.watched: str | None = None
        self.paths: list[str] = []

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.watched is None or event not in ("open", "os.listdir", "os.scandir"):
            return
        path = args[0] if args else None
        if isinstance(path, str | Path) and str(path).startswith(self.watched):
            self.paths.append(str(path))


TOUCHED = _Touched()
sys.addaudithook(TOUCHED)


@pytest.fixture(scope="module")
def library_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("library")
    write_gguf(root / "models" / "someone" / "tiny" / "tiny-Q4_K_M.gguf", name="Tiny")
    return root


@pytest.fixture(scope="module")
def server(library_root: Path) -> Iterator[tuple[httpx.Client, Library]]:
    library = Library(
        models_dir=library_root / "models",
        hf_cache_dir=library_root / "hf",
        lmstudio_dirs=(),
        cache_path=library_root / "library.json",
    )
    worker = EngineWorker()
    catalog = LibraryCatalog(library, rescan_after=0)
    with (
        serving(Gateway(worker, catalog), ServerConfig(port=0)) as runner,
        httpx.Client(base_url=f"http://127.0.0.1:{runner.port}", timeout=60) as http,
    ):
        yield http, library


# ---- keep_alive -----------------------------------------------------------------------------


class _CountingPattern:
    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.calls = 0

    def match(self, text: str, pos: int = 0) -> Any:
        self.calls += 1
        return self.pattern.match(text, pos)


@pytest.mark.parametrize(
    "value", ["1" * 30_000 + "x", "1" * 30_000, "1s" * 15_000 + "x", "5m" * 15_000]
)
def test_a_huge_keep_alive_is_refused_before_it_is_scanned(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = _CountingPattern(durations._DURATION_PIECE)
    monkeypatch.setattr(durations, "_DURATION_PIECE", counting)
    with pytest.raises(Exception) as caught:
        convert.keep_alive_seconds(value)
    assert f"of {len(value)} characters" in str(caught.value)
    assert counting.calls == 0


def test_durations_are_parsed_piece_by_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _CountingPattern(durations._DURATION_PIECE)
    monkeypatch.setattr(durations, "_DURATION_PIECE", counting)
    assert convert.keep_alive_seconds("1h30m") == 5400
    assert counting.calls == 2
    assert convert.keep_alive_seconds(" -1 ") == -1
    assert convert.keep_alive_seconds("1.5s500ms") == 2.0
    longest = "9" * 30 + "x"  # under the bound: one failed match, not one per digit
    counting.calls = 0
    with pytest.raises(Exception, match="keep_alive"):
        convert.keep_alive_seconds(longest)
    assert counting.calls == 1


def test_a_huge_keep_alive_is_a_400_and_health_answers_meanwhile(
    server: tuple[httpx.Client, Library],
) -> None:
    http, _ = server
    answers: list[httpx.Response] = []

    def attack() -> None:
        routes: list[tuple[str, dict[str, Any]]] = [("/api/chat", {"messages": []})]
        for route, extra in [*routes, ("/api/generate", {})]:
            body = {"model": "tiny", "keep_alive": "1" * 30_000 + "x", **extra}
            answers.append(http.post(route, json=body))

    attacker = threading.Thread(target=attack)
    attacker.start()
    while attacker.is_alive():  # the event loop answers while the attack runs
        assert http.get("/health").status_code == 200
    attacker.join()
    for r in answers:
        assert r.status_code == 400, r.text
        assert "Invalid 'keep_alive': a value of 30001 characters" in r.json()["error"]


# ---- files outside the library ---------------------------------------------------------------


def attempts(path: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every route that takes a model's name, naming ``path``."""
    return [
        ("POST", "/api/show", {"model": path}),
        ("DELETE", "/api/delete", {"model": path}),
        ("POST", "/api/copy", {"source": path, "destination": "stolen"}),
        ("POST", "/api/chat", {"model": path, "messages": [], "keep_alive": 0}),
        ("POST", "/api/chat", {"model": path, "messages": []}),
        ("POST", "/api/generate", {"model": path, "prompt": "x"}),
        ("POST", "/api/embed", {"model": path, "input": "x"}),
        ("POST", "/v1/chat/completions", {"model": path, "messages": [{"role": "user"}]}),
        ("POST", "/v1/completions", {"model": path, "prompt": "x"}),
        ("POST", "/v1/embeddings", {"model": path, "input": "x"}),
        ("GET", f"/v1/models/{path}", None),
    ]


def test_no_route_opens_or_remembers_a_file_outside_the_library(
    server: tuple[httpx.Client, Library], library_root: Path, tmp_path: Path
) -> None:
    http, library = server
    outside = write_gguf(tmp_path / "elsewhere" / "secret.gguf", name="Secret")
    assert http.post("/api/show", json={"model": "tiny"}).status_code == 200  # a scan, once
    TOUCHED.paths.clear()
    TOUCHED.watched = str(tmp_path)
    try:
        for method, route, body in attempts(str(outside)):
            r = http.request(method, route, json=body)
            assert r.status_code in (400, 404), (route, r.status_code, r.text)
            assert http.get("/health").status_code == 200
    finally:
        TOUCHED.watched = None
    assert TOUCHED.paths == []
    cache = (library_root / "library.json").read_text(encoding="utf-8")
    assert "secret" not in cache.lower() and str(tmp_path) not in cache
    assert [m.name for m in library.models] == [m.name for m in library.scan()]
    assert all("secret" not in str(m.path) for m in library.models)
    assert outside.parent.exists() and sorted(outside.parent.iterdir()) == [outside]


def test_a_library_file_may_still_be_named_by_its_path(
    server: tuple[httpx.Client, Library], library_root: Path
) -> None:
    http, _ = server
    inside = library_root / "models" / "someone" / "tiny" / "tiny-Q4_K_M.gguf"
    r = http.post("/api/show", json={"model": str(inside)})
    assert r.status_code == 200, r.text
    assert r.json()["details"]["quantization_level"] == "Q4_K_M"
