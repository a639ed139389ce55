"""Sidebar sections: conversations grouped by the local day of their last activity."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from app.chats.models import Conversation

TODAY = "Today"
YESTERDAY = "Yesterday"
PREVIOUS_7_DAYS = "Previous 7 days"
PREVIOUS_30_DAYS = "Previous 30 days"

# Fixed English names: calendar.month_name follows the C locale and would vary between machines.
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def day_label(timestamp: float, now: datetime) -> str:
    """The section for a unix time, seen from ``now``: Today, Yesterday, ..., "October 2026".

    Days are calendar days in ``now``'s time zone (the local zone if ``now`` is naive).
    A time in the future (a clock that was ahead) counts as today.
    """
    when = datetime.fromtimestamp(timestamp, tz=now.tzinfo)
    days = (now.date() - when.date()).days
    if days <= 0:
        return TODAY
    if days == 1:
        return YESTERDAY
    if days <= 7:
        return PREVIOUS_7_DAYS
    if days <= 30:
        return PREVIOUS_30_DAYS
    return f"{_MONTHS[when.month - 1]} {when.year}"


def group_by_day(
    conversations: Iterable[Conversation], now: datetime
) -> list[tuple[str, list[Conversation]]]:
    """Sections in display order, newest first, each with its conversations newest first.

    Pure: ``now`` is passed in, so the result depends on nothing but the arguments.
    """
    ordered = sorted(conversations, key=lambda conversation: -conversation.updated_at)
    groups: list[tuple[str, list[Conversation]]] = []
    for conversation in ordered:
        label = day_label(conversation.updated_at, now)
        if not groups or groups[-1][0] != label:
            groups.append((label, []))
        groups[-1][1].append(conversation)
    return groups
