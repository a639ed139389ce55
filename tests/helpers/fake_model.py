"""A fake engine model that streams canned Markdown as fast as asked (for coalescing tests and
the GUI benchmark). It plugs into the real EngineWorker through its ``model_factory``."""

from __future__ import annotations

from collections.abc import Callable

from app.engine.types import LoadParams, LoadRequest

# the same canned Markdown as the GUI's parallel fake, in word-sized pieces
from tests.helpers.parallel_fake import PIECES
from tests.helpers.scripted_model import ScriptedModel, scripted_factory


def fake_factory(
    tokens_per_second: float | None = None,
) -> Callable[[LoadRequest, Callable[[float], bool]], ScriptedModel]:
    """Models that stream PIECES in a loop at ``tokens_per_second`` (None: at once)."""
    return scripted_factory(pieces=PIECES, tokens_per_second=tokens_per_second)


def fake_load_params() -> LoadParams:
    return LoadParams(n_ctx=32768)
