"""How an engine job's text becomes Anthropic's answer: a ``message`` object, or the stream of
events Anthropic sends, in its order::

    message_start, ping,
    (content_block_start, content_block_delta..., content_block_stop) per block,
    message_delta (stop_reason, stop_sequence, usage), message_stop

Blocks follow the pieces :func:`app.server.convert.chat_output` finds: reasoning is a
``thinking`` block (``thinking_delta``), text a ``text`` block (``text_delta``), each tool call
a ``tool_use`` block (``input_json_delta``). A stream waiting in the queue gets ``ping``
events; a failure after the headers an ``error`` event.
"""

from __future__ import annotations

import json
import secrets
import string
from typing import Any

from app.engine.types import Finished, Usage
from app.server import convert
from app.server.answering import Answer
from app.server.errors import APIError
from app.server.output import Collected
from app.server.pieces import Piece
from app.server.protocols import anthropic_error

_ALPHABET = string.ascii_letters + string.digits
PING = b'event: ping\ndata: {"type": "ping"}\n\n'


def new_id(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(24))


def tool_use_id(call_id: str) -> str:
    """Anthropic's id for a call the engine path named ``call_...``."""
    return "toolu_" + call_id.removeprefix("call_")


def event(name: str, data: dict[str, Any]) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


def usage(final: Usage) -> dict[str, int]:
    """Anthropic counts tokens read from the cache apart from the other input tokens."""
    return {
        "input_tokens": final.prompt_tokens - final.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": final.cached_tokens,
        "output_tokens": final.completion_tokens,
    }


class MessagesAnswer(Answer):
    """One answer of ``POST /v1/messages``. ``model``: the name the client sent."""

    def __init__(self, model: str, plan: convert.ChatPlan, stop_sequences: list[str]) -> None:
        self.model = model
        self.id = new_id("msg_")
        self.stops = stop_sequences
        self.output = convert.chat_output(plan)
        self.index = -1  # the open block's index (-1: none yet)
        self.open: tuple[str, int] | None = None  # the open block's kind and tool call index

    # -- streaming ------------------------------------------------------------------------

    def opening(self) -> list[bytes]:
        start = {**self._message([]), "usage": {"input_tokens": 0, "output_tokens": 0}}
        return [event("message_start", {"type": "message_start", "message": start}), PING]

    def delta(self, text: str) -> list[bytes]:
        return self._frames(self.output.feed(text))

    def finish(self, final: Finished) -> list[bytes]:
        frames = self._frames(self.output.finish())
        frames += self._close()
        reason, stop = self.stop_reason(final)
        delta = {"stop_reason": reason, "stop_sequence": stop}
        body = {"type": "message_delta", "delta": delta, "usage": usage(final.usage)}
        stop_event = event("message_stop", {"type": "message_stop"})
        return [*frames, event("message_delta", body), stop_event]

    def error(self, error: APIError) -> bytes:
        return event("error", anthropic_error(error.status, error.message))

    def keepalive(self) -> bytes:
        return PING

    def _frames(self, pieces: list[Piece]) -> list[bytes]:
        frames: list[bytes] = []
        for p in pieces:
            if p.kind == "tool":
                if p.id is not None:  # a call's first piece
                    frames += self._start(("tool", p.index), self._tool_block(p))
                if p.text:
                    frames.append(self._delta({"type": "input_json_delta", "partial_json": p.text}))
            elif not p.text:
                continue
            elif p.kind == "reasoning":
                if self.open != ("thinking", 0):
                    block = {"type": "thinking", "thinking": "", "signature": ""}
                    frames += self._start(("thinking", 0), block)
                frames.append(self._delta({"type": "thinking_delta", "thinking": p.text}))
            else:
                if self.open != ("text", 0):
                    frames += self._start(("text", 0), {"type": "text", "text": ""})
                frames.append(self._delta({"type": "text_delta", "text": p.text}))
        return frames

    def _start(self, kind: tuple[str, int], block: dict[str, Any]) -> list[bytes]:
        frames = self._close()
        self.index += 1
        self.open = kind
        start = {"type": "content_block_start", "index": self.index, "content_block": block}
        return [*frames, event("content_block_start", start)]

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        return [event("content_block_stop", {"type": "content_block_stop", "index": self.index})]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        body = {"type": "content_block_delta", "index": self.index, "delta": delta}
        return event("content_block_delta", body)

    @staticmethod
    def _tool_block(p: Piece) -> dict[str, Any]:
        call_id = tool_use_id(p.id or "")
        return {"type": "tool_use", "id": call_id, "name": p.name or "", "input": {}}

    # -- whole ----------------------------------------------------------------------------

    def whole(self, texts: list[str], final: Finished) -> dict[str, Any]:
        collected = Collected()
        for text in texts:
            collected.add(self.output.feed(text))
        collected.add(self.output.finish())
        content: list[dict[str, Any]] = []
        if collected.reasoning:
            content.append({"type": "thinking", "thinking": collected.reasoning, "signature": ""})
        if collected.content or not collected.calls:
            content.append({"type": "text", "text": collected.content})
        for call in collected.calls or []:
            block = {"type": "tool_use", "id": tool_use_id(call["id"]), "name": call["name"]}
            content.append({**block, "input": _arguments(call["arguments"])})
        reason, stop = self.stop_reason(final)
        message = {**self._message(content), "stop_reason": reason, "stop_sequence": stop}
        return {**message, "usage": usage(final.usage)}

    def _message(self, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
        }

    def stop_reason(self, final: Finished) -> tuple[str, str | None]:
        """Why the answer ended, in Anthropic's words (after output.finish(), which may end
        a call), and the client's stop sequence that ended it."""
        if final.reason == "length":
            return "max_tokens", None
        if self.output.tool_calls:
            return "tool_use", None
        if final.stop_sequence is not None and final.stop_sequence in self.stops:
            return "stop_sequence", final.stop_sequence
        return "end_turn", None


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
        return {}
    return value if isinstance(value, dict) else {}
