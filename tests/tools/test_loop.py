"""The tool-calling loop: approve once, always, deny, errors, the round limit, cancel; against
the real SDK-written test server (stdio) and mcp-server-time, with a scripted engine."""

from __future__ import annotations

import threading
from pathlib import Path

from app.engine.types import ChatMessage
from app.tools.choices import Decision
from app.tools.config import McpConfig
from app.tools.loop import LoopHooks, ToolCall, ToolLoop
from app.tools.manager import ToolManager
from tests.tools.conftest import sdk_server, time_server, wait_for_file
from tests.tools.scripted import ScriptedEngine, call_text

QUESTION: list[ChatMessage] = [{"role": "user", "content": "Say hi through echo."}]


class Asker:
    """Answers approval questions from a list, and records them."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[ToolCall] = []

    def __call__(self, call: ToolCall) -> Decision:
        self.asked.append(call)
        return self.answers.pop(0)


def make_loop(
    engine: ScriptedEngine, manager: ToolManager, servers: list[str], asker: Asker, **kw: object
) -> ToolLoop:
    return ToolLoop(
        engine,
        manager,
        manager.toolbox(servers),
        LoopHooks(approve=asker),
        **kw,  # type: ignore[arg-type]
    )


def calls_made(markers: Path) -> list[str]:
    path = markers / "calls"
    return path.read_text().split() if path.exists() else []


def test_allow_once_runs_the_call_and_the_model_answers_with_its_result(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine([call_text("echo", '{"text": "hi there"}'), "It said hi there."])
    asker = Asker("once")
    result = make_loop(engine, manager, ["t"], asker).run(QUESTION)
    assert [m["role"] for m in result.messages] == ["assistant", "tool", "assistant"]
    call = result.messages[0]["tool_calls"][0]
    assert call["function"] == {"name": "echo", "arguments": '{"text": "hi there"}'}
    assert result.messages[1] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "name": "echo",
        "content": "hi there",
    }
    assert result.answer == "It said hi there."
    assert [c.pretty_arguments() for c in asker.asked] == ['{\n  "text": "hi there"\n}']
    # The second round saw the call and its result; the model's template has none, so both
    # are written out and the tools are described in a system message.
    second = engine.requests[1].messages
    assert second[0]["role"] == "system" and "echo" in (second[0]["content"] or "")
    assert "<tool_call>" in (second[-2]["content"] or "")
    assert second[-1] == {**result.messages[1]}
    assert not config.get("t").always_allow


def test_deny_runs_nothing_and_tells_the_model(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine([call_text("echo", '{"text": "x"}'), "Alright."])
    result = make_loop(engine, manager, ["t"], Asker("deny")).run(QUESTION)
    assert result.messages[1]["content"] == "Error: the user did not allow this call."
    assert calls_made(markers) == []
    assert result.answer == "Alright."


def test_always_allow_asks_once_and_is_remembered(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine(
        [call_text("echo", '{"text": "1"}'), call_text("echo", '{"text": "2"}'), "Done."]
    )
    asker = Asker("always")
    result = make_loop(engine, manager, ["t"], asker).run(QUESTION)
    assert len(asker.asked) == 1
    assert calls_made(markers) == ["echo", "echo"]
    assert config.get("t").always_allow == {"echo"}
    assert McpConfig(config.path).get("t").always_allow == {"echo"}  # saved
    assert result.answer == "Done."


def test_a_tool_error_goes_back_to_the_model(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine([call_text("fail", '{"reason": "nope"}'), "It failed."])
    result = make_loop(engine, manager, ["t"], Asker("once")).run(QUESTION)
    assert "it broke: nope" in (result.messages[1]["content"] or "")
    assert result.calls[0].output is not None and result.calls[0].output.is_error


def test_a_timeout_and_a_crash_become_results_the_model_reads(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine([call_text("hang", "{}"), call_text("crash", "{}"), "Oh well."])
    loop = make_loop(engine, manager, ["t"], Asker("once", "once"), timeout=1.0)
    result = loop.run(QUESTION)
    contents = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "did not answer within 1 s and was cancelled" in (contents[0] or "")
    assert "stopped during the call" in (contents[1] or "")
    assert result.answer == "Oh well."


def test_bad_arguments_are_refused_without_asking(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine(['<tool_call>{"name": "echo", "arguments": "[1"}</tool_call>', "ok"])
    asker = Asker()
    result = make_loop(engine, manager, ["t"], asker).run(QUESTION)
    assert "not a JSON object" in (result.messages[1]["content"] or "")
    assert asker.asked == [] and calls_made(markers) == []


def test_a_call_of_a_tool_not_offered_is_only_text(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    config.set_tool_enabled("t", "crash", False)
    engine = ScriptedEngine([call_text("crash", "{}")])
    asker = Asker()
    result = make_loop(engine, manager, ["t"], asker).run(QUESTION)
    assert result.answer == call_text("crash", "{}")
    assert asker.asked == [] and calls_made(markers) == []


def test_the_round_limit_ends_with_an_answer_without_tools(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    config.set_always_allow("t", "echo", True)
    engine = ScriptedEngine([call_text("echo", '{"text": "again"}')] * 3 + ["Enough."])
    result = make_loop(engine, manager, ["t"], Asker(), max_rounds=3).run(QUESTION)
    assert calls_made(markers) == ["echo"] * 3
    assert result.answer == "Enough."
    assert engine.requests[3].tools is None
    assert engine.requests[3].messages[0]["role"] == "user"  # no tool prompt either


def test_disabled_tools_and_servers_are_not_offered(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    config.add(time_server())
    config.set_tool_enabled("t", "crash", False)
    config.update("time", enabled=False)
    box = manager.toolbox(["t", "time"])
    assert "crash" not in box.route and "echo" in box.route
    assert "get_current_time" not in box.route


def test_required_forces_the_first_round_only(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine(['{"name": "echo", "arguments": {"text": "forced"}}', "Answer."])
    result = make_loop(engine, manager, ["t"], Asker("once"), tool_choice="required").run(QUESTION)
    assert engine.requests[0].sampling.json_schema is not None
    assert engine.requests[1].sampling.json_schema is None
    assert result.messages[1]["content"] == "forced"


def test_cancel_stops_a_running_call(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine([call_text("hang", "{}"), "never asked"])
    loop = make_loop(engine, manager, ["t"], Asker("once"))
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(loop.run(QUESTION)))
    thread.start()
    wait_for_file(markers / "hang")
    loop.control.cancel()
    thread.join()
    result = done[0]
    assert result.cancelled  # type: ignore[attr-defined]
    assert result.messages[-1]["content"] == "Error: the user cancelled this call."  # type: ignore[attr-defined]
    assert len(engine.requests) == 1  # no round after the cancel


def test_cancel_stops_an_answer_being_written(config: McpConfig, manager: ToolManager) -> None:
    engine = ScriptedEngine([], hold=True)
    loop = ToolLoop(engine, manager, manager.toolbox([]), LoopHooks(approve=Asker()))
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(loop.run(QUESTION)))
    thread.start()
    engine.submitted.wait()
    loop.control.cancel()
    thread.join()
    assert done[0].cancelled  # type: ignore[attr-defined]


def test_a_chat_can_leave_out_single_tools(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    config.add(sdk_server("t", markers))
    box = manager.toolbox(["t"], exclude=["t/crash", "t/flood", "other/echo"])
    assert "crash" not in box.route and "flood" not in box.route
    assert "echo" in box.route
    assert [t.name for t in manager.known_tools("t") or []][:1] == ["echo"]


def test_a_model_family_s_own_call_format_runs_and_renders_back(
    config: McpConfig, manager: ToolManager, markers: Path
) -> None:
    """Devstral writes ``[TOOL_CALLS]NAME[ARGS]{…}``: the loop reads it, constrains it with
    the family's lazy grammar, and gives the call back to its template in the shape it takes
    (Mistral's nine-character ids)."""
    from app.engine.templates import ChatTemplate
    from tests.helpers.sdist_templates import template

    source = template("unsloth-mistral-Devstral-Small-2507")
    config.add(sdk_server("t", markers))
    engine = ScriptedEngine(['[TOOL_CALLS]echo[ARGS]{"text": "hi there"}', "It said hi there."])
    result = make_loop(engine, manager, ["t"], Asker("once"), chat_template=source).run(QUESTION)
    assert result.answer == "It said hi there."
    assert result.messages[0]["tool_calls"][0]["function"]["name"] == "echo"
    first, second = engine.requests
    assert first.sampling.grammar_triggers == (r"\[TOOL_CALLS\]",)
    assert first.sampling.grammar is not None and '"echo"' in first.sampling.grammar
    [call] = second.messages[-2]["tool_calls"]
    assert len(call["id"]) == 9 and call["id"].isalnum()
    assert second.messages[-1]["tool_call_id"] == call["id"]
    rendered = ChatTemplate(source).render(second.messages, tools=second.tools).text
    assert '[TOOL_CALLS]echo[ARGS]{"text": "hi there"}' in rendered
