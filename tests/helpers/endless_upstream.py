"""A fake OpenAI-compatible provider on 127.0.0.1 whose answers never end.

``mode`` picks what POSTs (and ``GET /v1/models``) get: ``"json"`` a 200 JSON body that never
ends, ``"sse"`` a 200 event stream whose first line never ends, ``"error"`` a 500 whose body
never ends, ``"ok"`` a small valid chat completion, ``"cut"`` a body cut short. ``written``
counts the body bytes sent; ``hung_up`` is set once the client closed the connection on an
endless body.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

from tests.helpers.net import LocalHttp

CHUNK = b"x" * 65536
OK = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


class EndlessUpstream:
    def __init__(self, mode: str = "json") -> None:
        self.mode = mode
        self.written = 0
        self.hung_up = threading.Event()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self._answer()

            def _answer(self) -> None:
                mode = upstream.mode
                if mode == "cut":  # promises 1000 bytes, sends 10, hangs up
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b'{"choices"')
                    self.close_connection = True
                    return
                if mode == "ok":
                    body = json.dumps(OK).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(500 if mode == "error" else 200)
                kind = "text/event-stream" if mode == "sse" else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Connection", "close")  # no length: the body ends never
                self.end_headers()
                first = {"sse": b"data: ", "error": b'{"error": {"message": "'}.get(
                    mode, b'{"choices": "'
                )
                try:
                    self.wfile.write(first)
                    while True:
                        self.wfile.write(CHUNK)
                        upstream.written += len(CHUNK)
                except OSError:  # the client hung up: what the limits are for
                    upstream.hung_up.set()

        self.http = LocalHttp(Handler)
        self.url = f"{self.http.url}/v1"

    def close(self) -> None:
        self.http.close()
