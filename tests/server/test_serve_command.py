"""`ember serve` as a user runs it: a real subprocess, the real model, the `openai` SDK."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import openai

from app.server.runner import bind_socket
from tests.helpers.cli import EMBER
from tests.helpers.net import free_port, wait_for_health


def test_serve_answers_then_stops_cleanly_on_sigterm(gemma_path: Path, ember_home: Path) -> None:
    port = free_port()
    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    process = subprocess.Popen(
        [*EMBER, "serve", "--model", str(gemma_path), "--port", str(port), "--ctx", "1024"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        root = f"http://127.0.0.1:{port}"
        wait_for_health(root, process)
        with openai.OpenAI(base_url=f"{root}/v1", api_key="x", max_retries=0) as client:
            r = client.chat.completions.create(
                model="gemma-3-270m-q4_k_m",
                messages=[{"role": "user", "content": "Hi"}],
                max_tokens=3,
                temperature=0,
                logit_bias={"1": -100, "106": -100},  # no end of turn: some text, every time
            )
            assert r.choices[0].message.content
            unnamed = client.chat.completions.create(
                model="", messages=[{"role": "user", "content": "Hi"}], max_tokens=2
            )
            assert unnamed.model == "gemma-3-270m-q4_k_m"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.splitlines()[0] == f"Ember API at {root}/v1"
    assert "Traceback" not in err


def test_taken_port_is_one_line_and_exit_1(ember_home: Path) -> None:
    taken = bind_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        r = subprocess.run(
            [*EMBER, "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "EMBER_HOME": str(ember_home)},
            check=False,
        )
    finally:
        taken.close()
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("ember: error: Port ") and "already in use" in r.stderr
    assert r.stdout == ""


def test_network_bind_without_key_is_refused(ember_home: Path) -> None:
    r = subprocess.run(
        [*EMBER, "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "EMBER_HOME": str(ember_home), "EMBER_API_KEY": ""},
        check=False,
    )
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "API key" in r.stderr
