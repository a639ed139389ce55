"""What a GGUF file name says: quantization, split parts, vision projector, parameter count.

Names on the Hub follow llama.cpp's conventions (``Model-7B-Instruct-Q4_K_M.gguf``,
``model-Q8_0-00001-of-00003.gguf``, ``mmproj-model-f16.gguf``, unsloth's ``UD-Q4_K_XL``) but are
free text, so everything here is a best guess that returns ``None`` rather than guessing wildly.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# Roughly by bits per weight, smallest first: the order files are listed in.
QUANT_ORDER: Final[tuple[str, ...]] = (
    "IQ1_S",
    "IQ1_M",
    "TQ1_0",
    "Q1_0",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ2_S",
    "IQ2_M",
    "TQ2_0",
    "Q2_0",
    "Q2_K_S",
    "Q2_K",
    "Q2_K_L",
    "Q2_K_XL",
    "IQ3_XXS",
    "IQ3_XS",
    "IQ3_S",
    "IQ3_M",
    "Q3_K_S",
    "Q3_K",
    "Q3_K_M",
    "Q3_K_L",
    "Q3_K_XL",
    "IQ4_XS",
    "IQ4_NL",
    "Q4_0",
    "Q4_0_4_4",
    "Q4_0_4_8",
    "Q4_0_8_8",
    "Q4_1",
    "MXFP4",
    "Q4_K_S",
    "Q4_K",
    "Q4_K_M",
    "Q4_K_L",
    "Q4_K_XL",
    "Q5_0",
    "Q5_1",
    "Q5_K_S",
    "Q5_K",
    "Q5_K_M",
    "Q5_K_L",
    "Q5_K_XL",
    "Q6_K",
    "Q6_K_L",
    "Q6_K_XL",
    "Q8_0",
    "Q8_K_XL",
    "BF16",
    "F16",
    "F32",
)
_RANK: Final = {q: i for i, q in enumerate(QUANT_ORDER)}

# What `ember pull REPO` picks when no quantization is named: the usual best balance first.
DEFAULT_PREFERENCE: Final[tuple[str, ...]] = (
    "Q4_K_M",
    "Q4_K_XL",
    "Q4_K_S",
    "Q4_K_L",
    "IQ4_XS",
    "Q4_0",
    "IQ4_NL",
    "Q5_K_M",
    "Q5_K_S",
    "MXFP4",
    "Q6_K",
    "Q8_0",
    "Q3_K_L",
    "Q3_K_M",
    "IQ3_M",
    "Q3_K_XL",
    "BF16",
    "F16",
)

_QUANT_RE: Final = re.compile(
    r"(?<![A-Za-z0-9])("
    r"IQ[1-4]_(?:XXS|XS|NL|S|M)"
    r"|Q[1-8]_K(?:_(?:XL|S|M|L))?"
    r"|Q[1-8]_[01](?:_[48]_[48])?"
    r"|TQ[12]_0"
    r"|MXFP4(?:_MOE)?"
    r"|BF16|FP16|F16|FP32|F32"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SPLIT_RE: Final = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.I)
_PARAMS_RE: Final = re.compile(
    r"(?<![A-Za-z0-9.])(?:(?P<experts>\d{1,3})x)?(?P<num>\d+(?:\.\d+)?)(?P<unit>[BMT])(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_UNIT_BILLIONS: Final = {"M": 1e-3, "B": 1.0, "T": 1e3}


def parse_quant(filename: str) -> str | None:
    """The quantization named in a file name ("Q4_K_M", "IQ3_XS", "F16"), or None.

    The last match wins: ``Q8_0/model-Q8_0.gguf`` and ``model-v1.5-Q4_K_M.gguf`` both work, and
    a directory name counts when the file name has none.
    """
    matches = _QUANT_RE.findall(filename)
    if not matches:
        return None
    quant = matches[-1].upper()
    return {"FP16": "F16", "FP32": "F32", "MXFP4_MOE": "MXFP4"}.get(quant, quant)


def quant_sort_key(quant: str | None) -> tuple[int, str]:
    """Sort key: smaller quantizations first, unknown ones last."""
    if quant is None:
        return (len(QUANT_ORDER) + 1, "")
    return (_RANK.get(quant.upper(), len(QUANT_ORDER)), quant.upper())


def preferred_quant(quants: Iterable[str | None]) -> str | None:
    """The quantization to pick when the user named none (Q4_K_M when there is one)."""
    available = {q.upper() for q in quants if q}
    for quant in DEFAULT_PREFERENCE:
        if quant in available:
            return quant
    return min(available, key=quant_sort_key, default=None)


@dataclass(frozen=True, slots=True)
class SplitName:
    """``base-00002-of-00005.gguf`` -> base="base", index=2, count=5."""

    base: str
    index: int
    count: int


def split_name(filename: str) -> SplitName | None:
    """The split-part numbering of a file name (its last path segment), or None."""
    match = _SPLIT_RE.match(filename.rsplit("/", 1)[-1])
    if (
        match is None
        or int(match["count"]) < 1
        or not 1 <= int(match["index"]) <= int(match["count"])
    ):
        return None
    return SplitName(match["base"], int(match["index"]), int(match["count"]))


def is_projector(filename: str) -> bool:
    """A vision projector (``mmproj-*.gguf``): kept with a model, never run alone."""
    return "mmproj" in filename.rsplit("/", 1)[-1].lower()


def model_stem(filename: str) -> str:
    """The display name of a model file: no folder, no ``.gguf``, no split numbering."""
    name = filename.rsplit("/", 1)[-1]
    split = split_name(name)
    if split is not None:
        return split.base
    return name[:-5] if name.lower().endswith(".gguf") else name


def file_model_id(path: str | Path, models_dir: Path) -> str:
    """The id a model file goes by when no one named it (the API, the app, the library): inside
    Ember's models folder its path there (``owner/repo/file.gguf``, as ``ember ls`` shows it), so
    the id does not depend on who loaded it; any other file its name (:func:`model_stem`), never
    its full path, which API clients would see."""
    for candidate, base in ((Path(path), models_dir), (Path(path).resolve(), models_dir.resolve())):
        with contextlib.suppress(ValueError):
            return candidate.relative_to(base).as_posix()
    return model_stem(Path(path).name)


@dataclass(frozen=True, slots=True)
class ParamHint:
    """A parameter count read from a name: ``label`` as written ("7B", "8x7B"), in billions."""

    label: str
    billions: float


def parse_param_hint(text: str) -> ParamHint | None:
    """ "Llama-3.1-8B-Instruct" -> 8B; "Mixtral-8x7B" -> 8x7B (56); "gemma-3-270m" -> 270M."""
    for match in _PARAMS_RE.finditer(text):
        unit = match["unit"].upper()
        value = float(match["num"]) * _UNIT_BILLIONS[unit]
        experts = int(match["experts"]) if match["experts"] else 1
        if value <= 0:
            continue
        prefix = f"{experts}x" if experts > 1 else ""
        return ParamHint(f"{prefix}{match['num']}{unit}", value * experts)
    return None


def params_label(count: int) -> str:
    """A parameter count as people write it: 7241732096 -> "7.2B", 268098176 -> "268M"."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= scale:
            value = count / scale
            text = f"{value:.1f}".rstrip("0").rstrip(".") if value < 10 else f"{value:.0f}"
            return f"{text}{suffix}"
    return str(count)
