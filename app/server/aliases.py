"""Model aliases: names a client sends that mean one of the local models (LM Studio-style).

Agents ask for the models of their own vendor (Claude Code for ``claude-sonnet-4-5``): the
``server.model_aliases`` setting (Settings → Server, or ``ember serve --alias NAME=MODEL``)
maps such a name to a model ``GET /v1/models`` lists. A name ending in ``*`` matches every
name that starts so (``claude-*``). Names compare ignoring case; an exact name wins over a
pattern, a longer pattern over a shorter one.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_ALIASES = 256
MAX_ALIAS_CHARS = 256


class AliasError(ValueError):
    """An alias given on the command line that cannot be used."""


def resolve_alias(name: str, aliases: Iterable[tuple[str, str]]) -> str:
    """The model ``name`` means: its alias's target, or ``name`` itself."""
    wanted = name.strip().lower()
    best: tuple[int, str] | None = None
    for alias, target in aliases:
        key = alias.strip().lower()
        if key == wanted:
            return target
        pattern = key.endswith("*") and wanted.startswith(key[:-1])
        if pattern and (best is None or len(key) > best[0]):
            best = (len(key), target)
    return best[1] if best is not None else name


def parse_alias(text: str) -> tuple[str, str]:
    """``NAME=MODEL`` (``ember serve --alias``) as a pair; AliasError says what is wrong."""
    name, sep, model = text.partition("=")
    name, model = name.strip(), model.strip()
    if not sep or not name or not model:
        raise AliasError(
            f"--alias takes NAME=MODEL (e.g. claude-sonnet-4-5=qwen3-coder), not {text!r}"
        )
    if len(name) > MAX_ALIAS_CHARS or len(model) > MAX_ALIAS_CHARS:
        raise AliasError(f"an alias and its model are at most {MAX_ALIAS_CHARS} characters each")
    return name, model


def aliases_text(aliases: Iterable[tuple[str, str]]) -> str:
    """One ``NAME=MODEL`` per line (the Settings page's text box)."""
    return "\n".join(f"{name}={model}" for name, model in aliases)


def parse_aliases_text(text: str) -> dict[str, str]:
    """The Settings page's text box as the setting's mapping (blank lines skipped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip():
            name, model = parse_alias(line)
            out[name] = model
        if len(out) > MAX_ALIASES:
            raise AliasError(f"at most {MAX_ALIASES} aliases")
    return out
