"""Ollama's port, optionally: `ember serve --ollama-port [PORT]` or the server.ollama_port
setting also listens there (a real subprocess, the official `ollama` client); a taken port is
one sentence saying who holds it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import ollama

from app.cli import build_parser
from app.config import Settings
from app.server.runner import bind_socket
from tests.helpers.cli import ember, reaped, serve_process, stop
from tests.helpers.fake_ollama import fake_ollama
from tests.helpers.net import free_port, wait_for_health


def test_the_flag_alone_means_ollamas_port() -> None:
    parser = build_parser("serve")
    assert parser.parse_args(["serve", "--ollama-port"]).ollama_port == 11434
    assert parser.parse_args(["serve", "--ollama-port", "11500"]).ollama_port == 11500
    assert parser.parse_args(["serve"]).ollama_port is None


def test_the_setting_makes_serve_listen_on_the_ollama_port_too(ember_home: Path) -> None:
    port, extra = free_port(), free_port()
    Settings().set("server.ollama_port", extra)
    with reaped(serve_process("--port", str(port))) as process:
        wait_for_health(f"http://127.0.0.1:{extra}", process)
        with ollama.Client(host=f"http://127.0.0.1:{extra}") as client:
            assert client.list().models == []
        with ollama.Client(host=f"http://127.0.0.1:{port}") as client:  # the main port too
            assert client.list().models == []
        out, err = stop(process, timeout=30)
    assert process.returncode == 0, err
    assert out.splitlines()[:2] == [
        f"Ember API at http://127.0.0.1:{port}/v1",
        f"Ollama-compatible API at http://127.0.0.1:{extra}",
    ]


def serve_on(extra: int) -> subprocess.CompletedProcess[str]:
    return ember("serve", "--port", str(free_port()), "--ollama-port", str(extra), timeout=60)


def test_a_port_held_by_ollama_itself_is_one_sentence(ember_home: Path) -> None:
    with fake_ollama() as port:
        r = serve_on(port)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"ember: error: Port {port} is taken by Ollama itself")
    assert "ollama 0.9.0" in r.stderr and "quit Ollama" in r.stderr


def test_a_port_held_by_another_program_says_so(ember_home: Path) -> None:
    taken = bind_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:
        r = serve_on(port)
    finally:
        taken.close()
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "already in use by another program" in r.stderr and "--ollama-port" in r.stderr
