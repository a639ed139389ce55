"""Requests that got a 500 or a misleading answer from a real `ember serve` when it was attacked
(session 10), through the real server and the real model (tests/server/conftest.py), with
the `openai` SDK where a client would use it. After each, a normal request is answered.

- a grammar whose character is past U+10FFFF allows no token: it was a 500 "engine error"
  (the grammar is the request's: a 400 now);
- an earlier tool call whose arguments nest thousands deep was a 500 (RecursionError);
- a ``logit_bias`` key of 5,000 digits answered with Python's own advice
  (``sys.set_int_max_str_digits``);
- ``Infinity`` (which Python's JSON writes) reached llama.cpp's samplers as a number;
- a JSON body nested 300 deep was "not valid JSON", which it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import openai
import pytest

from app.engine.llamacpp import EMBED_MAX_TOKENS
from app.engine.providers import ProviderRegistry, make_provider
from app.engine.worker import EngineWorker
from app.server import convert, jobs, schemas
from app.server.config import ServerConfig
from app.server.forward import RemoteForwarder
from app.server.gateway import Gateway
from app.server.ollama.answers import _Pieces
from app.server.pieces import Piece
from app.server.toolcalls import HERMES
from tests.helpers.net import local_http
from tests.helpers.served import MODEL_ID, N_CTX, Served, serving
from tests.helpers.spying import spy

MESSAGES = [{"role": "user", "content": "Hi"}]
HEADERS = {"content-type": "application/json"}


def still_answers(http: httpx.Client) -> None:
    body = {"model": MODEL_ID, "prompt": "Hello", "max_tokens": 2, "temperature": 0}
    assert http.post("/v1/completions", json=body).status_code == 200


@pytest.mark.parametrize("stream", [False, True])
def test_a_grammar_that_allows_no_token_is_a_400(
    client: openai.OpenAI, http: httpx.Client, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's headers wait for its first event up to a second after the job starts (then a
    failure is an error event, as OpenAI's are); the first grammar pass over Gemma's 262k
    tokens can take longer on a busy machine, so the test waits for the event, not the clock."""
    monkeypatch.setattr(jobs, "HEADER_DEADLINE", 3600.0)
    grammar = 'root ::= "\\UFFFFFFFF"'  # no character is past U+10FFFF
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(
            model=MODEL_ID, prompt="x", max_tokens=3, stream=stream, extra_body={"grammar": grammar}
        )
    assert "allows none of the model's tokens" in caught.value.message
    still_answers(http)


def test_an_earlier_tool_call_nested_thousands_deep_is_sent_as_text(http: httpx.Client) -> None:
    arguments = "[" * 1500 + "]" * 1500
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [*MESSAGES, {"role": "assistant", "tool_calls": [call]}]
    r = http.post(
        "/v1/chat/completions", json={"model": MODEL_ID, "messages": messages, "max_tokens": 2}
    )
    assert r.status_code == 200, r.text
    still_answers(http)


@pytest.mark.parametrize("key", ["9" * 5000, "²"])
def test_a_logit_bias_key_that_is_no_token_id_says_so(http: httpx.Client, key: str) -> None:
    body = {"model": MODEL_ID, "prompt": "x", "max_tokens": 2, "logit_bias": {key: 1}}
    r = http.post("/v1/completions", json=body)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == "logit_bias" and "keys must be token ids" in error["message"]
    assert "set_int_max_str_digits" not in error["message"] and "int()" not in error["message"]
    assert len(error["message"]) < 200
    still_answers(http)


@pytest.mark.parametrize(
    ("path", "field", "value"),
    [
        ("/v1/completions", "mirostat_tau", "Infinity"),
        ("/v1/completions", "repeat_penalty", "Infinity"),
        ("/v1/completions", "mirostat_eta", "NaN"),
        ("/api/generate", "mirostat_tau", "Infinity"),
        ("/api/generate", "repeat_penalty", "1e999"),
    ],
)
def test_a_number_that_is_not_finite_is_a_400_naming_it(
    http: httpx.Client, path: str, field: str, value: str
) -> None:
    if path == "/v1/completions":
        body = f'{{"model": "{MODEL_ID}", "prompt": "x", "max_tokens": 2, "{field}": {value}}}'
    else:
        options = f'{{"num_predict": 2, "{field}": {value}}}'
        body = f'{{"model": "{MODEL_ID}", "prompt": "x", "stream": false, "options": {options}}}'
    r = http.post(path, content=body, headers=HEADERS)
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    message = message if isinstance(message, str) else message["message"]
    assert field in message and "finite number" in message
    still_answers(http)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
def test_a_body_nested_too_deeply_is_not_called_invalid_json(http: httpx.Client, path: str) -> None:
    schema = '{"type": "array", "items": ' * 300 + "{}" + "}" * 300
    body = json.dumps({"model": MODEL_ID, "messages": MESSAGES, "stream": False})
    body = body[:-1] + f', "format": {schema}, "response_format": {{"type": "json_schema", '
    body += f'"json_schema": {{"name": "x", "schema": {schema}}}}}}}'
    r = http.post(path, content=body, headers=HEADERS)
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    message = message if isinstance(message, str) else message["message"]
    assert "nested too deeply" in message and "not valid JSON" not in message
    still_answers(http)


# ---- JSON nested thousands deep from elsewhere: a model's tool call, a remote provider ------

DEEP = "[" * 5000 + "]" * 5000


def test_json_nested_thousands_deep_in_a_call_is_kept_as_text() -> None:
    """A model that writes a call's arguments 5,000 brackets deep (Ollama's answer parses
    them), and an earlier call like it for a template that renders calls: text, not a 500."""
    pieces = _Pieces()
    pieces.split([Piece("tool", DEEP, index=0, id="c1", name="f")])
    [call] = pieces.tool_calls()
    assert call["function"]["arguments"] == {"arguments": DEEP}
    earlier = schemas.ToolCall.model_validate({"function": {"name": "f", "arguments": DEEP}})
    [shaped] = convert._chat_messages(
        [schemas.Message.model_validate({"role": "assistant", "tool_calls": [earlier]})],
        "{{ messages[0].tool_calls }}",
        HERMES,
    )
    assert shaped["tool_calls"][0]["function"]["arguments"] == DEEP


class Upstream(BaseHTTPRequestHandler):
    """A provider that answers JSON nested 5,000 deep: whole, as an error, and streamed."""

    def log_message(self, *_args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        status, kind, body = 200, "application/json", DEEP.encode()
        if self.path.endswith("/completions") and "chat" not in self.path:
            status = 400
        if self.path.endswith("/embeddings"):
            kind, body = "text/event-stream", f"data: {DEEP}\n\ndata: [DONE]\n\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def forwarding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    registry = ProviderRegistry(path=tmp_path_factory.mktemp("deep") / "providers.json")
    worker = EngineWorker()
    with local_http(Upstream) as upstream:
        registry.add(make_provider("deep", f"{upstream.url}/v1"))
        forwarder = RemoteForwarder(registry)
        with serving(Gateway(worker), ServerConfig(port=0), forwarder=forwarder) as runner:
            yield f"http://127.0.0.1:{runner.port}"


def test_a_provider_answering_json_nested_thousands_deep_is_no_500(forwarding: str) -> None:
    with httpx.Client(base_url=forwarding, timeout=60) as http:
        body = {"model": "deep::m", "messages": MESSAGES, "prompt": "x", "input": "x"}
        whole = http.post("/v1/chat/completions", json=body)
        assert whole.status_code == 502 and "not JSON" in whole.json()["error"]["message"]
        error = http.post("/v1/completions", json=body)  # the provider's 400
        assert error.status_code == 400 and error.json()["error"]["message"]
        streamed = http.post("/v1/embeddings", json=body)  # passed through as it came
        assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")
        assert http.get("/health").status_code == 200


# ---- prompts no context can hold are refused before the engine renders or tokenizes them ----


@pytest.mark.parametrize("case", ["30 MB prompt", "30 MB chat", "200,000 messages"])
def test_a_prompt_no_context_can_hold_never_reaches_the_engine(
    served: Served, http: httpx.Client, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """They held the engine thread (every answer, the app's chats too) for 20 s and over 3
    minutes while llama.cpp tokenized them or the template rendered them, to find they do not
    fit; a client that hung up could not stop that."""
    submitted = spy(monkeypatch, served.gateway, "submit")
    text = "word " * (6 * 1024 * 1024)
    chat = "/v1/chat/completions"
    bodies: dict[str, tuple[str, dict[str, Any]]] = {
        "30 MB prompt": ("/v1/completions", {"prompt": text}),
        "30 MB chat": (chat, {"messages": [{"role": "user", "content": text}]}),
        "200,000 messages": (chat, {"messages": [{"role": "user", "content": ""}] * 200_000}),
    }
    path, body = bodies[case]
    r = http.post(path, json={"model": MODEL_ID, "max_tokens": 2, **body})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "context_length_exceeded" and f"{N_CTX:,} tokens" in error["message"]
    assert submitted == []
    still_answers(http)


@pytest.mark.parametrize("path", ["/v1/embeddings", "/api/embed"])
def test_an_embedding_input_no_embedding_can_cover_never_reaches_the_engine(
    served: Served, http: httpx.Client, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """One 30 MB input held the engine thread for 22 s while llama.cpp tokenized it."""
    submitted = spy(monkeypatch, served.gateway, "submit")
    r = http.post(path, json={"model": MODEL_ID, "input": ["Hi", "word " * (6 * 1024 * 1024)]})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    message = error if isinstance(error, str) else error["message"]
    assert "Input 1 is 31,457,280 characters" in message and "8,192 tokens" in message
    assert submitted == []
    still_answers(http)
    assert convert.EMBED_MAX_CHARS == EMBED_MAX_TOKENS * convert.MAX_CHARS_PER_TOKEN
