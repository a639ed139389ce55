"""Markdown -> segments Qt can show: rich-text HTML runs and fenced code blocks.

Top-level fenced code blocks become ``CodeSegment``s (shown as a widget with a language label,
pygments highlighting and a Copy button); everything else becomes ``HtmlSegment``s in the
subset of HTML/CSS that Qt's rich text engine understands. Raw HTML in the source is escaped
and images are shown as links: a model's answer never loads anything.

``stable_prefix(text)`` tells how much of a streaming answer is made of finished blocks, so the
view renders those once and re-renders only the open tail; ``turn_share(pending, limit)`` how
much of a burst of streamed text to render in one event-loop turn.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight as pygments_highlight  # type: ignore[import-untyped,unused-ignore]
from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped,unused-ignore]
from pygments.lexers import get_lexer_by_name  # type: ignore[import-untyped,unused-ignore]
from pygments.util import ClassNotFound  # type: ignore[import-untyped,unused-ignore]

from app.ui.theme import MONO_FAMILIES, Palette


@dataclass(frozen=True, slots=True)
class HtmlSegment:
    html: str


@dataclass(frozen=True, slots=True)
class CodeSegment:
    code: str
    language: str
    closed: bool = True  # False while a streaming fence is still open


Segment = HtmlSegment | CodeSegment

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^ {0,3}([-*+]|\d{1,9}[.)])( |$)")


def _make_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _render_image)
    return md


def _render_image(
    self: RendererHTML, tokens: list[Token], idx: int, _options: OptionsDict, _env: EnvType
) -> str:
    token = tokens[idx]
    src = html.escape(str(token.attrGet("src") or ""), quote=True)
    alt = html.escape(token.content or "image")
    return f'<a href="{src}">[{alt}]</a>'


_MD = _make_parser()


def language_label(info: str) -> str:
    return (info.strip().split() or [""])[0].lower()


@lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    try:
        return get_lexer_by_name(language or "text", stripnl=False, ensurenl=False)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=False)


@lru_cache(maxsize=8)
def _formatter(style: str) -> Any:
    return HtmlFormatter(nowrap=True, noclasses=True, style=style)


def highlight(code: str, language: str, style: str) -> str:
    """Code as HTML spans with inline colours (what Qt's rich text understands)."""
    if len(code) > 200_000:  # a pathological answer: colour costs more than it helps
        return html.escape(code)
    return str(pygments_highlight(code, _lexer(language), _formatter(style))).rstrip("\n")


def code_html(code: str, language: str, palette: Palette) -> str:
    body = highlight(code, language, palette.pygments_style)
    mono = ", ".join(f"'{f}'" for f in MONO_FAMILIES)
    return f'<pre style="margin:0; font-family:{mono}; color:{palette.text};">{body}</pre>'


class MarkdownRenderer:
    """Turns Markdown into segments styled for one palette."""

    def __init__(self, palette: Palette) -> None:
        self.palette = palette
        self._style = self._stylesheet(palette)

    @staticmethod
    def _stylesheet(p: Palette) -> str:
        mono = ", ".join(f"'{f}'" for f in MONO_FAMILIES)
        return (
            f"body {{ color:{p.text}; }}"
            "p, ul, ol, blockquote, pre { margin-top:0px; margin-bottom:10px; }"
            "table { margin-top:6px; margin-bottom:12px; }"
            "p, li { line-height:140%; }"
            "li { margin-bottom:2px; }"
            "h1 { font-size:17pt; font-weight:600; margin-top:6px; margin-bottom:10px; }"
            "h2 { font-size:14.5pt; font-weight:600; margin-top:6px; margin-bottom:8px; }"
            "h3 { font-size:12.5pt; font-weight:600; margin-top:4px; margin-bottom:6px; }"
            "h4, h5, h6 { font-size:11pt; font-weight:600; margin-top:4px; margin-bottom:6px; }"
            f"a {{ color:{p.link}; text-decoration:none; }}"
            f"code {{ font-family:{mono}; background-color:{p.inline_code_bg}; }}"
            f"pre {{ font-family:{mono}; background-color:{p.code_bg}; }}"
            f"blockquote {{ color:{p.muted}; margin-left:14px; }}"
            f"th {{ background-color:{p.code_header}; font-weight:600; }}"
            f"hr {{ color:{p.border}; }}"
        )

    def document(self, body: str) -> str:
        """A full HTML document for a rich-text label."""
        return f"<html><head><style>{self._style}</style></head><body>{body}</body></html>"

    def segments(self, text: str, streaming: bool = False, blocks: bool = False) -> list[Segment]:
        """``text`` as segments: runs of HTML between top-level code fences, or with
        ``blocks`` one HTML segment per top-level block, so that a streamed answer's blocks map
        one to one to the segments of its finished parts (each is rendered once, see
        message_body)."""
        tokens = _MD.parse(text)
        result: list[Segment] = []
        run: list[Token] = []

        def close_run() -> None:
            if run:
                result.append(HtmlSegment(self._render_tokens(run)))
                run.clear()

        for token in tokens:
            if token.type == "fence" and token.level == 0:
                close_run()
                code = token.content.removesuffix("\n")
                if not streaming and not code.strip() and not _fence_closed(text, token):
                    # A finished answer that stopped right after opening a fence: no code came,
                    # so there is no block to show (an empty "text" box looked broken).
                    continue
                closed = not streaming or _fence_closed(text, token)
                result.append(CodeSegment(code, language_label(token.info), closed))
            else:
                run.append(token)
                if blocks and token.level == 0 and token.nesting <= 0:
                    close_run()  # a top-level block ends here
        close_run()
        return result

    def _render_tokens(self, tokens: list[Token]) -> str:
        rendered = _MD.renderer.render(tokens, _MD.options, {})
        return self._qt_html(rendered)

    def _qt_html(self, body: str) -> str:
        p = self.palette
        cell = f"border:1px solid {p.border_strong}; padding:5px 10px;"
        body = body.replace(
            "<table>",
            f'<table cellspacing="0" cellpadding="0" style="border-collapse:collapse;'
            f' border:1px solid {p.border_strong};">',
        )
        body = re.sub(r"<(th|td)( style=\"text-align:(\w+)\")?>", _cell_tag(cell), body)
        # Qt's rich text draws no border on a blockquote: a thin coloured cell is its side bar.
        body = body.replace(
            "<blockquote>",
            '<table cellspacing="0" cellpadding="0" style="margin-bottom:10px;"><tr>'
            f'<td width="3" bgcolor="{p.border_strong}"></td>'
            f'<td style="padding-left:12px; color:{p.muted};">',
        ).replace("</blockquote>", "</td></tr></table>")
        # Nested fences (inside lists) stay in the HTML run; give them the code look.
        body = re.sub(
            r'<pre><code(?: class="language-([\w+-]+)")?>(.*?)</code></pre>',
            self._nested_code,
            body,
            flags=re.DOTALL,
        )
        return body

    def _nested_code(self, match: re.Match[str]) -> str:
        code = html.unescape(match.group(2)).removesuffix("\n")
        colored = highlight(code, match.group(1) or "", self.palette.pygments_style)
        return (
            f'<table width="100%" cellpadding="10" style="background-color:{self.palette.code_bg};'
            f' border:1px solid {self.palette.border};"><tr><td><pre style="margin:0">'
            f"{colored}</pre></td></tr></table>"
        )


def _cell_tag(cell_style: str) -> Any:
    def replace(match: re.Match[str]) -> str:
        tag = match.group(1)
        align = match.group(3)
        align_attr = f' align="{align}"' if align else ""
        return f'<{tag}{align_attr} style="{cell_style}">'

    return replace


def _fence_closed(text: str, token: Token) -> bool:
    """Whether a fence token found in streaming text has its closing line already."""
    if token.map is None:
        return True
    lines = text.split("\n")
    end = token.map[1]
    if end - 1 >= len(lines) or end - 1 <= token.map[0]:
        return False
    last = lines[end - 1]
    match = _FENCE.match(last)
    first = _FENCE.match(lines[token.map[0]])
    if not match or not first:
        return False
    opener = first.group(1)
    return match.group(1)[0] == opener[0] and len(match.group(1)) >= len(opener)


def stable_prefix(text: str, start: int = 0) -> int:
    """The end of the last finished block at or after ``start``: a blank line outside a fence
    that the next block's first line has already followed (unindented and not a list item, so
    it cannot continue a list), or the end of a closed fence. Returns ``start`` when no block
    finished yet. ``start`` must itself be a block boundary (0 or a previous result).
    """
    boundary = start
    fence: str | None = None
    pos = start
    blank_at: int | None = None  # end of a blank line outside fences, awaiting the next line
    while True:
        newline = text.find("\n", pos)
        if newline < 0:
            break
        line = text[pos:newline]
        end = newline + 1
        if fence is not None:
            match = _FENCE.match(line)
            closes = match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)
            if closes and not line.strip().strip(fence[0]):
                fence = None
                boundary = end
        elif not line.strip():
            if pos > start:
                blank_at = end
        else:
            if blank_at is not None and not line[:1].isspace() and not _LIST_ITEM.match(line):
                boundary = blank_at
            blank_at = None
            match = _FENCE.match(line)
            if match:
                if pos > start and boundary < pos:
                    boundary = pos  # a fence starts a new block
                fence = match.group(1)
        pos = end
    rest = text[pos:]
    # The next block has begun (its first line is still arriving), unless it may turn out to
    # be another item of a list.
    begun = fence is None and bool(rest) and not rest[0].isspace()
    maybe_list = bool(_LIST_ITEM.match(rest)) or rest.strip() in "-*+0123456789"
    if blank_at is not None and begun and not maybe_list:
        boundary = blank_at
    return boundary


def turn_share(tail: str, pending: str, limit: int) -> int:
    """How much of ``pending`` streamed text to render in one event-loop turn, after ``tail``
    (the text since the last finished block): at most ``limit`` characters, and no further than
    the start of a second new block, or than a code block's first line. So a turn builds at most
    one block: building one is what costs (a code block ~10 ms, a table ~5 ms), and a burst that
    began three of them held the window for all three at once."""
    text = tail + pending[:limit]
    fence: str | None = None
    blank = True  # the tail begins a block
    begun = False
    pos = 0
    while pos < len(text):
        newline = text.find("\n", pos)
        end = len(text) if newline < 0 else newline + 1
        line = text[pos:end].rstrip("\n")
        opens = fence is None and _FENCE.match(line) is not None
        starts = opens or (fence is None and blank and bool(line.strip()))
        if starts and pos >= len(tail):  # a block starts here, in the pending text
            if begun:
                return pos - len(tail)
            begun = True
            if opens and newline >= 0:
                # A code block alone (~6 ms to build); its code (~5 ms to colour and lay
                # out) in the next turn.
                return end - len(tail)
        if fence is None:
            match = _FENCE.match(line)
            fence = match.group(1) if match else None
            blank = not line.strip()
        else:
            match = _FENCE.match(line)
            closes = match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)
            if closes and not line.strip().strip(fence[0]):
                fence = None
                blank = True  # what follows a closed fence is a new block
        pos = end
    return min(limit, len(pending))
