"""`ember serve` as a user runs it: a real subprocess, the real model, the `openai` SDK
(chat completions and Responses) and the `anthropic` SDK."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.server.runner import bind_socket
from tests.helpers.cli import ember, reaped, serve_process, stop
from tests.helpers.net import free_port, wait_for_health


def test_serve_answers_then_stops_cleanly_on_sigterm(gemma_path: Path, ember_home: Path) -> None:
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    args = ("--model", str(gemma_path), "--port", str(port), "--ctx", "1024")
    with reaped(serve_process(*args)) as process:
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
            # what Codex does: the Responses API, streamed, then continued from the stored one
            first = client.responses.create(
                model="gemma-3-270m-q4_k_m", input="Hi", max_output_tokens=3, temperature=0
            )
            assert first.status in ("completed", "incomplete") and first.output_text
            with client.responses.stream(
                model="gemma-3-270m-q4_k_m",
                input="And again?",
                previous_response_id=first.id,
                max_output_tokens=3,
                temperature=0,  # sampled, the first token may end the turn: no text to stream
            ) as stream:
                events = list(stream)
            types = [event.type for event in events]
            assert types[0] == "response.created" and "response.output_text.delta" in types
            # cut by max_output_tokens: it ends as OpenAI's does, response.incomplete
            assert types[-1] in ("response.completed", "response.incomplete")
            follow = events[-1].response  # type: ignore[union-attr]
            assert follow.previous_response_id == first.id
            assert follow.usage is not None and follow.usage.input_tokens_details.cached_tokens > 0
        out, err = stop(process)
    assert process.returncode == 0, err
    assert out.splitlines()[0] == f"Ember API at {root}/v1"
    assert "Traceback" not in err


def test_taken_port_is_one_line_and_exit_1(ember_home: Path) -> None:
    taken = bind_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        r = ember("serve", "--port", str(port), timeout=60)
    finally:
        taken.close()
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("ember: error: Port ") and "already in use" in r.stderr
    assert r.stdout == ""


def test_network_bind_without_key_is_refused(ember_home: Path) -> None:
    network = ("serve", "--host", "0.0.0.0", "--port", "0")
    r = ember(*network, timeout=60, env={"EMBER_API_KEY": ""})
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "API key" in r.stderr


def test_short_key_on_a_network_bind_is_refused(ember_home: Path) -> None:
    r = ember(
        "serve", "--host", "0.0.0.0", "--port", "0", timeout=60, env={"EMBER_API_KEY": "secret"}
    )
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("ember: error: The API key is 6 characters long")
    assert "at least 16" in r.stderr


def test_unusable_key_files_are_one_line_each(ember_home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.key"
    empty.write_text("\n")
    two = tmp_path / "two.key"
    two.write_text("0123456789abcdef0123\nsecond line\n")
    cases = {
        tmp_path / "missing.key": "Cannot read the API key file",
        empty: "is empty",
        two: "has several lines",
    }
    for path, message in cases.items():
        r = ember("serve", "--port", "0", "--api-key-file", str(path), timeout=60)
        assert r.returncode == 1, path
        assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr


def start_serve(*args: str, **env: str) -> tuple[subprocess.Popen[str], str]:
    """`ember serve --port 0 ARGS` and the root URL it prints."""
    process = serve_process("--port", "0", *args, **env)
    assert process.stdout is not None
    first = process.stdout.readline()
    if not first.startswith("Ember API at "):
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"ember serve did not start: {first}{err}")
    root = first.removeprefix("Ember API at ").strip().removesuffix("/v1")
    wait_for_health(root, process)
    return process, root


def stop_serve(process: subprocess.Popen[str]) -> str:
    with reaped(process):
        _, err = stop(process)
    assert process.returncode == 0, err
    return err


@pytest.mark.skipif(os.name != "posix", reason="ps, /proc and file modes")
def test_key_from_a_file_or_the_environment_stays_out_of_ps(
    ember_home: Path, tmp_path: Path
) -> None:
    """The README's way to set a key must not show it to every local user through `ps`; the
    request log holds prompts, so it is the user's only, and refusals leave their bodies out."""
    key = "0123456789abcdef0123456789abcdef"
    key_file = tmp_path / "api.key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o600)
    ember_home.chmod(0o755)  # as an older Ember left it
    process, root = start_serve("--api-key-file", str(key_file), "--log-requests")
    try:
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert key.encode() not in cmdline
        assert str(key_file).encode() in cmdline
        secret = {"model": "x", "messages": [{"role": "user", "content": "my diary entry"}]}
        assert httpx.post(f"{root}/v1/chat/completions", json=secret).status_code == 401
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{root}/v1/models", headers=headers).status_code == 200
    finally:
        err = stop_serve(process)
    assert "warning" not in err  # a 0600 key file is fine
    log_file = ember_home / "logs" / "requests.jsonl"
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(log_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(ember_home.stat().st_mode) == 0o700
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    refused = next(line for line in lines if line["status"] == 401)
    assert refused["request_body"] == "" and "diary" not in json.dumps(refused)
    assert any(line["status"] == 200 and line["path"] == "/v1/models" for line in lines)

    process, root = start_serve(EMBER_API_KEY=key)
    try:
        assert key.encode() not in Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert httpx.get(f"{root}/v1/models").status_code == 401
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{root}/v1/models", headers=headers).status_code == 200
    finally:
        stop_serve(process)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX permissions")
def test_a_key_file_others_can_read_is_warned_about(ember_home: Path, tmp_path: Path) -> None:
    key_file = tmp_path / "api.key"
    key_file.write_text("0123456789abcdef0123456789abcdef")
    key_file.chmod(0o644)
    process, _ = start_serve("--api-key-file", str(key_file))
    err = stop_serve(process)
    assert f"ember: warning: other users can read {key_file}" in err


def test_serve_answers_anthropics_api_with_aliases_and_prints_clients(
    gemma_path: Path, ember_home: Path
) -> None:
    """What Claude Code does against `ember serve`: the anthropic SDK, a Claude model name
    mapped by --alias, a stream; and --clients prints each client's settings."""
    import anthropic

    port = free_port()
    root = f"http://127.0.0.1:{port}"
    args = ["--model", str(gemma_path), "--port", str(port), "--ctx", "1024"]
    args += ["--alias", "claude-sonnet-4-5=gemma-3-270m-q4_k_m", "--clients"]
    with reaped(serve_process(*args)) as process:
        wait_for_health(root, process)
        hi: Any = [{"role": "user", "content": "Hi"}]
        with anthropic.Anthropic(base_url=root, api_key="x", max_retries=0) as client:
            with client.messages.stream(
                model="claude-sonnet-4-5", max_tokens=3, messages=hi
            ) as stream:
                message = stream.get_final_message()
            assert message.model == "claude-sonnet-4-5" and message.stop_reason
            with pytest.raises(anthropic.NotFoundError):
                client.messages.create(model="claude-opus-4-1", max_tokens=3, messages=hi)
        out, err = stop(process)
    assert process.returncode == 0, err
    assert f"Anthropic-compatible API at {root} (POST /v1/messages)" in out
    assert f"export ANTHROPIC_BASE_URL={root}\n" in out
    assert "export ANTHROPIC_MODEL=gemma-3-270m-q4_k_m" in out
    assert f'base_url = "{root}/v1"\nwire_api = "responses"' in out
    for name in ("Claude Code", "Codex", "Continue", "Cline", "Zed", "opencode", "aider"):
        assert f"== {name} ==" in out
