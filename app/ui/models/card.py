"""A repository's model card as Qt rich text, rendered off the GUI thread (blocking)."""

from __future__ import annotations

from app.library import hub
from app.ui import theme
from app.ui.chat.markdown import CodeSegment, MarkdownRenderer, code_html

CARD_LIMIT = 60_000


def render_card(markdown: str) -> str:
    """A model card as Qt rich text (blocking; call off-thread)."""
    text = markdown if len(markdown) <= CARD_LIMIT else markdown[:CARD_LIMIT] + "\n\n…"
    palette = theme.current()
    renderer = MarkdownRenderer(palette)
    parts: list[str] = []
    for segment in renderer.segments(text):
        if isinstance(segment, CodeSegment):
            parts.append(
                f'<table width="100%" cellpadding="10" style="background-color:'
                f'{palette.code_bg}; border:1px solid {palette.border};"><tr><td>'
                f"{code_html(segment.code, segment.language, palette)}</td></tr></table><br>"
            )
        else:
            parts.append(segment.html)
    return renderer.document("".join(parts))


def fetch_card(repo_id: str) -> tuple[str, str]:
    """(Markdown, rich text) of a repository's card."""
    markdown = hub.model_card(repo_id)
    return markdown, render_card(markdown)


def render_again(markdown: str) -> tuple[str, str]:
    return markdown, render_card(markdown)
