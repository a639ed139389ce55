"""The models the picker offers: the library's (``services.library``: Ember's models, the HF
cache, LM Studio's folder and the user's folders), then every file the user opened before.
Blocking (disk); ``ModelChoices`` calls it from a background task.

One entry per file: the same GGUF reached by two paths (same size and content fingerprint,
:mod:`app.library.same_file`) is one entry that lists its ``locations``. A model without a
chat template is marked ``base``: it continues text rather than chatting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.config import Settings
from app.engine.gguf_format import human_bytes
from app.library.drafts import DRAFT_KEY, DRAFT_SUGGESTED, suggest_draft
from app.library.local import Library
from app.library.local_model import LocalModel
from app.library.projectors import VISION_TAG, projector_beside
from app.library.quant import is_projector, parse_quant
from app.library.same_file import group_same
from app.ui.chat.thinking import supports_thinking
from app.ui.engine_session import model_name
from app.ui.task_runner import tasks

log = logging.getLogger(__name__)

RECENT_KEY = "ui.recent_models"
MAX_RECENT = 12
BASE_TAG = "Base model"
BASE_NOTICE = "base model: it continues text; for chat pick an instruct model"
DRAFT_HINT = (
    "Suggested draft model: {name} (smaller, the same tokenizer): Settings → Model loading → "
    "Draft model → Suggested makes answers faster"
)


@dataclass(frozen=True, slots=True)
class ModelEntry:
    path: str
    name: str
    size: int
    detail: str  # e.g. "Vision · Q4_K_M · 241 MB"
    projector: str | None = None  # the vision projector it loads with (it takes images)
    base: bool = False  # no chat template: a base model, which continues text
    locations: tuple[str, ...] = ()  # every path of this same file (``path`` first)
    thinks: bool = False  # its template knows about thinking (the chat offers its control)
    # a smaller model with its tokenizer that could draft for it (app.library.drafts)
    draft: str | None = None

    @property
    def vision(self) -> bool:
        return self.projector is not None

    @property
    def tooltip(self) -> str:
        places = self.locations if len(self.locations) > 1 else (self.path,)
        tip = "\n".join(places)
        if len(places) > 1:
            tip = f"The same file in {len(places)} places:\n{tip}"
        if self.projector is not None:
            tip += f"\nVision: takes images (loads with {Path(self.projector).name})"
        if self.base:
            tip += f"\n{BASE_NOTICE[0].upper()}{BASE_NOTICE[1:]}."
        if self.draft is not None:
            tip += f"\n{DRAFT_HINT.format(name=Path(self.draft).name)}"
        return tip


def _detail(quant: str | None, size: int, projector: Path | None = None, base: bool = False) -> str:
    tags = (BASE_TAG if base else None, VISION_TAG if projector is not None else None)
    return " · ".join(x for x in (*tags, quant, human_bytes(size)) if x)


def _entry(path: Path) -> ModelEntry | None:
    try:
        size = path.stat().st_size
    except OSError:
        return None
    projector = projector_beside(path)
    return ModelEntry(
        str(path),
        model_name(str(path)),
        size,
        _detail(parse_quant(path.name), size, projector),
        str(projector) if projector is not None else None,
    )


def scan_models(settings: Settings, library: Library) -> list[ModelEntry]:
    """Every model to offer, library first, then recently opened files; one entry per file
    (the first one found, listing the others' paths as its locations)."""
    seen: set[str] = set()
    entries: list[ModelEntry] = []
    scanned = library.scan()
    for model in scanned:
        if model.error is None:
            seen.add(str(model.path.resolve()))
            projector = model.mmproj
            base = model.info is not None and not model.info.chat_template
            thinks = model.info is not None and supports_thinking(model.info.chat_template)
            detail = _detail(model.quant, model.size, projector, base)
            places = tuple(map(str, model.locations))  # the library's one entry per file
            entries.append(
                ModelEntry(
                    str(model.path),
                    model.name,
                    model.size,
                    f"{detail} · {len(places)} places" if places else detail,
                    str(projector) if projector is not None else None,
                    base,
                    locations=places,
                    thinks=thinks,
                    draft=_draft(model, scanned),
                )
            )
    for name in settings.get(RECENT_KEY):
        path = Path(name) if isinstance(name, str) else None
        if path is None or is_projector(path.name) or not path.is_file():
            continue
        key = str(path.resolve())
        if key not in seen:
            seen.add(key)
            entry = _entry(path)
            if entry is not None:
                entries.append(entry)
    return one_per_file(entries)


def _draft(model: LocalModel, models: list[LocalModel]) -> str | None:
    try:
        draft = suggest_draft(model, models)
    except Exception:  # a file that changed while listed: no suggestion, never no list
        log.exception("Suggesting a draft model for %s failed", model.path)
        return None
    return str(draft.path) if draft is not None else None


def one_per_file(entries: list[ModelEntry]) -> list[ModelEntry]:
    """The same file listed once: the first entry, with every path as its locations."""
    groups = group_same([(Path(e.path), e.size) for e in entries])
    out = []
    for group in groups:
        first = entries[group[0]]
        if len(group) > 1:
            places = tuple(
                dict.fromkeys(
                    p for i in group for p in (entries[i].locations or (entries[i].path,))
                )
            )
            base = any(entries[i].base for i in group)
            projector = next((entries[i].projector for i in group if entries[i].projector), None)
            detail = first.detail.removesuffix(f" · {len(first.locations)} places")
            detail = detail if base == first.base else f"{BASE_TAG} · {detail}"
            first = replace(
                first,
                projector=projector,
                base=base,
                detail=f"{detail} · {len(places)} places",
                locations=places,
            )
        out.append(first)
    return out


def remember_model(settings: Settings, path: str) -> None:
    """Put a file the user opened at the front of the recent list."""
    recent = [p for p in settings.get(RECENT_KEY) if isinstance(p, str) and p != path]
    settings.set(RECENT_KEY, [path, *recent][:MAX_RECENT])


class ModelChoices(QObject):
    """The list of models, refreshed in the background. Signal: ``models_changed(list)``."""

    models_changed = Signal(list)

    def __init__(self, settings: Settings, library: Library, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.library = library
        self.models: list[ModelEntry] = []
        self._scope = object()  # keeps this catalog's task keys apart from everyone else's

    def refresh(self) -> None:
        """Rescan off the GUI thread. Asked while a scan runs, scan once more after it: the
        running scan may have missed the file that prompted the call."""
        settings, library = self.settings, self.library
        tasks().submit(
            lambda: scan_models(settings, library),
            self._on_scanned,
            self._on_scan_failed,
            key=(self._scope, "scan"),
            coalesce=True,
            name="list the models",
        )

    def draft_for(self, path: str) -> str | None:
        """The draft model to load ``path`` with (Settings → Model loading → Draft model):
        none, the library's suggestion for it (listed by the last scan), or the file chosen."""
        choice = self.settings.get(DRAFT_KEY)
        if choice != DRAFT_SUGGESTED:
            return choice or None
        return next((m.draft for m in self.models if path in (m.path, *m.locations)), None)

    def add_file(self, path: str) -> None:
        """Remember a file the user opened and list it at once."""
        remember_model(self.settings, path)
        entry = _entry(Path(path))
        if entry is not None and all(m.path != entry.path for m in self.models):
            self.models = [entry, *self.models]
            self.models_changed.emit(list(self.models))
        self.refresh()

    def _on_scanned(self, models: list[ModelEntry]) -> None:
        if models != self.models:
            self.models = models
            self.models_changed.emit(list(self.models))

    def _on_scan_failed(self, error: BaseException) -> None:
        log.warning("Listing models failed: %s", error)
