"""Ask the real llama.cpp to parse grammars, in a child process (a crash must not take the test
run down), each on a thread with a small stack (1 MB, like a worker thread on some systems),
against the real model's vocabulary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

STACK_KB = 1024

_CHILD = r"""
import json, sys, threading
import llama_cpp.llama_cpp as ll

quiet = ll.llama_log_callback(lambda *_: None)
ll.llama_log_set(quiet, None)
ll.llama_backend_init()
params = ll.llama_model_default_params()
params.vocab_only = True
model = ll.llama_model_load_from_file(sys.argv[1].encode(), params)
vocab = ll.llama_model_get_vocab(model)
threading.stack_size(int(sys.argv[2]) * 1024)
answers = []
for text in json.load(sys.stdin):
    def parse(text=text):
        g = ll.llama_sampler_init_grammar(vocab, text.encode(), b"root")
        answers.append("parsed" if g else "refused")
        if g:
            ll.llama_sampler_free(g)
    thread = threading.Thread(target=parse)
    thread.start()
    thread.join()
print(json.dumps(answers))
"""


def llama_cpp_parses(gemma_path: Path, grammars: list[str], stack_kb: int = STACK_KB) -> list[bool]:
    """For each grammar, whether llama.cpp parses it (True) or refuses it (False)."""
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, str(gemma_path), str(stack_kb)],
        input=json.dumps(grammars),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "GGML_NO_BACKTRACE": "1"},  # no gdb backtrace on a crash
    )
    assert r.returncode == 0, f"llama.cpp crashed ({r.returncode}): {r.stderr[-1000:]}"
    answers: list[str] = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(answers) == len(grammars)
    return [a == "parsed" for a in answers]
