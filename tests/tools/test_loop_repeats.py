"""A model stuck on a tool call: the same call written again and again is stopped at the
first repeat (not after the answer's 2,048 tokens), the same call made again in a turn is not
asked about twice (the "must call a tool first" rule binds the first step only), and the chat
hears when a call is being written (it is held back until complete)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from app.engine.types import (
    ChatRequest,
    Delta,
    Finished,
    FinishReason,
    Request,
    Started,
    Usage,
)
from app.engine.worker import Job
from app.tools.config import McpConfig
from app.tools.loop import LoopHooks, ToolLoop
from app.tools.manager import ToolManager
from app.tools.repeats import RepeatWatch, call_key
from tests.helpers.mcp_config import sdk_server
from tests.helpers.scripted_engine import ScriptedEngine, call_text
from tests.helpers.tool_loop import QUESTION, Asker, calls_made, make_loop

ECHO = call_text("echo", '{"text": "hi"}')
MAX_PIECES = 2048


class StuckEngine:
    """The first answer writes ``ECHO`` again and again, a few characters at a time, until
    it is cancelled or has written MAX_PIECES pieces (the answer's limit); then ``answers``."""

    def __init__(self, *answers: str) -> None:
        self.scripted = ScriptedEngine(list(answers))
        self.requests: list[ChatRequest] = []
        self.pieces = 0
        self.cancelled_by_loop = threading.Event()

    def submit(self, request: Request) -> Job:
        assert isinstance(request, ChatRequest)
        self.requests.append(request)
        if len(self.requests) > 1:
            return self.scripted.submit(request)
        job = Job(request)
        job.emit(Started(job.id))
        threading.Thread(target=self._write, args=(job,), daemon=True).start()
        return job

    def _write(self, job: Job) -> None:
        text = (ECHO + "\n") * 400
        while self.pieces < MAX_PIECES and not job.cancelled.is_set():
            at = self.pieces * 7 % len(text)
            job.emit(Delta(job.id, text[at : at + 7]))
            self.pieces += 1
            time.sleep(0.0005)
        if job.cancelled.is_set():
            self.cancelled_by_loop.set()
        reason: FinishReason = "cancelled" if job.cancelled.is_set() else "length"
        job.finish(Finished(job.id, reason, Usage(10, self.pieces)))


def test_the_watch_sees_a_repeated_block_as_it_is_written() -> None:
    watch = RepeatWatch()
    text = f"Let me check. {ECHO}\n{ECHO}"
    seen = [watch.feed(c) for c in text]
    assert seen[-1] and not any(seen[:-1])
    assert watch.raw[: watch.cut].endswith(ECHO) and watch.raw[: watch.cut].count(ECHO) == 1
    other = RepeatWatch()
    assert not other.feed(ECHO + call_text("echo", '{"text": "bye"}'))  # two different calls
    assert call_key("f", '{"a": 1, "b": 2}') == call_key("f", '{"b":2,"a":1}')


def test_a_call_written_again_and_again_stops_at_the_first_repeat(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = StuckEngine("I could not echo it.")
    asker = Asker("deny")
    writing: list[int] = []
    loop = ToolLoop(
        engine,
        manager,
        manager.toolbox(["t"]),
        LoopHooks(approve=asker, on_writing=lambda: writing.append(len(engine.requests))),
    )
    result = loop.run(QUESTION)
    assert engine.cancelled_by_loop.is_set() and engine.pieces < 100  # not 2,048 tokens
    assert len(asker.asked) == 1  # one card for the call, not one per copy
    assert [m["role"] for m in result.messages] == ["assistant", "tool", "assistant"]
    assert result.messages[1]["content"] == "Error: the user did not allow this call."
    assert result.answer == "I could not echo it." and not result.cancelled
    assert writing == [1]  # the chat heard that round 1 was writing a call


def test_the_same_call_again_is_not_asked_twice(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    forced = '{"name": "echo", "arguments": {"text": "hi"}}'
    engine = ScriptedEngine([forced, ECHO, "It said hi."])
    asker = Asker("once")
    result = make_loop(engine, manager, ["t"], asker, tool_choice="required").run(QUESTION)
    assert len(asker.asked) == 1  # the model's repeat of its forced call got no second card
    assert calls_made(markers) == ["echo", "echo"]  # allowed once: this same call runs again
    roles = [m["role"] for m in result.messages]
    assert roles == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert result.answer == "It said hi."
    assert engine.requests[1].sampling.json_schema is None  # the rule bound step one only


def test_a_denied_call_made_again_is_refused_without_asking(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine([ECHO, ECHO, "I will not."])
    asker = Asker("deny")
    result = make_loop(engine, manager, ["t"], asker).run(QUESTION)
    assert len(asker.asked) == 1 and calls_made(markers) == []
    assert "made it again: do not call it again" in str(result.messages[3]["content"])


def test_the_same_call_twice_in_one_answer_is_made_once(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine([ECHO + "\n" + ECHO.replace(": ", ":"), "Done."])
    asker = Asker("once")
    result = make_loop(engine, manager, ["t"], asker).run(QUESTION)
    assert len(result.messages[0]["tool_calls"]) == 1 and len(asker.asked) == 1
