"""The user's load settings as :class:`LoadParams`, and the KV cache types: one home for both.

The app's loader, the Models page's fit badge and the API server (when the app serves it) load
with :func:`load_params`, so they agree on the context, batch, flash attention and cache type.
The KV cache types are derived from :data:`~app.engine.types.KVCacheType`; llama.cpp's ids for
them come from the ggml type table (:func:`kv_cache_type_id`), not from a copy. How the weights
are read (mmap, mlock) becomes llama.cpp's ``load_mode`` here too (:func:`set_load_mode`).

No Qt: the GUI, the CLI and the server import it alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, get_args

from app.engine.ggml_types import ggml_type
from app.engine.speculation import MAX_DRAFT_ROWS
from app.engine.types import DEFAULT_KV_CACHE_TYPE, KVCacheType, LoadParams

if TYPE_CHECKING:
    from app.config import Settings

# Every KV cache type llama.cpp takes (``ember run --kv-type``).
KV_CACHE_TYPES: Final[tuple[KVCacheType, ...]] = get_args(KVCacheType)
# The ones the Settings dialog offers, with what each costs: the rest trade quality for little.
KV_CACHE_CHOICES: Final[dict[KVCacheType, str]] = {
    "f16": "f16 (best quality)",
    "q8_0": "q8_0 (half the memory)",
    "q4_0": "q4_0 (a quarter)",
}


def kv_cache_type(value: object) -> KVCacheType:
    """``value`` as a KV cache type; an unknown one (a hand-edited settings file) is f16."""
    for name in KV_CACHE_TYPES:
        if value == name:
            return name
    return DEFAULT_KV_CACHE_TYPE


def kv_cache_type_id(name: KVCacheType) -> int:
    """llama.cpp's ``ggml_type`` id for a KV cache type (``type_k``/``type_v``)."""
    return ggml_type(name).id


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


def load_params(settings: Settings) -> LoadParams:
    """The load parameters chosen in the Settings dialog (0 means automatic; GPU layers: -2),
    and the back-end chosen on its Hardware page."""
    cache = kv_cache_type(settings.get("load.cache_type"))
    return LoadParams(
        n_ctx=settings.get("load.n_ctx") or None,
        n_gpu_layers=settings.get("load.n_gpu_layers"),
        n_threads=settings.get("load.n_threads") or None,
        n_batch=settings.get("load.n_batch"),
        n_ubatch=settings.get("load.n_batch"),
        flash_attn=settings.get("load.flash_attn"),
        use_mmap=settings.get("load.use_mmap"),
        use_mlock=settings.get("load.use_mlock"),
        cache_type_k=cache,
        cache_type_v=cache,
        n_parallel=max(1, settings.get("load.parallel")),
        cache_ram_mb=max(0, settings.get("load.cache_ram_mb")),
        draft_max=min(max(0, settings.get("load.draft_max")), MAX_DRAFT_ROWS),
        device=settings.get("load.device") or "auto",
    )
