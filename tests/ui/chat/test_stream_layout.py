"""What one streamed update costs the layouts: each block is built once, a changed text is laid
out once, and the messages above the answer are left alone (issue 10, item 7; counted, not
timed: bench/gui_stream.py times it)."""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from app.chats.models import Message
from app.ui import theme
from app.ui.chat import code_block
from app.ui.chat.chat_view import ChatView
from app.ui.chat.code_block import CodeBlock
from app.ui.chat.markdown import CodeSegment, MarkdownRenderer
from app.ui.chat.message_body import MarkdownBody, RichTextLabel
from app.ui.chat.message_widget import STREAM_SLICE, MessageWidget
from tests.helpers.chat_view import (
    CHUNK,
    CODE_LINES,
    count_coloured_lines,
    settle_layouts,
    shown_chat_view,
    start_answer,
    stored_message,
    streamed_code_block,
)
from tests.helpers.parallel_fake import ANSWER

TEXT = ANSWER * 3


def _stream(view: ChatView, message: Message, text: str, after_each_turn: Any = None) -> None:
    for start in range(0, len(text), CHUNK):
        view.append_stream(message.id, text[start : start + CHUNK])
        for _ in range(3):
            QApplication.processEvents()
            if after_each_turn is not None:
                after_each_turn()


def test_each_block_of_a_streamed_answer_is_built_once(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: Counter[str] = Counter()

    def counting(cls: type[Any]) -> None:
        real = cls.__init__

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            built[cls.__name__] += 1
            real(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", init)

    counting(CodeBlock)
    counting(RichTextLabel)
    message, widget = start_answer(view)
    _stream(view, message, TEXT)
    view.update_message(dataclasses.replace(message, content=TEXT, status="complete"))
    settle_layouts()

    segments = MarkdownRenderer(theme.current()).segments(TEXT, blocks=True)
    fences = sum(isinstance(s, CodeSegment) for s in segments)
    assert widget.body is not None and len(widget.body.code_blocks) == fences == 3
    assert built["CodeBlock"] == fences  # not again once finished, nor once per state
    # A label may show the first backticks of a fence before they turn into a code block.
    assert built["RichTextLabel"] <= (len(segments) - fences) + fences, built


def test_a_streamed_update_lays_each_changed_text_out_once(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qt asks a label's size several ways in one layout pass (its hint, its height at the
    hint's width, at its own width); each answer used to be another full layout of its text.
    Counted per event-loop turn (an update that begins a code block is two turns: the block,
    then its code)."""
    layouts: Counter[int] = Counter()
    real_height, real_hint = QLabel.heightForWidth, QLabel.sizeHint

    def height_for_width(label: QLabel, width: int) -> int:
        layouts[id(label)] += 1
        return real_height(label, width)

    def size_hint(label: QLabel) -> Any:
        layouts[id(label)] += 1
        return real_hint(label)

    message, _widget = start_answer(view)
    monkeypatch.setattr(QLabel, "heightForWidth", height_for_width)
    monkeypatch.setattr(QLabel, "sizeHint", size_hint)
    worst: list[int] = []

    def check() -> None:
        worst.append(max(layouts.values(), default=0))
        layouts.clear()

    _stream(view, message, TEXT, after_each_turn=check)
    assert len(worst) > 20
    assert max(worst) == 1, worst


class _Resizes(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Resize:
            self.count += 1
        return False


def test_a_growing_answer_leaves_the_messages_above_it_alone(view: ChatView) -> None:
    """Laid out in its old height before the scroll area grew it, the column squeezed the
    tallest messages to fit and the scroll area then grew them back: every message on screen
    laid out twice per streamed update."""
    message, _widget = start_answer(view)
    above = [w for w in view.widgets() if w.message.id != message.id]
    assert len(above) == 8
    resizes = _Resizes()
    for widget in above:
        widget.installEventFilter(resizes)
    _stream(view, message, TEXT)
    assert view.widget_for(message.id) is not None
    assert resizes.count == 0


def test_a_burst_is_rendered_one_slice_per_event_loop_turn(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text that arrives in the turn a slice was rendered in waits for the next turn: a turn
    that rendered two slices (or a slice and a new update) held the window twice as long."""
    rendered: list[int] = []
    real = MarkdownBody.append

    def append(body: MarkdownBody, chunk: str) -> None:
        rendered.append(len(chunk))
        real(body, chunk)

    monkeypatch.setattr(MarkdownBody, "append", append)
    message, widget = start_answer(view)
    widget.append_stream(TEXT[: STREAM_SLICE * 3])
    assert rendered == []  # not in the turn the text came in
    turns = 0
    while sum(rendered) < STREAM_SLICE * 3 + 60 and turns < 100:
        before = len(rendered)
        QApplication.processEvents()
        assert len(rendered) - before <= 1
        turns += 1
        if turns == 2:
            count = len(rendered)
            widget.append_stream(TEXT[STREAM_SLICE * 3 : STREAM_SLICE * 3 + 60])
            assert len(rendered) == count  # it waits for a turn of its own
    assert widget.plain_text == TEXT[: STREAM_SLICE * 3 + 60]
    assert max(rendered) <= STREAM_SLICE and len(rendered) >= 4
    assert view.widget_for(message.id) is widget


def test_a_burst_builds_at_most_one_block_per_event_loop_turn(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a block is what a streamed update costs (a code block ~10 ms, a table ~5 ms):
    a slice that began a paragraph, a list and a code block built all three in one turn."""
    built: list[str] = []
    real = MarkdownBody._create

    def create(body: MarkdownBody, segment: Any, parent: Any) -> Any:
        built.append(type(segment).__name__)
        return real(body, segment, parent)

    monkeypatch.setattr(MarkdownBody, "_create", create)
    _stored, widget = start_answer(view)
    widget.append_stream(TEXT)  # one burst, as an unthrottled engine hands it over
    per_turn: list[int] = []
    while widget.plain_text != TEXT or widget.body is None or widget.body.text != TEXT:
        before = len(built)
        QApplication.processEvents()
        per_turn.append(len(built) - before)
        assert len(per_turn) < 500
    segments = MarkdownRenderer(theme.current()).segments(TEXT, blocks=True)
    assert len(built) >= len(segments)
    assert max(per_turn) == 1, per_turn


def test_a_new_code_block_takes_its_height_once(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured before it was laid out, a code block guessed it was narrow (a horizontal scroll
    bar below its code), then took the bar back once it had its width: two layouts of it and
    of the message."""
    heights: list[int] = []
    real = code_block._CodeScroll.setFixedHeight

    def set_fixed_height(scroll: code_block._CodeScroll, height: int) -> None:
        heights.append(height)
        real(scroll, height)

    monkeypatch.setattr(code_block._CodeScroll, "setFixedHeight", set_fixed_height)
    message, widget = start_answer(view)
    _stream(view, message, "Here:\n\n```python\nprint('short')\n```\n\nDone.")
    assert widget.body is not None
    (block,) = widget.body.code_blocks
    assert not block.code_scroll.horizontalScrollBar().isVisible()  # the code fits
    assert heights == [block.code_scroll.height()]


def test_a_code_block_is_built_in_one_turn_and_coloured_in_the_next(
    view: ChatView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a code block (~6 ms) and colouring and laying out its code (~5 ms) were one
    turn; a burst that began one paid both at once."""
    events: list[str] = []
    real_html, real_init = code_block.code_html, CodeBlock.__init__

    def code_html(code: str, language: str, palette: Any) -> str:
        if code:
            events.append("code")
        return real_html(code, language, palette)

    def init(block: CodeBlock, *args: Any, **kwargs: Any) -> None:
        events.append("block")
        real_init(block, *args, **kwargs)

    monkeypatch.setattr(code_block, "code_html", code_html)
    monkeypatch.setattr(CodeBlock, "__init__", init)
    _stored, widget = start_answer(view)
    widget.append_stream(TEXT)  # one burst
    turns: list[list[str]] = []
    while widget.body is None or widget.body.text != TEXT:
        events.clear()
        QApplication.processEvents()
        turns.append(list(events))
        assert len(turns) < 500
    built = [turn for turn in turns if "block" in turn]
    assert len(built) == 3
    assert all(turn == ["block"] for turn in built), built


def test_the_messages_above_a_growing_answer_are_asked_little_per_update(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """Each update lays the column out again, and Qt asks every message in it about its size;
    each question a message answers in Python costs a few microseconds, times every rendered
    message (all 500 of a long chat once it was scrolled through), several times per update."""
    shown = shown_chat_view(qtbot)
    history = [
        stored_message(i, "user", f"Question {i}")
        if i % 2 == 0
        else stored_message(i, "assistant", "A.")
        for i in range(1000, 1200)
    ]
    shown.set_messages(history)
    while shown.render_older(100):
        pass
    settle_layouts()
    assert shown.rendered_count == 200
    message, widget = start_answer(shown)
    asked: Counter[str] = Counter()
    code = MessageWidget.__init__.__code__.co_filename

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == code:
            owner = frame.f_locals.get("self")
            if isinstance(owner, MessageWidget) and owner is not widget:
                asked[frame.f_code.co_name] += 1

    updates = 0
    sys.setprofile(profile)
    try:
        for start in range(0, 600, CHUNK):
            shown.append_stream(message.id, TEXT[start : start + CHUNK])
            settle_layouts()
            updates += 1
    finally:
        sys.setprofile(None)
    per_message = sum(asked.values()) / updates / 199
    assert per_message <= 2, asked


def test_a_growing_code_block_colours_a_few_lines_per_update(
    qtbot: QtBot, ember_app: QApplication, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its last group of FROZEN_LINES was coloured and laid out again on every update, up to 40
    lines (~30 ms); now its whole lines wait in pieces, and the group is joined from them."""
    coloured = count_coloured_lines(monkeypatch)
    lines = CODE_LINES[:95]
    block = streamed_code_block(qtbot, len(lines))
    assert max(coloured) <= code_block.PIECE_LINES + 1
    block.set_segment(CodeSegment("\n".join(lines), "python", True))
    block.show()
    qtbot.waitExposed(block)
    labels = sorted(block.findChildren(code_block.CachedLabel), key=lambda label: label.y())
    document = QTextDocument()
    texts = []
    for label in labels:
        document.setHtml(label.text())
        texts.append(document.toPlainText())
    assert "\n".join(texts) == "\n".join(lines)
    # Two groups of 40 lines, a piece of 10 and the last 5 lines.
    assert [text.count("\n") + 1 for text in texts] == [40, 40, 10, 5]
