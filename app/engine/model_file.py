"""A model file checked before it is loaded: its GGUF header read into clear engine errors, and
the context it loads with (the rule itself is :mod:`app.engine.sizing`'s)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

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
    by the trained length and by memory. Raises OutOfMemoryError naming what would fit.
    The rule itself is :func:`app.engine.sizing.plan_context`."""
    plan = sizing.plan_context(info, params, available)
    n_ctx = plan.check()
    if not plan.automatic and n_ctx > plan.trained:
        log.warning("Context %d exceeds the model's trained %d", n_ctx, plan.trained)
    return n_ctx


# llama.cpp's ``enum llama_load_mode`` (llama-cpp-python 0.3.36 has no use_mmap/use_mlock)
LOAD_MODE_AUTO, LOAD_MODE_NONE, LOAD_MODE_MLOCK, LOAD_MODE_MMAP_MLOCK = -1, 0, 2, 3


def load_mode(params: LoadParams) -> int:
    """How llama.cpp reads the weights: its own choice (memory-mapped where it can) by default;
    ``--no-mmap`` reads them into memory, ``--mlock`` keeps them there (mapped or read)."""
    if params.use_mlock:
        return LOAD_MODE_MMAP_MLOCK if params.use_mmap else LOAD_MODE_MLOCK
    return LOAD_MODE_AUTO if params.use_mmap else LOAD_MODE_NONE


def set_load_mode(mparams: Any, params: LoadParams) -> None:
    """Put ``params``' mmap and mlock choices into ``llama_model_params``: ``load_mode`` in this
    llama.cpp, the two flags in one that still has them."""
    if hasattr(mparams, "load_mode"):
        mparams.load_mode = load_mode(params)
    else:
        mparams.use_mmap, mparams.use_mlock = params.use_mmap, params.use_mlock
