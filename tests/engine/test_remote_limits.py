"""The remote engine reads a bounded part of what a provider sends: a non-streamed answer or
a model list up to ``MAX_ANSWER_BYTES``, an error body up to ``MAX_ERROR_BYTES``, one stream
line up to ``MAX_SSE_LINE_BYTES``; then it hangs up and fails the job with the provider's
name. A real (fake) provider on 127.0.0.1 that never stops sending."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.engine import remote_limits
from app.engine.remote import RemoteEngine
from app.engine.remote_errors import RemoteServerError
from app.engine.types import ChatMessage, ChatRequest, Failed, SamplingParams
from tests.helpers.endless_upstream import EndlessUpstream

MB = 1024 * 1024
WAIT = 60.0  # a failsafe for waits on events, never a timing target
SOCKET_SLACK = 40 * MB  # what loopback socket buffers may hold that Ember never read


@pytest.fixture
def endless(monkeypatch: pytest.MonkeyPatch) -> Iterator[EndlessUpstream]:
    monkeypatch.setattr(remote_limits, "MAX_ANSWER_BYTES", 2 * MB)
    monkeypatch.setattr(remote_limits, "MAX_ERROR_BYTES", MB // 4)
    monkeypatch.setattr(remote_limits, "MAX_SSE_LINE_BYTES", MB // 2)
    upstream = EndlessUpstream()
    yield upstream
    upstream.close()


@pytest.fixture
def engine(endless: EndlessUpstream) -> Iterator[RemoteEngine]:
    e = RemoteEngine(endless.url, name="endless", max_retries=0)
    yield e
    e.shutdown()


def chat() -> ChatRequest:
    return ChatRequest(
        [ChatMessage(role="user", content="hi")],
        SamplingParams(temperature=0.0, max_tokens=4),
        model="m",
    )


def test_an_endless_answer_fails_the_job(endless: EndlessUpstream, engine: RemoteEngine) -> None:
    final = engine.submit(chat(), stream=False).wait(WAIT)
    assert isinstance(final, Failed) and isinstance(final.error, RemoteServerError)
    assert (
        final.error.message == "endless answered more than 2 MiB; Ember reads at most 2 MiB of it."
    )
    endless.hung_up.wait()
    assert endless.written < 2 * MB + SOCKET_SLACK


def test_an_endless_stream_line_fails_the_job(
    endless: EndlessUpstream, engine: RemoteEngine
) -> None:
    endless.mode = "sse"
    final = engine.submit(chat()).wait(WAIT)
    assert isinstance(final, Failed) and isinstance(final.error, RemoteServerError)
    assert "endless answered more than 0.5 MiB in one line of its stream" in final.error.message
    endless.hung_up.wait()
    assert endless.written < MB // 2 + SOCKET_SLACK


def test_an_endless_error_body_is_cut(endless: EndlessUpstream, engine: RemoteEngine) -> None:
    endless.mode = "error"
    final = engine.submit(chat()).wait(WAIT)
    assert isinstance(final, Failed) and isinstance(final.error, RemoteServerError)
    assert final.error.message.startswith('endless failed (HTTP 500): {"error"')
    endless.hung_up.wait()


def test_an_endless_model_list_is_refused(endless: EndlessUpstream, engine: RemoteEngine) -> None:
    with pytest.raises(RemoteServerError, match="endless answered more than 2 MiB"):
        engine.list_models()
    endless.hung_up.wait()


def test_lines_split_like_sse_wants_across_chunks() -> None:
    splitter = remote_limits.LineSplitter("p", limit=8)
    out = [*splitter.feed(b"a\r"), *splitter.feed(b"\nb\rc\n\nd"), *splitter.feed(b"\xc3")]
    out += [*splitter.feed(b"\xa9\n"), *splitter.flush()]
    assert out == ["a", "b", "c", "", "d\u00e9"]
    with pytest.raises(remote_limits.AnswerTooLargeError):
        splitter.feed(b"123456789")
