"""group_by_day: the sidebar's sections, a pure function of the conversations and "now"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.chats.grouping import day_label, group_by_day
from app.chats.models import Conversation

NOW = datetime(2026, 10, 15, 12, 0, tzinfo=UTC)


def at(when: datetime, title: str = "") -> Conversation:
    stamp = when.timestamp()
    return Conversation(id=title or str(stamp), title=title, created_at=stamp, updated_at=stamp)


@pytest.mark.parametrize(
    ("when", "label"),
    [
        (NOW + timedelta(hours=3), "Today"),  # a clock that was ahead
        (NOW, "Today"),
        (datetime(2026, 10, 15, 0, 0, tzinfo=UTC), "Today"),
        (datetime(2026, 10, 14, 23, 59, tzinfo=UTC), "Yesterday"),
        (datetime(2026, 10, 14, 0, 0, tzinfo=UTC), "Yesterday"),
        (datetime(2026, 10, 13, 23, 59, tzinfo=UTC), "Previous 7 days"),
        (datetime(2026, 10, 8, 0, 0, tzinfo=UTC), "Previous 7 days"),
        (datetime(2026, 10, 7, 23, 59, tzinfo=UTC), "Previous 30 days"),
        (datetime(2026, 9, 15, 0, 0, tzinfo=UTC), "Previous 30 days"),
        (datetime(2026, 9, 14, 23, 59, tzinfo=UTC), "September 2026"),
        (datetime(2026, 9, 1, 0, 0, tzinfo=UTC), "September 2026"),
        (datetime(2026, 8, 31, 23, 59, tzinfo=UTC), "August 2026"),
        (datetime(2025, 10, 20, 0, 0, tzinfo=UTC), "October 2025"),
        (datetime(2019, 1, 1, 0, 0, tzinfo=UTC), "January 2019"),
    ],
)
def test_day_label(when: datetime, label: str) -> None:
    assert day_label(when.timestamp(), NOW) == label


def test_days_are_calendar_days_in_nows_time_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    late_utc_yesterday = datetime(2026, 10, 14, 20, 0, tzinfo=UTC)  # 05:00 on the 15th in Tokyo
    assert day_label(late_utc_yesterday.timestamp(), NOW) == "Yesterday"
    assert day_label(late_utc_yesterday.timestamp(), NOW.astimezone(tokyo)) == "Today"


def test_naive_now_means_local_time() -> None:
    local_now = datetime(2026, 10, 15, 12, 0)
    assert day_label(local_now.timestamp(), local_now) == "Today"
    assert day_label((local_now - timedelta(days=1)).timestamp(), local_now) == "Yesterday"


def test_group_by_day_orders_sections_and_conversations_newest_first() -> None:
    conversations = [
        at(datetime(2026, 8, 2, tzinfo=UTC), "august"),
        at(NOW - timedelta(hours=1), "today-late"),
        at(datetime(2026, 10, 14, 9, 0, tzinfo=UTC), "yesterday"),
        at(datetime(2026, 9, 3, tzinfo=UTC), "september"),
        at(NOW - timedelta(hours=5), "today-early"),
        at(datetime(2026, 10, 10, tzinfo=UTC), "week"),
        at(datetime(2026, 9, 20, tzinfo=UTC), "month"),
        at(datetime(2026, 8, 20, tzinfo=UTC), "august-late"),
    ]
    groups = group_by_day(conversations, NOW)
    assert [(label, [c.title for c in items]) for label, items in groups] == [
        ("Today", ["today-late", "today-early"]),
        ("Yesterday", ["yesterday"]),
        ("Previous 7 days", ["week"]),
        ("Previous 30 days", ["month"]),
        ("September 2026", ["september"]),
        ("August 2026", ["august-late", "august"]),
    ]


def test_group_by_day_of_nothing() -> None:
    assert group_by_day([], NOW) == []


def test_group_by_day_takes_any_iterable() -> None:
    groups = group_by_day(iter([at(NOW, "only")]), NOW)
    assert groups == [("Today", [at(NOW, "only")])]
