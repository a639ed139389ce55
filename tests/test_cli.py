"""The CLI end to end, as a user runs it: real subprocesses on the real model."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

from app import __version__
from tests.helpers.cli import EMBER, ember


def test_version() -> None:
    r = ember("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"Ember {__version__}"


def test_help_on_each_command() -> None:
    for cmd in ("run", "info"):
        r = ember(cmd, "--help")
        assert r.returncode == 0, r.stderr
        assert "usage: ember " + cmd in r.stdout


def test_run_streams_an_answer(gemma_path: Path) -> None:
    r = ember("run", str(gemma_path), "The capital of France is", "--raw", "--temp", "0", "-n", "8")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip()) > 0
    assert r.stderr == ""


def test_run_json_prints_usage_and_timings(gemma_path: Path) -> None:
    r = ember("run", str(gemma_path), "Hello", "--temp", "0", "-n", "5", "--json", "-c", "1024")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["finish_reason"] in ("length", "stop")
    assert summary["usage"]["completion_tokens"] <= 5
    assert summary["usage"]["prompt_tokens"] > 0
    assert summary["timings"]["time_to_first_token"] > 0


def test_run_constrained_by_json_schema(gemma_path: Path, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        )
    )
    r = ember(
        "run",
        str(gemma_path),
        "Status:",
        "--raw",
        "--json-schema",
        str(schema),
        "-n",
        "20",
        "-c",
        "1024",
    )
    assert r.returncode == 0, r.stderr
    assert isinstance(json.loads(r.stdout)["ok"], bool)


def test_interactive_through_a_pipe_keeps_history(gemma_path: Path) -> None:
    r = ember(
        "run",
        str(gemma_path),
        "--temp",
        "0",
        "-n",
        "6",
        "-c",
        "1024",
        "--json",
        stdin="My name is Ada.\nWhat is my name?\n/bye\n",
    )
    assert r.returncode == 0, r.stderr
    summaries = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 2
    # the second turn's prompt holds the first turn: history is kept, and the cache reused
    assert summaries[1]["usage"]["prompt_tokens"] > summaries[0]["usage"]["prompt_tokens"] + 5
    assert summaries[1]["usage"]["cached_tokens"] >= summaries[0]["usage"]["prompt_tokens"]


def test_interactive_with_a_small_context_drops_old_turns_and_keeps_answering(
    gemma_path: Path,
) -> None:
    """With 256 tokens of context, eight turns outgrow it by far: the chat leaves the oldest
    turns out (and says so) instead of failing with a context overflow; a message too long
    to ever fit is refused with what to do, and the chat goes on."""
    ask = "Please answer in one short sentence about its history and culture. What is {} known for?"
    cities = ["Paris", "London", "Rome", "Berlin", "Madrid", "Lisbon", "Vienna", "Prague"]
    lines = [ask.format(city) for city in cities]
    lines.insert(4, "word " * 400)
    r = ember(
        "run",
        str(gemma_path),
        "-c",
        "256",
        "--temp",
        "0",
        "-n",
        "24",
        "--system",
        "You are brief.",
        "--json",
        stdin="\n".join([*lines, "/bye"]) + "\n",
    )
    assert r.returncode == 0, r.stderr
    summaries = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == len(cities), r.stderr  # every question answered, the long one not
    assert [s["finish_reason"] for s in summaries if "error" in s] == [], r.stderr
    assert all(s["usage"]["total_tokens"] <= 256 for s in summaries)
    assert "earlier messages no longer fit in the 256-token context" in r.stderr
    assert "Your message is too long for this model's context" in r.stderr
    assert "--ctx" in r.stderr


def test_interactive_end_of_input_leaves_cleanly(gemma_path: Path) -> None:
    r = ember("run", str(gemma_path), "-c", "1024", stdin="")
    assert r.returncode == 0, r.stderr


def _read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        assert left > 0, f"timed out waiting for {needle!r}; got {buf[-500:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf


def _wait_exit(pid: int, fd: int, timeout: float) -> int:
    """The child's exit code; kills it (and fails with its last output) past ``timeout``."""
    deadline = time.monotonic() + timeout
    tail = b""
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            with contextlib.suppress(OSError):
                tail = (tail + os.read(fd, 4096))[-2000:]
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError(f"ember run did not exit; last output: {tail!r}")


def test_interactive_on_a_terminal_ctrl_c_stops_the_answer(
    gemma_path: Path, tmp_path: Path
) -> None:
    """Driven through a pseudo-terminal like a person: Ctrl+C stops the answer, not the chat."""
    # A base model may end its answer on its own within half a second; a grammar that never
    # completes keeps it writing, so the Ctrl+C always lands mid-answer.
    endless = tmp_path / "endless.gbnf"
    endless.write_text("root ::= [a-z .,] root\n")
    argv = [*EMBER, "run", str(gemma_path), "-c", "2048", "--temp", "0.9", "--json"]
    pid, fd = pty.fork()
    if pid == 0:  # child
        # Ctrl+C as a terminal gives it: a CI shell that starts the tests in the background
        # makes its children inherit SIGINT ignored, and Python keeps it ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execvp(sys.executable, [*argv, "--grammar-file", str(endless)])
    try:
        _read_until(fd, b">>> ", 120)
        os.write(fd, b"Write a very long story about dragons.\r")
        _read_until(fd, b"dragons.\r\n", 30)  # the terminal's echo of the line
        _read_until(fd, b" ", 60)  # then the answer has started
        time.sleep(0.5)
        os.write(fd, b"\x03")  # Ctrl+C
        out = _read_until(fd, b">>> ", 30)  # back at the prompt, still chatting
        assert b"Traceback" not in out
        assert b'"finish_reason": "cancelled"' in out
        os.write(fd, b"/bye\r")
        assert _wait_exit(pid, fd, 60) == 0
    finally:
        os.close(fd)


def test_info_prints_metadata_and_estimate(gemma_path: Path) -> None:
    r = ember("info", str(gemma_path))
    assert r.returncode == 0, r.stderr
    assert "gemma3" in r.stdout
    assert "Q4_K_M" in r.stdout
    assert "Memory at 8192 ctx" in r.stdout
    j = ember("info", str(gemma_path), "--json", "--ctx", "4096")
    data = json.loads(j.stdout)
    assert data["info"]["architecture"] == "gemma3"
    assert data["memory"]["n_ctx"] == 4096


def test_errors_are_one_line_and_non_zero(tmp_path: Path) -> None:
    for args in (
        ("run", str(tmp_path / "missing.gguf"), "hi"),
        ("info", str(tmp_path / "missing.gguf")),
    ):
        r = ember(*args)
        assert r.returncode == 1
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ember: error: "), r.stderr
    notgguf = tmp_path / "x.gguf"
    notgguf.write_text("hello")
    r = ember("run", str(notgguf), "hi")
    assert r.returncode == 1 and "not a GGUF" in r.stderr
