"""The request log's file (`ember serve --log-requests`): it holds prompts and answers, so it
is readable by the user only, also when an older Ember created it world-readable."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.server.requestlog import RequestLog, RequestRecord

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX permissions")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def record(i: int, prompt: str = "a private prompt") -> RequestRecord:
    body = json.dumps({"messages": [{"role": "user", "content": prompt}]})
    return RequestRecord(
        i, 1.0, "POST", "/v1/chat/completions", 200, 0.1, "m", 1, 2, False, None, body, "{}", None
    )


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask most users have (022), under which a plain open() makes a 0644 file."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_new_log_and_its_folder_are_private(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "requests.jsonl"
    RequestLog(file=path).append(record(1))
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert json.loads(path.read_text())["request_body"].endswith('"a private prompt"}]}')


def test_an_older_world_readable_log_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    rotated = tmp_path / "requests.jsonl.1"
    for old in (path, rotated):
        old.write_text(json.dumps({"id": 0}) + "\n")
        old.chmod(0o644)
    RequestLog(file=path).append(record(1))
    assert mode(path) == mode(rotated) == 0o600
    assert len(path.read_text().splitlines()) == 2  # appended, nothing lost


def test_the_rotated_log_stays_private(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    log = RequestLog(file=path, max_file_bytes=200)
    for i in range(4):
        log.append(record(i, "x" * 100))
    rotated = tmp_path / "requests.jsonl.1"
    assert rotated.exists()
    assert mode(path) == mode(rotated) == 0o600
