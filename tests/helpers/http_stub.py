"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for the remote-provider tests, and its
canned streamed answer."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers.net import LocalHttp

Handler = Callable[[BaseHTTPRequestHandler], None]


class Stub:
    """A scripted HTTP server on 127.0.0.1: ``routes[(method, path)]`` handles requests."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.hits: list[tuple[str, str, dict[str, Any]]] = []
        stub = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                stub.hits.append((method, self.path, body))
                route = stub.routes.get((method, self.path))
                if route is None:
                    send_json(self, 404, {"error": {"message": f"no route {self.path}"}})
                    return
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    route(self)  # the client may hang up first: that is what some tests do

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        self.http = LocalHttp(_Handler, poll_interval=0.05)
        self.url = self.http.url
        self.models(["alpha", "beta"])

    def models(self, ids: list[str]) -> None:
        data = {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}
        self.routes[("GET", "/v1/models")] = lambda h: send_json(h, 200, data)

    def close(self) -> None:
        self.http.close()


def send_json(
    h: BaseHTTPRequestHandler, status: int, data: Any, headers: dict[str, str] | None = None
) -> None:
    raw = json.dumps(data).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(raw)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(raw)


def start_sse(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Connection", "close")
    h.end_headers()


def send_event(h: BaseHTTPRequestHandler, data: Any) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    h.wfile.write(f"data: {text}\n\n".encode())
    h.wfile.flush()


def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def sse_answer(h: BaseHTTPRequestHandler) -> None:
    start_sse(h)
    h.wfile.write(b": keep-alive comment\n\nevent: message\n")
    send_event(h, chunk("Hel"))
    send_event(h, chunk("lo", "stop"))
    send_event(h, {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}})
    send_event(h, "[DONE]")
