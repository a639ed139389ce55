"""The output parsers (reasoning, tool calls), the request log and error helpers, without a
model: text is fed in every possible split, as tokens would bring it."""

from __future__ import annotations

import json

import pytest

from app.engine.reasoning import prompt_opens_reasoning
from app.server import tools
from app.server.errors import from_validation_errors, param_path
from app.server.output import ChatOutput, Collected
from app.server.pieces import Piece
from app.server.requestlog import RequestLog, RequestRecord
from app.server.toolcalls import GENERIC, CallReader
from app.server.tools import ForcedCallParser, call_schema

TOOLS = frozenset({"get_weather", "get_time"})


def splits(text: str) -> list[list[str]]:
    """The text whole, one character at a time, and cut at every position."""
    out = [[text], list(text)]
    out += [[text[:i], text[i:]] for i in range(1, len(text))]
    return out


def run(output: ChatOutput, parts: list[str]) -> Collected:
    collected = Collected()
    for part in parts:
        collected.add(output.feed(part))
    collected.add(output.finish())
    return collected


@pytest.mark.parametrize("parts", splits("<think>Let me see.</think>\n\nIt is 4."))
def test_reasoning_split_in_any_chunking(parts: list[str]) -> None:
    c = run(ChatOutput(), parts)
    assert (c.reasoning, c.content) == ("Let me see.", "It is 4.")


def test_reasoning_when_the_prompt_opened_the_think_tag() -> None:
    c = run(ChatOutput(reasoning_open=True), ["\nHmm, ", "two.</th", "ink>Two."])
    assert (c.reasoning, c.content) == ("Hmm, two.", "Two.")
    unfinished = run(ChatOutput(reasoning_open=True), ["still thinking"])
    assert (unfinished.reasoning, unfinished.content) == ("still thinking", "")


def test_text_without_think_tags_is_content() -> None:
    for text in (" Hello", "<div>x</div>", "<thin", "A <think> in the middle"):
        c = run(ChatOutput(), list(text))
        assert c.content == text.lstrip() and c.reasoning == ""


def test_prompt_opens_reasoning_renders_the_template() -> None:
    opens = "{% for m in messages %}{{ m.content }}{% endfor %}<|assistant|><think>\n"
    closes = "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n\n</think>\n\n"
    assert prompt_opens_reasoning(opens)
    assert not prompt_opens_reasoning(closes)
    assert not prompt_opens_reasoning(None)
    assert not prompt_opens_reasoning("{{ raise_exception('no') }}<think>")


CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "note": "a \\"}\\" b"}}'


@pytest.mark.parametrize("parts", splits(CALL + " "))
def test_forced_call_streams_name_then_arguments(parts: list[str]) -> None:
    parser = ForcedCallParser()
    pieces = [p for part in parts for p in parser.feed(part)] + parser.finish()
    head, *rest = pieces
    assert head[0] == 0 and head[1] and head[1].startswith("call_")
    assert (head[2], head[3]) == ("get_weather", "")
    assert all(p[1] is None and p[2] is None for p in rest)
    arguments = "".join(p[3] for p in rest)
    assert json.loads(arguments) == {"city": "Paris", "note": 'a "}" b'}


def test_forced_call_cut_short_still_names_the_function() -> None:
    parser = ForcedCallParser()
    assert parser.feed('{"name": "get_ti') == []
    assert parser.feed('me", "argu') == []
    (head,) = parser.finish()
    assert head[2] == "get_time"


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
        '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
        '<|python_tag|>{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        '```json\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\n```',
    ],
)
def test_auto_mode_finds_calls_in_the_usual_formats(text: str) -> None:
    for parts in ([text], list(text)):
        c = run(ChatOutput(tool_mode="auto", tool_names=TOOLS), parts)
        assert c.content == ""
        assert c.calls is not None and len(c.calls) == 1
        assert c.calls[0]["name"] == "get_weather"
        assert json.loads(c.calls[0]["arguments"]) == {"city": "Oslo"}


def test_auto_mode_text_then_several_calls() -> None:
    text = (
        "Let me check. <tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>\n'
        '<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>'
    )
    output = ChatOutput(tool_mode="auto", tool_names=TOOLS)
    c = run(output, list(text))
    assert c.content == "Let me check. "
    assert [call["name"] for call in (c.calls or [])] == ["get_weather", "get_time"]
    assert output.tool_calls == 2
    ids = {call["id"] for call in c.calls or []}
    assert len(ids) == 2 and all(i.startswith("call_") for i in ids)


def test_auto_mode_leaves_non_calls_as_content() -> None:
    for text in (
        "The weather is fine.",
        '{"answer": 42}',
        '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',
        "<tool_call>not json",
    ):
        c = run(ChatOutput(tool_mode="auto", tool_names=TOOLS), list(text))
        assert c.content == text and c.calls is None


def test_auto_reader_streams_plain_text_without_waiting() -> None:
    reader = CallReader(GENERIC, dict.fromkeys(TOOLS))
    assert [p.text for p in reader.feed("Hello")] == ["Hello"]
    assert [p.text for p in reader.feed(" <tool")] == [" "]  # holds what may start a marker
    assert [p.text for p in reader.feed("box>")] == ["<toolbox>"]


def test_a_bare_call_of_an_unknown_tool_is_content_and_text_after_a_call_stays() -> None:
    unknown = '{"name": "nope", "arguments": {}}'
    c = run(ChatOutput(tool_mode="auto", tool_names=TOOLS), [unknown])
    assert (c.content, c.calls) == (unknown, None)
    c = run(ChatOutput(tool_mode="auto", tool_names=TOOLS), ['{"name": "get_time"} trailing'])
    assert c.calls is not None
    assert c.calls == [{"id": c.calls[0]["id"], "name": "get_time", "arguments": "{}"}]
    assert c.content == "trailing"


def test_call_schema_pins_names_and_closes_arguments() -> None:
    one = call_schema([{"name": "f", "parameters": {"type": "object", "properties": {}}}])
    assert one["properties"]["name"] == {"const": "f"}
    assert one["properties"]["arguments"]["additionalProperties"] is False
    assert len(call_schema([{"name": "f"}, {"name": "g"}])["anyOf"]) == 2


def test_tool_pieces_become_openai_deltas() -> None:
    from app.server.shapes import piece_delta

    head = piece_delta(Piece("tool", "", 0, "call_x", "f"))
    assert head == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_x",
                "type": "function",
                "function": {"name": "f", "arguments": ""},
            }
        ]
    }
    more = piece_delta(Piece("tool", '{"a"', 0))
    assert more == {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]}


def test_request_log_ring_buffer_and_subscribers() -> None:
    log = RequestLog(capacity=3)
    seen: list[RequestRecord] = []
    unsubscribe = log.subscribe(seen.append)

    def record(i: int) -> RequestRecord:
        return RequestRecord(
            i, 0.0, "GET", "/v1/models", 200, 0.1, None, None, None, False, None, "", "", None
        )

    for i in range(5):
        log.append(record(i))
    assert [r.id for r in log.records()] == [2, 3, 4]
    assert [r.id for r in seen] == [0, 1, 2, 3, 4]
    unsubscribe()
    log.append(record(5))
    assert len(seen) == 5


def test_request_log_file(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "logs" / "requests.jsonl"
    log = RequestLog(file=path)
    log.append(
        RequestRecord(1, 1.0, "POST", "/v1/x", 400, 0.1, "m", 1, 2, True, None, "{}", "{}", "bad")
    )
    (line,) = path.read_text().splitlines()
    assert json.loads(line)["error"] == "bad"


def test_param_paths_and_validation_messages() -> None:
    assert param_path(("body", "messages", 0, "role")) == "messages[0].role"
    assert param_path(("stop", "list[str]", 2)) == "stop[2]"
    error = from_validation_errors([{"type": "missing", "loc": ("body", "model"), "msg": "x"}])
    assert (error.status, error.param, error.code) == (400, "model", "missing_required_parameter")


def test_a_forced_call_without_a_head_is_read_in_bounded_work() -> None:
    """Issue 26: a head matched again and again in a growing buffer was quadratic."""
    parser = ForcedCallParser()
    for _ in range(20000):
        assert parser.feed(" ") == []
    assert len(parser._buf) <= tools.FORCED_HEAD_CAP + 1
    assert parser.finish() == []
