"""How to point each coding agent and editor at Ember, generated from the server's real
address, key and model: Claude Code (Anthropic's API), Codex (OpenAI's Responses API),
Continue, Cline, Zed, opencode and aider (chat completions). ``ember serve --clients`` prints
them; the Server page shows them under "Connect a client".

Pure functions, no Qt. ``root`` is the server's root URL (no ``/v1``); ``key`` the API key as
the snippet should show it (empty: none is required, so a placeholder the server ignores;
``$EMBER_API_KEY``: the shell variable, so a printed snippet does not show the key).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PLACEHOLDER_MODEL = "MODEL_ID"
NO_KEY = "ember"  # clients insist on a key; Ember ignores it when none is set
KEY_VARIABLE = "EMBER_API_KEY"  # where the snippets that read a variable find the key


@dataclass(frozen=True, slots=True)
class Client:
    name: str
    language: str  # for highlighting
    code: str


def claude_code(root: str, model: str, key: str) -> str:
    lines = [
        "# Claude Code, through Ember's Anthropic Messages API",
        f"export ANTHROPIC_BASE_URL={root}",
        f"export ANTHROPIC_AUTH_TOKEN={key or NO_KEY}",
        f"export ANTHROPIC_MODEL={model}",
        "# the models Claude Code picks for quick and for heavy work: the same one here",
        f"export ANTHROPIC_DEFAULT_HAIKU_MODEL={model}",
        f"export ANTHROPIC_DEFAULT_SONNET_MODEL={model}",
        f"export ANTHROPIC_DEFAULT_OPUS_MODEL={model}",
        "export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
        "claude",
    ]
    return "\n".join(lines)


def codex(root: str, model: str, key: str) -> str:
    lines = [
        "# ~/.codex/config.toml (Codex speaks the Responses API)",
        f"model = {json.dumps(model)}",
        'model_provider = "ember"',
        "",
        "[model_providers.ember]",
        'name = "Ember"',
        f'base_url = "{root}/v1"',
        'wire_api = "responses"',
    ]
    if key:
        lines.append(f'env_key = "{KEY_VARIABLE}"{_export_note(key, "  # ")}')
    return "\n".join(lines)


def continue_config(root: str, model: str, key: str) -> str:
    lines = [
        "# ~/.continue/config.yaml",
        "name: Local assistant",
        "version: 1.0.0",
        "schema: v1",
        "models:",
        f"  - name: {model} (Ember)",
        "    provider: openai",
        f"    model: {model}",
        f"    apiBase: {root}/v1",
    ]
    if key:
        lines.append(f"    apiKey: {key}")
    lines += ["    roles:", "      - chat", "      - edit", "      - apply"]
    return "\n".join(lines)


def cline(root: str, model: str, key: str) -> str:
    return "\n".join(
        [
            "# Cline: Settings (gear icon) > API Configuration",
            "API Provider:  OpenAI Compatible",
            f"Base URL:      {root}/v1",
            f"API Key:       {key or NO_KEY}",
            f"Model ID:      {model}",
        ]
    )


def zed(root: str, model: str, key: str) -> str:
    settings = {
        "language_models": {
            "openai_compatible": {
                "Ember": {
                    "api_url": f"{root}/v1",
                    "available_models": [
                        {
                            "name": model,
                            "max_tokens": 32768,
                            "capabilities": {"tools": True, "images": False},
                        }
                    ],
                }
            }
        }
    }
    head = "// Zed: ~/.config/zed/settings.json"
    tail = f"// the key: ${KEY_VARIABLE}{_export_note(key, ', ')}" if key else "// no key needed"
    return "\n".join([head, json.dumps(settings, indent=2), tail])


def opencode(root: str, model: str, key: str) -> str:
    options: dict[str, str] = {"baseURL": f"{root}/v1"}
    if key:
        options["apiKey"] = f"{{env:{KEY_VARIABLE}}}"
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "ember": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Ember",
                "options": options,
                "models": {model: {"name": model}},
            }
        },
        "model": f"ember/{model}",
    }
    head = "// opencode.json (in the project, or ~/.config/opencode/)"
    return "\n".join([head, json.dumps(config, indent=2)])


def aider(root: str, model: str, key: str) -> str:
    return "\n".join(
        [
            "# aider, through Ember's chat completions",
            f"export OPENAI_API_BASE={root}/v1",
            f"export OPENAI_API_KEY={key or NO_KEY}",
            f"aider --model openai/{model}",
        ]
    )


def _export_note(key: str, lead: str) -> str:
    """``export EMBER_API_KEY=KEY`` after ``lead``, unless the key shown is that variable."""
    return "" if key == f"${KEY_VARIABLE}" else f"{lead}export {KEY_VARIABLE}={key}"


CLIENTS = {
    "Claude Code": ("bash", claude_code),
    "Codex": ("toml", codex),
    "Continue": ("yaml", continue_config),
    "Cline": ("text", cline),
    "Zed": ("json", zed),
    "opencode": ("json", opencode),
    "aider": ("bash", aider),
}
NAMES = tuple(CLIENTS)


def clients(root: str, model: str | None, key: str) -> list[Client]:
    """Every client's settings for the server at ``root``."""
    root = root.removesuffix("/").removesuffix("/v1")
    model = model or PLACEHOLDER_MODEL
    return [Client(name, lang, make(root, model, key)) for name, (lang, make) in CLIENTS.items()]


def startup_text(root: str, model: str | None, key: str) -> str:
    """What ``ember serve --clients`` prints: each client under its name."""
    blocks = [f"== {c.name} ==\n{c.code}" for c in clients(root, model, key)]
    return "\n\n".join(blocks)
