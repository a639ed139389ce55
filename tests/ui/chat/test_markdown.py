"""Markdown rendering: segments, code blocks with Copy, streaming equals a fresh render."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.ui import theme
from app.ui.chat.code_block import CodeBlock
from app.ui.chat.markdown import CodeSegment, HtmlSegment, MarkdownRenderer, stable_prefix
from app.ui.chat.message_body import MarkdownBody, RichTextLabel
from app.ui.main_window import MainWindow
from tests.helpers.chat_view import CODE_LINES, count_coloured_lines, streamed_code_block

SAMPLE = """# Title

Some *emphasis*, `inline code` and a [link](https://example.org).

- one
- two

| a | b |
|---|--:|
| 1 | 2 |

```python
def double(x):
    return x * 2
```

> quoted

1. first

   continued paragraph of the first item

2. second

<script>alert(1)</script> ![img](http://tracker.example/pixel.png)
"""


def test_segments_split_code_blocks_out() -> None:
    segments = MarkdownRenderer(theme.LIGHT).segments(SAMPLE)
    kinds = [type(s).__name__ for s in segments]
    assert kinds == ["HtmlSegment", "CodeSegment", "HtmlSegment"]
    code = segments[1]
    assert isinstance(code, CodeSegment)
    assert code.language == "python" and code.code == "def double(x):\n    return x * 2"
    first = segments[0]
    assert isinstance(first, HtmlSegment)
    for tag in ("<h1>", "<em>", "<code", 'href="https://example.org"', "<ul>", "<table"):
        assert tag in first.html
    last = segments[2]
    assert isinstance(last, HtmlSegment)
    assert "<script>" not in last.html and "&lt;script&gt;" in last.html
    assert "<img" not in last.html  # images become links: nothing is fetched


def test_stable_prefix_only_counts_finished_blocks() -> None:
    assert stable_prefix("Para one\n\nPa") == len("Para one\n\n")
    assert stable_prefix("Para one\n\n   indented") == 0  # could continue a list item
    assert stable_prefix("- a\n\n- b\n\nNext") == len("- a\n\n- b\n\n")  # one loose list
    assert stable_prefix("```py\nx = 1\n\ny") == 0  # inside an open fence
    closed = "```py\nx = 1\n```\n"
    assert stable_prefix(closed + "more") == len(closed)
    assert stable_prefix("a\n\nb\n\nc", start=len("a\n\n")) == len("a\n\nb\n\n")


def test_streaming_render_matches_a_fresh_render(qtbot: QtBot, qapp: QApplication) -> None:
    renderer = MarkdownRenderer(theme.LIGHT)
    streamed = MarkdownBody(renderer)
    qtbot.addWidget(streamed)
    for i in range(0, len(SAMPLE), 7):
        streamed.append(SAMPLE[i : i + 7])
    streamed.finish_stream()
    fresh = MarkdownBody(renderer)
    qtbot.addWidget(fresh)
    fresh.set_markdown(SAMPLE)

    def describe(body: MarkdownBody) -> list[str]:
        # Streaming may split a run of blocks over several labels; joined, they must match.
        out = [""]
        for w in body._widgets:
            if isinstance(w, RichTextLabel):
                out[-1] += w.source_html
            else:
                assert isinstance(w, CodeBlock)
                out += [w.code, ""]
        return out

    assert streamed.text == SAMPLE
    assert describe(streamed) == describe(fresh)


def test_streaming_updates_only_the_open_tail(qtbot: QtBot, qapp: QApplication) -> None:
    body = MarkdownBody(MarkdownRenderer(theme.LIGHT))
    qtbot.addWidget(body)
    body.append("First paragraph.\n\nSecond")
    first = body._widgets[0]
    body.append(" paragraph grows")
    body.append(" and grows.\n\n```js\nlet x")
    assert body._widgets[0] is first  # a finished block is never rebuilt
    assert isinstance(body._widgets[-1], CodeBlock)
    assert body.code_blocks[0].code == "let x"


def test_a_finished_answer_ending_in_an_open_fence_shows_no_empty_code_box(
    qtbot: QtBot, qapp: QApplication
) -> None:
    """Stopped right after "```": no code came, so no (empty, "text") block is shown; stopped
    in the middle of code: the code shows as a finished block."""
    renderer = MarkdownRenderer(theme.LIGHT)
    (only,) = renderer.segments("Here is the code:\n\n```")
    assert isinstance(only, HtmlSegment)
    assert renderer.segments("Here:\n\n```python\nx = 1")[1] == CodeSegment("x = 1", "python")
    body = MarkdownBody(renderer)
    qtbot.addWidget(body)
    for piece in ("Sure, here it is:", "\n\n", "```", "python\n"):
        body.append(piece)
    body.finish_stream()
    assert body.code_blocks == []
    reopened = MarkdownBody(renderer)
    qtbot.addWidget(reopened)
    reopened.set_markdown(body.text)
    assert reopened.code_blocks == []


def test_code_block_copy_button_puts_the_code_on_the_clipboard(
    qtbot: QtBot, window: MainWindow
) -> None:
    store = window.services.store
    conversation = store.create_conversation("Code")
    store.add_message(conversation.id, "user", "Show me code")
    answer = store.add_message(
        conversation.id, "assistant", "Sure:\n\n```bash\necho 'hi there'\nls -la\n```\n\nDone."
    )
    window.controller.open_conversation(conversation.id)
    shown = window.chat.view.widget_for(answer.id)
    assert shown is not None and shown.body is not None
    (block,) = shown.body.code_blocks
    assert block.language_label.text() == "bash"
    QGuiApplication.clipboard().setText("")
    with qtbot.waitSignal(block.copied):
        block.copy_button.click()
    assert QGuiApplication.clipboard().text() == "echo 'hi there'\nls -la"
    assert block.copy_button.text() == "Copied"


def test_a_long_streaming_code_block_redoes_only_its_last_lines(
    qtbot: QtBot, ember_app: QApplication, monkeypatch: object
) -> None:
    """Each update of a growing code block highlights and lays out a bounded tail, not the
    whole block (which made long code answers freeze the window); the text stays whole."""
    import pytest

    from app.ui.chat import code_block

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    highlighted = count_coloured_lines(monkeypatch)
    lines = CODE_LINES[:130]
    block = streamed_code_block(qtbot, len(lines))
    assert max(highlighted) <= code_block.FROZEN_LINES + 1
    block.show()
    qtbot.waitExposed(block)
    labels = sorted(block.findChildren(code_block.CachedLabel), key=lambda label: label.y())
    shown = [label.text() for label in labels]
    assert len(shown) == 4  # three frozen groups of 40 lines and the live tail
    plain = "\n".join(QTextDocumentPlain(html) for html in shown)
    assert plain == "\n".join(lines)

    block.set_segment(CodeSegment("\n".join(lines), "python", True))  # the fence closed
    block.refresh_theme()  # a new theme: one label, highlighted in one piece again
    qtbot.waitUntil(lambda: len(block.findChildren(code_block.CachedLabel)) == 1)
    assert highlighted[-1] == len(lines)


def QTextDocumentPlain(html: str) -> str:  # noqa: N802 (reads like the Qt class it wraps)
    from PySide6.QtGui import QTextDocument

    document = QTextDocument()
    document.setHtml(html)
    return document.toPlainText()
