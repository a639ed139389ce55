"""Ctrl+C in ``ember run --mcp`` ends at once wherever it lands: at the question before a call
(it was read on the loop's thread, so it acted only after Enter) and while the servers start
(their processes do not outlive ember). Run as a user does, with the real model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers.cli import ember
from tests.helpers.mcp_config import SILENT, TIME_ARGS, process_alive, wait_for_file

PROMPT = "Allow get_current_time (time)? [y]es once, [a]lways, [N]o: "


def start(*args: str) -> subprocess.Popen[bytes]:
    """``ember ARGS`` with an open stdin nobody writes to (a person who has not typed yet)."""
    return subprocess.Popen(
        [*AS_IN_A_TERMINAL, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


# `ember` as a terminal runs it, with Ctrl+C: a program started by a shell in the background (as
# a CI runner may start the tests) inherits SIGINT ignored, and Python keeps it ignored.
AS_IN_A_TERMINAL = [
    sys.executable,
    "-c",
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'ember'; runpy.run_module('app', run_name='__main__', alter_sys=True)",
]


def read_until(process: subprocess.Popen[bytes], text: str) -> str:
    """Its stderr up to ``text`` (a prompt ends without a newline); pytest's timeout bounds it."""
    assert process.stderr is not None
    seen = b""
    while text.encode() not in seen:
        chunk = os.read(process.stderr.fileno(), 4096)
        assert chunk, f"ember ended before saying {text!r}: {seen.decode(errors='replace')}"
        seen += chunk
    return seen.decode()


def test_ctrl_c_at_the_question_before_a_call_ends_the_answer_at_once(
    ember_home: Path, gemma_path: Path
) -> None:
    ember("mcp", "add", "time", "--", sys.executable, *TIME_ARGS)
    args = ("--tool-choice", "required", "--temp", "0", "-n", "40", "What time is it?")
    with start("run", str(gemma_path), "--mcp", "time", *args) as process:
        try:
            shown = read_until(process, PROMPT)
            process.send_signal(signal.SIGINT)
            process.wait()  # its stdin stays open: nothing typed, no end of input
            assert process.stderr is not None
            err = shown + process.stderr.read().decode()
        finally:
            process.kill()
    assert process.returncode == 0, err
    assert "✗ Error: the user stopped the answer before this call ran." in err


def test_ctrl_c_while_a_server_starts_ends_ember_and_the_server(
    ember_home: Path, gemma_path: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    ember("mcp", "add", "silent", "--", sys.executable, "-c", SILENT, str(pid_file))
    with start("run", str(gemma_path), "--mcp", "silent", "--yes", "What time is it?") as process:
        try:
            wait_for_file(pid_file)  # started, and never answers: connecting would take 30 s
            process.send_signal(signal.SIGINT)
            process.communicate()
        finally:
            process.kill()
    assert process.returncode == 130
    assert not process_alive(int(pid_file.read_text()))
