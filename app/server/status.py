"""The API server's state as its callers see it, without importing the server (FastAPI and
uvicorn are imported only when a server is actually built: the app starts faster)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["stopped", "starting", "running", "stopping", "failed"]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    state: State
    host: str
    port: int | None  # the bound port while running
    error: str | None = None  # why the server failed or could not start

    @property
    def base_url(self) -> str | None:
        """``http://127.0.0.1:8434/v1``: what OpenAI clients take as their base URL."""
        if self.port is None:
            return None
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        if self.host == "::":
            host = "[::1]"
        return f"http://{host}:{self.port}/v1"


class ServerStartError(Exception):
    """The server could not start; the message is one line a user can act on."""


class PortInUseError(ServerStartError):
    pass
