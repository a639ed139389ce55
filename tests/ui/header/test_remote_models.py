"""The model picker's remote catalog on the app's task runner, against real HTTP servers on
127.0.0.1 that can hold an answer: a provider that never answers delays no other and is
abandoned at quit, a refresh asked mid-read reads again, and only a provider's newest answer
counts."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from pytestqt.qtbot import QtBot

from app.engine.providers import Provider, ProviderRegistry, RemoteRouter, make_provider
from app.ui.header.remote_models import RemoteCatalog
from app.ui.task_runner import Task, TaskState, shutdown_tasks, tasks
from tests.helpers.net import LocalHttp

pytestmark = pytest.mark.usefixtures("no_keyring")  # keys never reach the machine's keyring

TIMEOUT = 10_000
HOLD = 15.0  # seconds a held answer waits for its gate at most (the list read timeout)


class ModelsServer:
    """``GET /v1/models`` answers with ``models`` (what it is when the request arrives); with
    ``hold`` set, the next request waits for ``release()`` before answering."""

    def __init__(self, *models: str) -> None:
        self.models = list(models)
        self.hold = False
        self.held = threading.Event()  # a request is being held
        self._gate = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                models = list(server.models)
                if server.hold:
                    server.hold = False
                    server.held.set()
                    server._gate.wait(HOLD)
                body = json.dumps({"object": "list", "data": [{"id": m} for m in models]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._http = LocalHttp(Handler)

    @property
    def base_url(self) -> str:
        return f"{self._http.url}/v1"

    def release(self) -> None:
        self._gate.set()

    def close(self) -> None:
        self.release()
        self._http.close()


@pytest.fixture
def servers() -> Iterator[Callable[..., ModelsServer]]:
    started: list[ModelsServer] = []

    def start(*models: str) -> ModelsServer:
        started.append(ModelsServer(*models))
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.fixture
def registry() -> ProviderRegistry:
    return ProviderRegistry()


@pytest.fixture
def catalog(registry: ProviderRegistry) -> Iterator[RemoteCatalog]:
    router = RemoteRouter(registry)
    yield RemoteCatalog(router)
    shutdown_tasks(wait=0)
    router.shutdown()


def add(registry: ProviderRegistry, name: str, server: ModelsServer) -> Provider:
    return registry.add(make_provider(name, server.base_url, "vllm"))


def status_is(catalog: RemoteCatalog, name: str, status: str) -> Callable[[], bool]:
    return lambda: (entry := catalog.entry(name)) is not None and entry.status == status


def test_a_provider_that_never_answers_delays_no_other_and_is_abandoned_at_quit(
    qtbot: QtBot,
    catalog: RemoteCatalog,
    registry: ProviderRegistry,
    servers: Callable[..., ModelsServer],
) -> None:
    hung = servers("big-model")
    hung.hold = True
    add(registry, "hung", hung)
    add(registry, "quick", servers("small-model"))
    catalog.refresh()
    qtbot.waitUntil(hung.held.is_set, timeout=TIMEOUT)  # the GUI thread is free meanwhile
    qtbot.waitUntil(status_is(catalog, "quick", "ok"), timeout=TIMEOUT)
    entry = catalog.entry("quick")
    assert entry is not None and entry.models == ("small-model",)
    assert status_is(catalog, "hung", "checking")()

    abandoned = shutdown_tasks(wait=0)  # as Services.close does when the app quits

    assert [task.name for task in abandoned] == ["list the models of hung"]
    assert abandoned[0].state is TaskState.ABANDONED


def test_a_refresh_asked_while_the_providers_are_read_reads_them_again(
    qtbot: QtBot,
    catalog: RemoteCatalog,
    registry: ProviderRegistry,
    servers: Callable[..., ModelsServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    add(registry, "first", servers("a"))
    reading, go_on = threading.Event(), threading.Event()
    read = registry.list

    def held_list() -> list[Provider]:  # reads, then waits: its answer misses "second"
        providers = read()
        reading.set()
        go_on.wait(HOLD)
        return providers

    monkeypatch.setattr(registry, "list", held_list)
    catalog.refresh()
    assert reading.wait(HOLD)
    monkeypatch.setattr(registry, "list", read)
    add(registry, "second", servers("b"))
    catalog.refresh(max_age=0)  # the menu's "Refresh" while the first read runs
    go_on.set()
    qtbot.waitUntil(status_is(catalog, "second", "ok"), timeout=TIMEOUT)
    qtbot.waitUntil(status_is(catalog, "first", "ok"), timeout=TIMEOUT)
    assert [p.name for p in catalog.providers] == ["first", "second"]


def test_only_the_newest_answer_of_a_provider_counts(
    qtbot: QtBot,
    catalog: RemoteCatalog,
    registry: ProviderRegistry,
    servers: Callable[..., ModelsServer],
) -> None:
    server = servers("old-model")
    server.hold = True
    add(registry, "box", server)
    catalog.refresh()
    qtbot.waitUntil(server.held.is_set, timeout=TIMEOUT)  # the first ask holds the old list
    server.models = ["new-model"]
    registry.update("box", headers={"X-Team": "blue"})  # a changed provider is asked again
    catalog.refresh()
    qtbot.waitUntil(status_is(catalog, "box", "ok"), timeout=TIMEOUT)

    def stale(task: Task) -> bool:
        return task.name == "list the models of box" and task.state is TaskState.SUPERSEDED

    with qtbot.waitSignal(tasks().settled, timeout=TIMEOUT, check_params_cb=stale):
        server.release()
    entry = catalog.entry("box")
    assert entry is not None and entry.models == ("new-model",)
