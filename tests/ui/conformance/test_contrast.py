"""Text contrast of at least 4.5:1 (WCAG AA) in both themes, computed from the palette and the
stylesheets (resources/themes/*.qss filled in per theme): every rule that sets a text colour is
measured against its own background, or, when it sets none, against each surface text sits on
(the window, the sidebar, cards and fields). Disabled text is left out, as WCAG does."""

from __future__ import annotations

import re

import pytest

from app.ui import theme
from app.ui.theme import DARK, LIGHT, Palette

pytestmark = pytest.mark.gui_conformance

MINIMUM = 4.5
RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
DECLARATION = re.compile(r"(?:^|;)\s*(color|background(?:-color)?)\s*:\s*(#[0-9A-Fa-f]{6})\b")


def luminance(color: str) -> float:
    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


# Text whose own rule sets no background, shown inside a container that sets one.
SITS_ON = {"#ToastText": "#Toast", "#ToastAction": "#Toast"}


def _body(sheet: str, selector: str) -> str:
    return "".join(b for s, b in RULE.findall(sheet) if " ".join(s.split()) == selector)


def surfaces(p: Palette) -> dict[str, str]:
    return {"window": p.window, "sidebar": p.sidebar, "surface": p.surface}


def stylesheet_pairs(p: Palette) -> list[tuple[str, str, str, str]]:
    """(selector, text colour, background name, background colour) for every text colour."""
    sheet = re.sub(r"/\*.*?\*/", "", theme.stylesheet(p), flags=re.S)
    pairs = []
    for selectors, body in RULE.findall(sheet):
        selector = " ".join(selectors.split())
        if ":disabled" in selector or "::" in selector or "QToolTip" in selector:
            continue
        found = dict(DECLARATION.findall(body))
        text = found.get("color")
        if text is None:
            continue
        back = found.get("background") or found.get("background-color")
        container = SITS_ON.get(selector)
        if back is None and container is not None:
            back = dict(DECLARATION.findall(_body(sheet, container))).get("background")
        if back is not None:
            pairs.append((selector, text, "its background", back))
        else:
            pairs += [(selector, text, name, color) for name, color in surfaces(p).items()]
    return pairs


@pytest.mark.parametrize("palette", [LIGHT, DARK], ids=["light", "dark"])
def test_every_text_colour_in_the_stylesheets_reads_at_4_5_to_1(palette: Palette) -> None:
    pairs = stylesheet_pairs(palette)
    assert len(pairs) > 50  # the parser found the rules
    low = [
        f"{selector}: {text} on {name} {back} = {contrast(text, back):.2f}"
        for selector, text, name, back in pairs
        if contrast(text, back) < MINIMUM
    ]
    assert not low, "\n".join(low)


@pytest.mark.parametrize("palette", [LIGHT, DARK], ids=["light", "dark"])
def test_the_palette_text_colours_read_at_4_5_to_1(palette: Palette) -> None:
    """What the code paints with the palette (messages, lists, the Qt palette's text and
    placeholder roles): text colours on every surface, and text on the accent."""
    low = []
    for role in ("text", "muted", "faint", "link", "danger"):
        for name, back in surfaces(palette).items():
            if contrast(getattr(palette, role), back) < MINIMUM:
                low.append(f"{role} on {name}: {contrast(getattr(palette, role), back):.2f}")
    if contrast(palette.accent_text, palette.accent) < MINIMUM:
        low.append(f"accent_text on accent: {contrast(palette.accent_text, palette.accent):.2f}")
    assert not low, "\n".join(low)
