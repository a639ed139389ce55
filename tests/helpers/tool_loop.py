"""A tool loop over the scripted engine and the MCP test servers: a question, an asker that answers
approvals, and the calls the servers saw."""

from __future__ import annotations

from pathlib import Path

from app.engine.types import ChatMessage
from app.tools.loop import Decision, LoopHooks, ToolCall, ToolLoop
from app.tools.manager import ToolManager
from tests.helpers.scripted_engine import ScriptedEngine

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
