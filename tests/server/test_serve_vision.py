"""``ember serve --model FILE`` loads the model with the vision projector in its folder, as a
user runs it: a real subprocess, the real test model beside the tiny built projector
(tests/helpers/projector.py: random weights, the answer means nothing, the path is real), and
the `openai` SDK sending an image."""

from __future__ import annotations

import base64
from pathlib import Path

import openai

from tests.helpers.cli import ember, reaped, serve_process, stop
from tests.helpers.images import png
from tests.helpers.net import free_port, wait_for_health
from tests.helpers.projector import IMAGE_TOKENS, model_folder


def test_serve_loads_the_models_projector_and_an_image_reaches_it(
    gemma_path: Path, ember_home: Path, tmp_path: Path
) -> None:
    model = model_folder(gemma_path, tmp_path / "vision", projector=True)
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    with reaped(
        serve_process("--model", str(model), "--port", str(port), "--ctx", "1024")
    ) as process:
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
        _out, err = stop(process)
    assert process.returncode == 0, err


def test_serve_mmproj_without_a_model_is_one_line(tmp_path: Path) -> None:
    r = ember("serve", "--port", "0", "--mmproj", str(tmp_path / "mmproj.gguf"))
    assert r.returncode == 1
    assert r.stderr.startswith("ember: error: --mmproj") and r.stderr.count("\n") == 1
