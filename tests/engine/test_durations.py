"""The one duration parser (``keep_alive``, ``ttl``, ``--model-ttl``, the setting): numbers and
Go durations, bounded, everything else a DurationError that says what to write."""

from __future__ import annotations

import pytest

from app.engine.durations import MAX_SECONDS, DurationError, describe, seconds_of


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (0, 0.0),
        (-1, -1.0),
        (90, 90.0),
        (1.5, 1.5),
        ("5m", 300.0),
        (" 1h30m ", 5400.0),
        ("-1", -1.0),
        ("250ms", 0.25),
        ("2.5s", 2.5),
        (int(MAX_SECONDS), MAX_SECONDS),
    ],
)
def test_durations_and_numbers(value: object, seconds: float | None) -> None:
    assert seconds_of(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        True,
        "",
        "five",
        "5 m",
        "1d",
        "nan",
        "inf",
        "1e400",
        float("nan"),
        float("inf"),
        MAX_SECONDS + 1,
        pytest.param(-(10**30_000), id="a 30,000-digit int"),  # compared exactly
        "9" * 65,
        "1" * 30_000,
        [5],
        {"m": 5},
        "1h\x00",
    ],
)
def test_anything_else_is_refused_in_a_line(value: object) -> None:
    with pytest.raises(DurationError) as refused:
        seconds_of(value)
    assert len(str(refused.value)) < 300


def test_described_for_people() -> None:
    assert [describe(s) for s in (None, -1, 45, 300, 3600, 5400)] == [
        "never",
        "never",
        "45 s",
        "5 min",
        "1 h",
        "1 h 30 min",
    ]
