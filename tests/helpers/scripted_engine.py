"""An engine that answers with canned texts (the real Job and events, no model): for the tool
loop's own logic. The real model drives the loop in test_loop_model.py."""

from __future__ import annotations

import threading

from app.engine.types import ChatRequest, Delta, Finished, Request, Started, Usage
from app.engine.worker import Job


class ScriptedEngine:
    """Each ``submit`` answers with the next text of ``answers``, streamed in two pieces (its
    usage counts a token per character), and keeps the request. ``hold`` makes an answer wait
    until it is cancelled."""

    def __init__(self, answers: list[str], hold: bool = False) -> None:
        self.answers = list(answers)
        self.requests: list[ChatRequest] = []
        self.hold = hold
        self.submitted = threading.Event()

    def submit(self, request: Request) -> Job:
        assert isinstance(request, ChatRequest)
        self.requests.append(request)
        job = Job(request)
        text = self.answers.pop(0) if self.answers else "done"
        self.submitted.set()
        if self.hold:
            job._on_cancel = self._cancelled
            job.emit(Started(job.id))
            return job
        job.emit(Started(job.id))
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            if piece:
                job.emit(Delta(job.id, piece))
        usage = Usage(prompt_tokens=100, completion_tokens=len(text))
        job.finish(Finished(job.id, "stop", usage=usage, result=text))
        return job

    @staticmethod
    def _cancelled(job: Job) -> None:
        job.finish(Finished(job.id, "cancelled"))


def call_text(name: str, arguments: str) -> str:
    """A call as a model following Ember's tool prompt writes it."""
    return f'<tool_call>{{"name": "{name}", "arguments": {arguments}}}</tool_call>'
