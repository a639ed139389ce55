"""``ember serve --model FILE`` loads the model with the vision projector in its folder, as a
user runs it: a real subprocess, the real test model beside the tiny built projector
(tests/helpers/projector.py: random weights, the answer means nothing, the path is real), and
the `openai` SDK sending an image."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
from pathlib import Path

import openai

from tests.helpers.cli import EMBER, ember
from tests.helpers.images import png
from tests.helpers.net import free_port, wait_for_health
from tests.helpers.projector import IMAGE_TOKENS, model_folder


def test_serve_loads_the_models_projector_and_an_image_reaches_it(
    gemma_path: Path, ember_home: Path, tmp_path: Path
) -> None:
    model = model_folder(gemma_path, tmp_path / "vision", projector=True)
    port = free_port()
    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    process = subprocess.Popen(
        [*EMBER, "serve", "--model", str(model), "--port", str(port), "--ctx", "1024"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        root = f"http://127.0.0.1:{port}"
        wait_for_health(root, process)
        url = "data:image/png;base64," + base64.b64encode(png(32, 32)).decode("ascii")
        with openai.OpenAI(base_url=f"{root}/v1", api_key="x", max_retries=0) as client:
            r = client.chat.completions.create(
                model="",  # the model loaded at start
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is this?"},
                            {"type": "image_url", "image_url": {"url": url}},
                        ],
                    }
                ],
                max_tokens=2,
                temperature=0,
            )
        assert r.usage is not None and r.usage.prompt_tokens > IMAGE_TOKENS
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err


def test_serve_mmproj_without_a_model_is_one_line(tmp_path: Path) -> None:
    r = ember("serve", "--port", "0", "--mmproj", str(tmp_path / "mmproj.gguf"))
    assert r.returncode == 1
    assert r.stderr.startswith("ember: error: --mmproj") and r.stderr.count("\n") == 1
