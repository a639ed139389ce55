"""What a server instance needs to know: where to bind, whom to let in, how patient to be."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.engine.gguf_format import MIB

if TYPE_CHECKING:
    from app.config import Settings

DEFAULT_HOST = "127.0.0.1"
# 8434 collides with none of Ollama (11434), LM Studio (1234), Jan (1337), GPT4All (4891),
# llama-server/llamafile/LocalAI (8080), vLLM (8000), text-generation-webui (5000, 7860),
# koboldcpp (5001) or SGLang (30000).
DEFAULT_PORT = 8434
# Fetch http(s) image URLs in chat requests: off unless the user turns it on (Settings or
# `ember serve --image-urls`), as the server would then reach any address a client names.
IMAGE_URLS_KEY = "server.image_urls"
# ... and from this computer and local networks too (loopback, private, link-local addresses):
# off unless the user turns it on (`ember serve --image-urls-local`).
IMAGE_URLS_LOCAL_KEY = "server.image_urls_local"
MODEL_ALIASES_KEY = "server.model_aliases"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Settings of one server run. ``port=0`` picks a free port (tests)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str = ""  # empty: no key (allowed on loopback only)
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()  # extra Host names accepted on a loopback bind
    # room for one image of the engine's 20 MiB cap as a base64 data URL (about 27 MiB)
    max_body_bytes: int = 32 * MIB
    graceful_timeout: float = 3.0  # seconds open connections get to finish when stopping
    log_file: Path | None = None  # also append the request log here (JSON lines)
    log_body_chars: int = 4000  # request/response bodies kept per log entry
    image_urls: bool = False  # fetch http(s) ``image_url`` parts (off: data URLs only)
    image_urls_local: bool = False  # ... from local addresses too (off: public ones only)
    # model names a client may send (e.g. "claude-sonnet-4-5", or "claude-*" for any name that
    # starts so) -> the model each one means (see app/server/aliases.py)
    model_aliases: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: object) -> ServerConfig:
        config = cls(
            host=settings.get("server.host") or DEFAULT_HOST,
            port=int(settings.get("server.port")),
            api_key=settings.get("server.api_key") or "",
            cors_origins=tuple(str(o) for o in settings.get("server.cors_origins")),
            image_urls=image_urls_allowed(settings),
            image_urls_local=bool(settings.get(IMAGE_URLS_LOCAL_KEY)),
            model_aliases=aliases_of(settings),
        )
        return replace(config, **overrides)  # type: ignore[arg-type]


def image_urls_allowed(settings: Settings) -> bool:
    """Whether the user allowed http(s) image URLs (off unless set)."""
    return bool(settings.get(IMAGE_URLS_KEY))


def allow_image_urls(settings: Settings, on: bool) -> None:
    settings.set(IMAGE_URLS_KEY, bool(on))


def aliases_of(settings: Settings) -> tuple[tuple[str, str], ...]:
    """The ``server.model_aliases`` setting as (name, model) pairs (bad entries left out)."""
    raw = settings.get(MODEL_ALIASES_KEY)
    return tuple(
        (str(k).strip(), v.strip())
        for k, v in raw.items()
        if isinstance(v, str) and str(k).strip() and v.strip()
    )
