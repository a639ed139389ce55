"""Sampling presets and the conversion between settings dicts and ``SamplingParams``.

A conversation's settings (``Conversation.settings``, a JSON object owned by the GUI) hold
``{"preset": name, "sampling": {field: value}}``. Fields missing there fall back to the global
defaults from the Settings dialog, then to ``SamplingParams``'s own defaults.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from app.config import SETTINGS, Settings
from app.engine.types import SamplingParams

CUSTOM = "Custom"
# A new chat's answer length, from the settings registry (0 there means "Unlimited"). A cap
# stops a rambling model long before the context is full: Jan caps answers at 2,048 tokens by
# default, GPT4All at 4,096; 2,048 is about 1,500 words or 200 lines of code, and leaves three
# quarters of the usual 8,192-token context to the conversation (the answer's room is reserved).
DEFAULT_MAX_TOKENS: int = SETTINGS["sampling.max_tokens"].default

PRESETS: dict[str, dict[str, Any]] = {
    "Precise": {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 20,
        "min_p": 0.1,
        "repeat_penalty": 1.05,
    },
    # The engine's own defaults (llama.cpp's), which the settings registry starts from too.
    "Balanced": {
        name: getattr(SamplingParams(), name)
        for name in ("temperature", "top_p", "top_k", "min_p", "repeat_penalty")
    },
    "Creative": {
        "temperature": 1.1,
        "top_p": 0.98,
        "top_k": 80,
        "min_p": 0.02,
        "repeat_penalty": 1.0,
    },
}

PRESET_DESCRIPTIONS = {
    "Precise": "Focused and repeatable: facts, code, extraction.",
    "Balanced": "A good default for conversation.",
    "Creative": "More varied wording: brainstorming, stories.",
    CUSTOM: "Your own values.",
}


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    label: str
    kind: str  # float, int, optional_int, text, lines, json
    minimum: float = 0.0
    maximum: float = 0.0
    step: float = 0.0
    help: str = ""
    advanced: bool = False


FIELDS: tuple[Field, ...] = (
    Field("temperature", "Temperature", "float", 0.0, 2.0, 0.05, "Higher is more random."),
    Field(
        "top_p", "Top P", "float", 0.0, 1.0, 0.01, "Keep the most likely tokens up to this mass."
    ),
    Field("top_k", "Top K", "int", 0, 1000, 1, "Keep this many most likely tokens (0: all)."),
    Field("min_p", "Min P", "float", 0.0, 1.0, 0.01, "Drop tokens below this share of the best."),
    Field(
        "repeat_penalty", "Repeat penalty", "float", 0.5, 2.0, 0.01, "Above 1 discourages repeats."
    ),
    Field(
        "max_tokens",
        "Max answer length",
        "optional_int",
        0,
        1_000_000,
        16,
        "In tokens (about ¾ of a word each). Unlimited lets a long answer run until the "
        "context is full.",
    ),
    Field("typical_p", "Typical P", "float", 0.0, 1.0, 0.01, "Locally typical sampling.", True),
    Field(
        "repeat_last_n", "Repeat window", "int", 0, 8192, 8, "Tokens the penalty looks at.", True
    ),
    Field("presence_penalty", "Presence penalty", "float", -2.0, 2.0, 0.05, "", True),
    Field("frequency_penalty", "Frequency penalty", "float", -2.0, 2.0, 0.05, "", True),
    Field("seed", "Seed", "optional_int", -1, 2**31 - 1, 1, "-1: a new seed each time.", True),
    Field("mirostat_mode", "Mirostat", "int", 0, 2, 1, "0 off, 1 or 2 on.", True),
    Field("mirostat_tau", "Mirostat tau", "float", 0.0, 20.0, 0.1, "", True),
    Field("mirostat_eta", "Mirostat eta", "float", 0.0, 1.0, 0.01, "", True),
    Field(
        "stop", "Stop strings", "lines", help="One per line; the answer ends there.", advanced=True
    ),
    Field("logit_bias", "Logit bias", "json", help='JSON: {"token id": bias}', advanced=True),
    Field("grammar", "Grammar (GBNF)", "text", help="Constrain the output.", advanced=True),
    Field("json_schema", "JSON schema", "json", help="Answer as JSON matching it.", advanced=True),
)

FIELD_NAMES = tuple(f.name for f in FIELDS)
_DEFAULTS = SamplingParams()

_SETTING_KEYS = {
    "temperature": "sampling.temperature",
    "top_p": "sampling.top_p",
    "top_k": "sampling.top_k",
    "min_p": "sampling.min_p",
    "repeat_penalty": "sampling.repeat_penalty",
    "max_tokens": "sampling.max_tokens",
}


def global_defaults(settings: Settings) -> dict[str, Any]:
    """The sampling values new conversations start from (from the Settings dialog)."""
    values = default_values()
    for name, key in _SETTING_KEYS.items():
        values[name] = settings.get(key)
    return values


def default_values() -> dict[str, Any]:
    """Every field at SamplingParams's defaults, in the JSON shape stored per conversation;
    the answer length at a chat's default (the API's own default stays unlimited)."""
    values: dict[str, Any] = {}
    for f in FIELDS:
        value = getattr(_DEFAULTS, f.name)
        values[f.name] = _to_json(f, value)
    values["max_tokens"] = DEFAULT_MAX_TOKENS
    return values


def _to_json(f: Field, value: Any) -> Any:
    if f.kind == "optional_int":
        return 0 if value is None and f.name == "max_tokens" else -1 if value is None else value
    if f.kind == "lines":
        return list(value or ())
    if f.name == "logit_bias" and value:
        return {str(k): v for k, v in value.items()}
    return value


def preset_matching(values: dict[str, Any]) -> str:
    for name, preset in PRESETS.items():
        if all(values.get(k) == v for k, v in preset.items()):
            return name
    return CUSTOM


def to_sampling_params(values: dict[str, Any]) -> SamplingParams:
    """A SamplingParams from stored values; unknown or malformed fields keep defaults."""
    kwargs: dict[str, Any] = {}
    for f in FIELDS:
        if f.name not in values:
            continue
        try:
            kwargs[f.name] = _from_json(f, values[f.name])
        except (TypeError, ValueError):
            continue
    return dataclasses.replace(_DEFAULTS, **kwargs)


def _from_json(f: Field, value: Any) -> Any:
    if f.kind == "float":
        return float(value)
    if f.kind == "int":
        return int(value)
    if f.kind == "optional_int":
        number = int(value)
        return None if number < 0 or (f.name == "max_tokens" and number == 0) else number
    if f.kind == "lines":
        return tuple(str(s) for s in value if str(s))
    if f.kind == "text":
        return str(value) if value else None
    if f.kind == "json":
        if value in (None, "", {}):
            return None
        data = json.loads(value) if isinstance(value, str) else value
        if f.name == "logit_bias":
            return {int(k): float(v) for k, v in dict(data).items()}
        return dict(data)
    return value


def conversation_values(settings_blob: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The full set of sampling values of a conversation."""
    stored = settings_blob.get("sampling")
    values = dict(defaults)
    if isinstance(stored, dict):
        values.update({k: v for k, v in stored.items() if k in FIELD_NAMES})
    return values
