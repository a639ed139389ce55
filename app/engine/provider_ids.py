"""Provider names, presets and remote model ids (``provider::model``): plain data, no I/O.

See :mod:`app.engine.providers` for what a remote id is and where it is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REMOTE_ID_SEPARATOR = "::"
_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_NAME_MAX = 40


# ---- presets --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    label: str
    base_url: str
    llama_extras: bool = True  # accepts top_k, min_p, … beyond OpenAI's fields
    needs_key: bool = False


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("vllm", "vLLM", "http://localhost:8000/v1"),
        Preset("sglang", "SGLang", "http://localhost:30000/v1"),
        Preset("tgi", "Text Generation Inference", "http://localhost:8080/v1"),
        Preset("ollama", "Ollama", "http://localhost:11434/v1"),
        Preset("lmstudio", "LM Studio", "http://localhost:1234/v1"),
        Preset("llama-server", "llama.cpp server", "http://localhost:8080/v1"),
        Preset("openai", "OpenAI", "https://api.openai.com/v1", llama_extras=False, needs_key=True),
    )
}


# ---- remote model ids ------------------------------------------------------------------------


def validate_provider_name(name: str) -> str:
    if len(name) > _NAME_MAX or not _NAME_RE.match(name):
        raise ValueError(
            f"{name!r} is not a valid provider name: use lowercase letters, digits and single "
            f"dashes, up to {_NAME_MAX} characters (like gpu-box)."
        )
    return name


@dataclass(frozen=True, slots=True)
class RemoteModelId:
    """``provider::model``: a model served by a provider."""

    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}{REMOTE_ID_SEPARATOR}{self.model}"


def parse_remote_id(text: str) -> RemoteModelId | None:
    """The remote id in ``text``, or None when it is not one (a path, a Hub id, a local name)."""
    provider, sep, model = text.partition(REMOTE_ID_SEPARATOR)
    if not sep or not model or not _NAME_RE.match(provider) or len(provider) > _NAME_MAX:
        return None
    return RemoteModelId(provider, model)


def is_remote_id(text: str | None) -> bool:
    return text is not None and parse_remote_id(text) is not None


def format_remote_id(provider: str, model: str) -> str:
    validate_provider_name(provider)
    if not model:
        raise ValueError("A remote model id needs a model name after the provider.")
    return str(RemoteModelId(provider, model))
