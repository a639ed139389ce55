"""``ember ps`` against a real ``ember serve`` (subprocesses, the real model): the table and
``--json`` say what is loaded, its memory, context and until when (``--model-ttl 5m``);
``--model-ttl`` values that are no duration are one clear line and exit 2, before anything
binds or loads."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.helpers.cli import ember, reaped, serve_process, stop
from tests.helpers.model_copies import model_copies
from tests.helpers.net import free_port, wait_for_health


def test_ember_ps_lists_a_model_loaded_for_a_request_and_until_when(
    gemma_path: Path, ember_home: Path
) -> None:
    folder = ember_home / "models" / "test" / "gemma-copy"
    folder.mkdir(parents=True)
    model_copies(gemma_path, folder, ("gemma-copy",))
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    args = ("--port", str(port), "--ctx", "512", "--model-ttl", "5m")
    with reaped(serve_process(*args)) as process:
        wait_for_health(root, process)
        empty = ember("ps", "--url", root)
        assert empty.returncode == 0, empty.stderr
        assert empty.stdout.strip() == "No model is loaded."
        (listed,) = httpx.get(f"{root}/v1/models").json()["data"]
        body = {"model": listed["id"], "prompt": "Hi", "max_tokens": 2}
        assert httpx.post(f"{root}/v1/completions", json=body, timeout=600).status_code == 200

        table = ember("ps", "--url", root)
        assert table.returncode == 0, table.stderr
        head, row = table.stdout.splitlines()
        assert head.split() == ["MODEL", "MEMORY", "CONTEXT", "UNTIL"]
        assert row.startswith(listed["id"]) and " 512 " in row and "MB" in row
        assert "(in 5 min)" in row or "(in 4 min)" in row

        as_json = ember("ps", "--url", f"{root}/v1", "--json")
        (model,) = json.loads(as_json.stdout)
        assert model["id"] == listed["id"] and model["ttl"] == 300
        assert model["memory_bytes"] > 100_000_000 and model["context_length"] == 512
        stop(process, timeout=60)
    gone = ember("ps", "--url", root)
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1
    assert "No Ember server answers" in gone.stderr


@pytest.mark.parametrize(
    "value", ["abc", "1" * 30_000, "1e400", "1e12", "nan", "5 minutes", "1h\x01"]
)
def test_a_model_ttl_that_is_no_duration_is_one_line_and_exit_2(value: str) -> None:
    done = ember("serve", "--port", "1", f"--model-ttl={value}", timeout=60)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "--model-ttl" in last and len(last) < 400, last
    assert "Traceback" not in done.stderr


def test_ember_ps_refuses_a_url_that_is_none() -> None:
    done = ember("ps", "--url", "ftp://x" + "y" * 5000)
    assert done.returncode == 1 and "no http(s) URL" in done.stderr
    assert len(done.stderr) < 400
