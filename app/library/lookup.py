"""Which library model a name means: an id, ``owner/repo``, ``owner/repo:QUANT`` (or
``:FILENAME``), an app's own name (``gemma3:270m``) or a unique part of a name. One rule for
``ember run NAME``, the app and API requests (:meth:`Library.find`). No disk access. No Qt.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.library.local_model import AmbiguousModelError, LocalModel, NoMatchingModelError


def match_name(query: str, models: Sequence[LocalModel]) -> LocalModel:
    """The one model ``query`` means. Raises NoMatchingModelError / AmbiguousModelError."""
    exact = [m for m in models if m.id == query]
    if exact:
        return exact[0]
    needle = query.lower()
    named = [m for m in models if m.name.lower() == needle or m.path.name.lower() == needle]
    if len(named) == 1:  # an app's own name (Ollama's ``gemma3:270m``) before repo:quant
        return named[0]
    repo, sep, spec = query.rpartition(":") if ":" in query else (query, "", "")
    if "/" in repo:
        in_repo = [m for m in models if m.repo_id and m.repo_id.lower() == repo.lower()]
        if sep:
            want = spec.lower()
            in_repo = [
                m
                for m in in_repo
                if (m.quant or "").lower() == want
                or m.filename.lower() == want
                or m.path.name.lower() == want
                or m.name.lower() == want
            ]
        if in_repo or sep:
            return one_of(query, in_repo, pull_hint=True)
    matches = named or [
        m
        for m in models
        if needle in m.id.lower() or needle in m.name.lower() or needle in (m.repo_id or "").lower()
    ]
    return one_of(query, matches, pull_hint="/" in query)


def one_of(query: str, matches: Sequence[LocalModel], pull_hint: bool) -> LocalModel:
    """The only match, or the error that says there were none or several."""
    if len(matches) == 1:
        return matches[0]
    if not matches:
        hint = (
            f" Download it with `ember pull {query}`." if pull_hint else " `ember ls` lists them."
        )
        raise NoMatchingModelError(f"No model matches {query!r}.{hint}")
    ids = [m.id for m in matches]
    listed = "\n  ".join(ids)
    raise AmbiguousModelError(f"{query!r} matches {len(ids)} models; name one of:\n  {listed}", ids)
