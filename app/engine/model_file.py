"""A model file checked before it is loaded: its GGUF header read into clear engine errors, and
the context it loads with (the rule itself is :mod:`app.engine.sizing`'s)."""

from __future__ import annotations

import logging
from pathlib import Path

from app.engine import gguf, sizing
from app.engine.types import (
    LoadParams,
    ModelFileError,
    ModelNotFoundError,
    NotGGUFError,
    TruncatedModelError,
)

log = logging.getLogger(__name__)


def inspect_model_file(path: str) -> gguf.GGUFInfo:
    """Read and validate the GGUF header, turning format problems into clear engine errors."""
    if not Path(path).is_file():
        raise ModelNotFoundError(f"No model file at {path}. Check the path, or run `ember ls`.")
    try:
        return gguf.read_gguf(path)
    except gguf.NotGGUFError as e:
        raise NotGGUFError(str(e)) from e
    except gguf.GGUFTruncatedError as e:
        raise TruncatedModelError(str(e)) from e
    except gguf.GGUFError as e:
        raise ModelFileError(str(e)) from e


def choose_n_ctx(info: gguf.GGUFInfo, params: LoadParams, available: int) -> int:
    """The context to load with: the user's choice if memory allows, else the default capped
    by the trained length and by memory. Raises ModelTooLargeError naming what would fit
    (unless ``params.force``).
    The rule itself is :func:`app.engine.sizing.plan_load`."""
    plan = sizing.plan_load(info, params, available)
    n_ctx = plan.check(force=params.force)
    if not plan.fits:
        log.warning("Loading anyway (forced) although it may not fit: %s", plan.error)
    if not plan.automatic and n_ctx > plan.trained:
        log.warning("Context %d exceeds the model's trained %d", n_ctx, plan.trained)
    return n_ctx
