"""``ember serve`` from the built binary: /health, /v1/models and one chat completion."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers.bundle import Bundle, assert_self_contained
from tests.helpers.cli import reaped, stop
from tests.helpers.net import free_port, wait_for_health

pytestmark = pytest.mark.slow


def ctrl_c(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl+C as a terminal sends it (Ctrl+Break on Windows): serve stops cleanly."""
    if sys.platform == "win32":
        return stop(process, timeout=30, sig=signal.CTRL_BREAK_EVENT)
    return stop(process, timeout=30, sig=signal.SIGINT)


def test_serve_answers_models_and_a_chat_completion(
    bundle: Bundle, gemma_path: Path, tmp_path: Path
) -> None:
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(bundle.cli), "serve", "--model", str(gemma_path), "--port", str(port), "-c", "1024"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=bundle.env(tmp_path),
        cwd=tmp_path,
        creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
    )
    with reaped(process):
        wait_for_health(root, process, timeout=120)
        models = httpx.get(f"{root}/v1/models", timeout=30).json()
        ids = [m["id"] for m in models["data"]]
        assert ids, models
        reply = httpx.post(
            f"{root}/v1/chat/completions",
            json={
                "model": ids[0],
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 4,
                "temperature": 0,
                "logit_bias": {"1": -100, "106": -100},  # no end of turn: text every time
            },
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["object"] == "chat.completion"
        assert body["usage"]["completion_tokens"] > 0
        assert body["choices"][0]["message"]["content"]
        if sys.platform.startswith("linux"):
            assert_self_contained(process.pid, bundle)
        out, err = ctrl_c(process)
    assert process.returncode == 0, err
    assert out.splitlines()[0] == f"Ember API at {root}/v1"
    assert "Traceback" not in err
