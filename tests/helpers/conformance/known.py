"""Problems the suite finds that are not fixed yet, each with why, by window size. A test fails
on any other problem, and also when a known one is no longer seen at its size (strict, like
``xfail(strict=True)``): take it off this list in the commit that fixes it."""

from __future__ import annotations

import re

KNOWN: dict[tuple[int, int], dict[str, str]] = {}


def sort_out(problems: list[str], size: tuple[int, int]) -> tuple[list[str], list[str]]:
    """(the problems not known at this size, the known patterns no longer seen)."""
    patterns = KNOWN.get((size[0], size[1]), {})
    seen: set[str] = set()
    left = []
    for problem in problems:
        match = next((p for p in patterns if re.search(p, problem)), None)
        if match is None:
            left.append(problem)
        else:
            seen.add(match)
    return left, sorted(set(patterns) - seen)
