"""Ready-to-paste snippets for the API: curl, the Python ``openai`` SDK, Continue's config (as
app/server/clients.py writes it, with the other coding agents'), and for Ollama's API (same
server, no ``/v1``): the ``ollama`` Python client and Open WebUI.

Pure functions (no Qt). ``key`` is the real API key (empty: none is required); the pane shows
a masked copy when the key is hidden and copies the real one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from app.server import clients

PLACEHOLDER_MODEL = "MODEL_ID"
NO_KEY = "ember"  # the openai SDK insists on a key; Ember ignores it when none is set


@dataclass(frozen=True, slots=True)
class Snippet:
    name: str  # tab title
    language: str  # for highlighting
    code: str


def mask(key: str) -> str:
    """``sk-ember-AbC…`` -> ``sk-ember-••••••••``: shows what kind of key it is, not the key."""
    if not key:
        return ""
    prefix = "sk-ember-" if key.startswith("sk-ember-") else ""
    return prefix + "•" * 8


def curl(base_url: str, model: str, key: str) -> str:
    # The body is spread over lines (a shell string may hold newlines) so no line runs long.
    model_json = json.dumps(model).replace("'", "'\\''")  # inside the shell's '…'
    message = json.dumps({"role": "user", "content": "Hello!"})
    lines = [
        f"curl {base_url}/chat/completions \\",
        '  -H "Content-Type: application/json" \\',
    ]
    if key:
        lines.append(f'  -H "Authorization: Bearer {key}" \\')
    lines += [
        "  -d '{",
        f'    "model": {model_json},',
        f'    "messages": [{message}]',
        "  }'",
    ]
    return "\n".join(lines)


def python_openai(base_url: str, model: str, key: str) -> str:
    return "\n".join(
        [
            "from openai import OpenAI",
            "",
            "client = OpenAI(",
            f'    base_url="{base_url}",',
            f'    api_key="{key or NO_KEY}",',
            ")",
            "reply = client.chat.completions.create(",
            f'    model="{model}",',
            '    messages=[{"role": "user", "content": "Hello!"}],',
            ")",
            "print(reply.choices[0].message.content)",
        ]
    )


def continue_config(base_url: str, model: str, key: str) -> str:
    return clients.continue_config(ollama_url(base_url), model, key)  # one home: clients.py


def ollama_url(base_url: str) -> str:
    """Where Ollama's clients find Ember: the server's root (Ollama's API has no ``/v1``)."""
    return base_url.removesuffix("/").removesuffix("/v1")


def python_ollama(url: str, model: str, key: str) -> str:
    lines = ["from ollama import Client", ""]
    if key:
        lines += [
            "client = Client(",
            f'    host="{url}",',
            f'    headers={{"Authorization": "Bearer {key}"}},',
            ")",
        ]
    else:
        lines.append(f'client = Client(host="{url}")')
    lines += [
        "reply = client.chat(",
        f'    model="{model}",',
        '    messages=[{"role": "user", "content": "Hello!"}],',
        ")",
        "print(reply.message.content)",
    ]
    return "\n".join(lines)


def open_webui(url: str, key: str) -> str:
    lines = [
        "# Open WebUI on this computer (pip install open-webui):",
        f"OLLAMA_BASE_URL={url} open-webui serve",
        "# or in Open WebUI: Admin Panel > Settings > Connections >",
        f"#   Ollama API: {url}",
    ]
    if key:
        lines.append(f"#   Key (Bearer): {key}")
    return "\n".join(lines)


def snippets(base_url: str, model: str | None, key: str) -> list[Snippet]:
    model = model or PLACEHOLDER_MODEL
    root = ollama_url(base_url)
    return [
        Snippet("curl", "bash", curl(base_url, model, key)),
        Snippet("Python", "python", python_openai(base_url, model, key)),
        Snippet("Continue", "yaml", continue_config(base_url, model, key)),
        Snippet("Ollama", "python", python_ollama(root, model, key)),
        Snippet("Open WebUI", "bash", open_webui(root, key)),
    ]
