"""A stand-in for Ollama on its port, for what Ember does when Ollama's port is taken."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers.net import local_http


class FakeOllama(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/api/version":
            body = json.dumps({"version": "0.9.0"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        else:
            body = b"404 page not found"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def fake_ollama() -> Iterator[int]:
    with local_http(FakeOllama) as http:
        yield http.port
