"""Completions, embeddings, models and health, through the `openai` SDK and raw HTTP."""

from __future__ import annotations

import base64
import json
import struct
import threading

import httpx
import openai
import pytest

from app.server.requestlog import RequestRecord
from tests.helpers.served import MODEL_ID, N_CTX, Served


def test_health_answers(http: httpx.Client) -> None:
    r = http.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_models_list_marks_the_loaded_model(client: openai.OpenAI) -> None:
    models = {m.id: m for m in client.models.list()}
    loaded = models[MODEL_ID]
    assert loaded.object == "model" and loaded.owned_by and loaded.created > 0
    extra = loaded.model_extra or {}
    assert extra["state"] == "loaded"
    assert extra["context_length"] == N_CTX  # the context in use
    assert extra["max_context_length"] == 32768  # the trained one
    assert "chat" in extra["capabilities"] and "fim" not in extra["capabilities"]
    library = models["test/gemma-copy/gemma-copy.gguf"]
    assert (library.model_extra or {})["state"] in ("not-loaded", "loaded")
    one = client.models.retrieve(MODEL_ID)
    assert one.id == MODEL_ID
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("no-such-model")
    assert e.value.body["code"] == "model_not_found"  # type: ignore[index]


def test_completion_non_streaming(client: openai.OpenAI) -> None:
    r = client.completions.create(
        model=MODEL_ID, prompt="The capital of France is", max_tokens=5, temperature=0
    )
    assert r.id.startswith("cmpl-") and r.object == "text_completion"
    assert r.model == MODEL_ID and r.system_fingerprint
    (choice,) = r.choices
    assert choice.index == 0 and choice.text and choice.logprobs is None
    assert choice.finish_reason == "length"
    assert r.usage is not None and r.usage.completion_tokens == 5


def test_completion_default_max_tokens_is_16(client: openai.OpenAI) -> None:
    r = client.completions.create(
        model=MODEL_ID, prompt="Once upon a time", temperature=0, stop=["zzzz"]
    )
    assert r.usage is not None
    assert r.usage.completion_tokens <= 16
    assert r.choices[0].finish_reason in ("length", "stop")


def test_completion_stream_echo_and_usage(client: openai.OpenAI) -> None:
    prompt = "The capital of France is"
    plain = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=5, temperature=0)
    chunks = list(
        client.completions.create(
            model=MODEL_ID,
            prompt=prompt,
            max_tokens=5,
            temperature=0,
            echo=True,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    *texts, usage = chunks
    assert usage.choices == [] and usage.usage is not None
    assert usage.usage.completion_tokens == 5
    assert all(c.usage is None for c in texts)
    text = "".join(c.choices[0].text for c in texts)
    assert text == prompt + plain.choices[0].text
    assert texts[-1].choices[0].finish_reason == "length"
    echoed = client.completions.create(
        model=MODEL_ID, prompt=prompt, max_tokens=5, temperature=0, echo=True
    )
    assert echoed.choices[0].text == prompt + plain.choices[0].text


def test_completion_stop_is_not_in_output(client: openai.OpenAI) -> None:
    free = (
        client.completions.create(
            model=MODEL_ID, prompt="One, two, three,", max_tokens=10, temperature=0
        )
        .choices[0]
        .text
    )
    stop = free.split(",")[1] if "," in free else free.split()[1]
    r = client.completions.create(
        model=MODEL_ID, prompt="One, two, three,", max_tokens=10, temperature=0, stop=[stop]
    )
    assert r.choices[0].finish_reason == "stop"
    assert stop not in r.choices[0].text


def test_suffix_without_fim_tokens_is_a_clear_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_ID, prompt="def f(", suffix="    return x\n")
    body = e.value.body
    assert isinstance(body, dict)
    assert body["param"] == "suffix" and body["code"] == "fim_not_supported"
    assert "fill-in-the-middle" in body["message"]


def test_embeddings_float_base64_and_lists(client: openai.OpenAI, http: httpx.Client) -> None:
    one = client.embeddings.create(model=MODEL_ID, input="Hello world")  # SDK asks for base64
    assert one.object == "list" and one.model == MODEL_ID
    (item,) = one.data
    assert item.object == "embedding" and item.index == 0 and len(item.embedding) == 640
    assert abs(sum(x * x for x in item.embedding) - 1.0) < 1e-3
    assert one.usage.prompt_tokens > 0 and one.usage.total_tokens == one.usage.prompt_tokens
    many = client.embeddings.create(
        model=MODEL_ID, input=["Hello world", "Goodbye"], encoding_format="float"
    )
    assert [d.index for d in many.data] == [0, 1]
    assert many.data[0].embedding == pytest.approx(item.embedding, abs=1e-5)
    raw = http.post(
        "/v1/embeddings",
        json={"model": MODEL_ID, "input": "Hello world", "encoding_format": "base64"},
    ).json()
    packed = base64.b64decode(raw["data"][0]["embedding"])
    floats = struct.unpack(f"<{len(packed) // 4}f", packed)
    assert list(floats) == pytest.approx(item.embedding, abs=1e-5)
    bad = http.post("/v1/embeddings", json={"model": MODEL_ID, "input": ""})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input"


def test_just_in_time_load_of_a_library_model(client: openai.OpenAI, served: Served) -> None:
    library_id = "test/gemma-copy/gemma-copy.gguf"
    r = client.chat.completions.create(
        model=library_id,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=3,
        temperature=0,
    )
    assert r.model == library_id
    loaded = {m.model_id for m in served.gateway.loaded()}
    assert {library_id, MODEL_ID} <= loaded
    models = {m.id: m for m in client.models.list()}
    assert (models[library_id].model_extra or {})["state"] == "loaded"
    # A unique part of a library name works too (as `ember run` accepts it).
    again = client.completions.create(model="gemma-copy", prompt="Hi", max_tokens=2)
    assert again.model == library_id


def test_a_loaded_file_is_reused_under_another_id(client: openai.OpenAI, served: Served) -> None:
    link_id = "test/gemma-link/gemma-link.gguf"  # a symlink to the file loaded as "gemma"
    before = len(served.gateway.loaded())
    r = client.completions.create(model=link_id, prompt="Hi", max_tokens=1)
    # gemma-copy is a hard link of the same file, so the library lists the copy and the link
    # as one entry: the link's id means that entry, which may be loaded already by its own id
    assert r.model in (MODEL_ID, "test/gemma-copy/gemma-copy.gguf")
    assert len(served.gateway.loaded()) == before
    listed = {m.id: (m.model_extra or {}) for m in client.models.list()}
    # one file, one entry: listed by the id it is loaded as
    assert link_id not in listed
    assert listed[MODEL_ID]["state"] == "loaded" and listed[MODEL_ID]["context_length"] == N_CTX


def test_request_log_records_requests(served: Served, http: httpx.Client) -> None:
    seen: list[RequestRecord] = []
    both = threading.Event()

    def record(r: RequestRecord) -> None:  # the server's thread, after its response went out
        seen.append(r)
        if len(seen) == 2:
            both.set()

    unsubscribe = served.runner.request_log.subscribe(record)
    try:
        http.post(
            "/v1/completions",
            json={"model": MODEL_ID, "prompt": "Hello", "max_tokens": 2, "temperature": 0},
        )
        http.get("/v1/nowhere")
        assert both.wait(120), f"the request log has {len(seen)} of 2 records"  # a failsafe
    finally:
        unsubscribe()
    ok, missing = seen
    assert (ok.method, ok.path, ok.status, ok.model) == ("POST", "/v1/completions", 200, MODEL_ID)
    assert ok.prompt_tokens and ok.completion_tokens == 2
    assert ok.duration > 0 and ok.time > 0 and not ok.stream
    assert json.loads(ok.request_body)["prompt"] == "Hello"
    assert json.loads(ok.response_body)["object"] == "text_completion"
    assert (missing.status, missing.error) == (404, "Invalid URL (GET /v1/nowhere)")
    assert served.runner.request_log.records()[-1] == missing


def test_a_local_request_body_is_parsed_once(
    client: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a body naming ``provider::model`` is looked into before validation."""
    from types import SimpleNamespace

    from app.server import answering

    def loads(_raw: object) -> object:
        raise AssertionError("a local request was JSON-decoded before validation")

    monkeypatch.setattr(answering, "json", SimpleNamespace(loads=loads))
    r = client.completions.create(model=MODEL_ID, prompt="Hi", max_tokens=2)
    assert r.choices[0].text is not None
