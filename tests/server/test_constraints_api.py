"""A bad or oversized grammar or JSON schema is a 400 naming its parameter before a model is
loaded or a job queued, and it is converted off the server's event loop (the engine then finds
it cached). The scripted model stands in for llama.cpp; test_bounds_before_c.py sends the
requests that crashed the real one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.engine.constraints import grammar_for
from app.engine.types import LoadParams, SamplingParams
from app.engine.worker import EngineWorker
from app.server import convert
from app.server.catalog import StaticCatalog, entry_for_file
from app.server.config import ServerConfig
from app.server.gateway import Gateway
from tests.helpers.scripted_model import scripted_factory
from tests.helpers.served import serving

LOADED, UNLOADED = "loaded", "unloaded"
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
MESSAGES = [{"role": "user", "content": "hi"}]


@dataclass
class Server:
    url: str
    gateway: Gateway


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("constraints")
    catalog = StaticCatalog([entry_for_file(root / f"{m}.gguf", m) for m in (LOADED, UNLOADED)])
    worker = EngineWorker(model_factory=scripted_factory())
    gateway = Gateway(worker, catalog)
    gateway.load("scripted", LOADED, LoadParams(n_ctx=4096)).wait(30)
    with serving(gateway, ServerConfig(port=0)) as runner:
        yield Server(f"http://127.0.0.1:{runner.port}", gateway)


def schema_format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def forced_tool(parameters: Any) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    return {"tools": [tool], "tool_choice": "required"}


BAD: dict[str, tuple[str, dict[str, Any], str]] = {
    "grammar (completions)": (COMPLETIONS, {"prompt": "x", "grammar": "root ::= ("}, "grammar"),
    "grammar (chat)": (CHAT, {"grammar": 'root ::= "a"{0,99999}'}, "grammar"),
    "response_format": (
        CHAT,
        {"response_format": schema_format({"type": "string", "maxLength": 20000})},
        "response_format",
    ),
    "a forced tool's parameters": (
        CHAT,
        forced_tool({"type": "object", "properties": [1, 2]}),
        "tools",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_constraint_is_a_400_before_a_model_is_loaded(server: Server, case: str) -> None:
    path, extra, param = BAD[case]
    body = {"model": UNLOADED, "messages": MESSAGES, "max_tokens": 2, **extra}
    r = httpx.post(server.url + path, json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert UNLOADED not in {m.model_id for m in server.gateway.loaded()}


def test_a_schema_is_converted_off_the_event_loop_once(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []

    def recording(sampling: SamplingParams) -> object:
        threads.append(threading.current_thread().name)
        return grammar_for(sampling)

    monkeypatch.setattr(convert, "grammar_for", recording)
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}}
    body = {"model": LOADED, "messages": MESSAGES, "max_tokens": 3}
    r = httpx.post(
        server.url + CHAT, json={**body, "response_format": schema_format(schema)}, timeout=60
    )
    assert r.status_code == 200, r.text
    assert len(threads) == 1 and threads[0] != "ember-server"


def test_a_good_constraint_still_answers(server: Server) -> None:
    body = {"model": LOADED, "prompt": "x", "max_tokens": 2, "grammar": "root ::= [a-z]+"}
    assert httpx.post(server.url + COMPLETIONS, json=body, timeout=60).status_code == 200
