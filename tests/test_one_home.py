"""One home per rule: a fact the app needs in several places is defined once and imported
(a forwarding copy drifts from the original).

``HOMES`` lists each rule's name (a function, class or module-level constant) and the one module
that defines it; every other module imports it from there (tests/test_private_imports.py checks
that imports name the home, not a module that only passes the name on). The tests below check
the places that once held copies now derive from the home.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# rule name -> the one module that defines it
HOMES = {
    # what fits in memory
    "available_memory": "app/engine/sizing.py",
    # load defaults: LoadParams' fields, read by the settings registry and the CLI's flags
    "DEFAULT_N_BATCH": "app/engine/types.py",
    "DEFAULT_KV_CACHE_TYPE": "app/engine/types.py",
    "DEFAULT_PARALLEL": "app/engine/types.py",
    # the id of a model file no one named: the app's loads, `ember serve FILE`, the library
    "file_model_id": "app/library/quant.py",
    # the key the engine keeps a model under when its caller gave none
    "engine_model_id": "app/engine/types.py",
    # refusing a request before any route runs, in the shape of its API family
    "send_refusal": "app/server/protocols.py",
    "refusal_body": "app/server/protocols.py",
    "error_body": "app/server/errors.py",
    # bytes in words: a limit in MiB, a size in decimal units (no module defines its own "MB")
    "MIB": "app/engine/gguf_format.py",
    "mib_text": "app/engine/gguf_format.py",
    "human_bytes": "app/engine/gguf_format.py",
    # two plans, one name each: what a load would do; which turns of a chat fit the context
    "plan_load": "app/engine/sizing.py",
    "LoadPlan": "app/engine/sizing.py",
    "plan_context": "app/engine/fitting.py",
    "ContextPlan": "app/engine/fitting.py",
    # a job noticing its cancel in its own thread: the engine's public errors live in types.py
    "JobCancelledError": "app/engine/types.py",
}
# names that must have no home at all: they meant two different things
NO_HOME = ("MB", "CancelledError", "EmbeddingCancelledError")


def _definitions(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    for node in tree.body:  # module-level constants
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_each_rule_is_defined_in_its_one_home() -> None:
    defined: dict[str, list[str]] = {name: [] for name in HOMES}
    for path in sorted((ROOT / "app").rglob("*.py")):
        for name in _definitions(ast.parse(path.read_text(encoding="utf-8"))) & set(defined):
            defined[name].append(path.relative_to(ROOT).as_posix())
    assert defined == {name: [home] for name, home in HOMES.items()}


def test_no_module_defines_an_ambiguous_name() -> None:
    found = [
        (path.relative_to(ROOT).as_posix(), name)
        for path in sorted((ROOT / "app").rglob("*.py"))
        for name in _definitions(ast.parse(path.read_text(encoding="utf-8"))) & set(NO_HOME)
    ]
    assert not found


def test_the_engine_uses_the_one_available_memory() -> None:
    from app.engine import llamacpp, sizing

    assert llamacpp.available_memory is sizing.available_memory


def test_the_settings_and_the_cli_load_with_load_params_defaults() -> None:
    from app.commands.options import add_load_flags
    from app.config import SETTINGS
    from app.engine.types import LoadParams

    load = LoadParams()
    defaults = {key: setting.default for key, setting in SETTINGS.items()}
    assert defaults["load.n_batch"] == load.n_batch
    assert defaults["load.cache_type"] == load.cache_type_k == load.cache_type_v
    assert defaults["load.parallel"] == load.n_parallel
    assert defaults["load.use_mmap"] == load.use_mmap
    assert defaults["load.use_mlock"] == load.use_mlock
    assert defaults["load.draft_max"] == load.draft_max
    parser = argparse.ArgumentParser()
    add_load_flags(parser)
    args = parser.parse_args([])
    assert (args.batch, args.kv_type, args.parallel, args.draft_max) == (
        load.n_batch,
        load.cache_type_k,
        load.n_parallel,
        load.draft_max,
    )


def test_a_model_file_outside_the_library_has_one_id(tmp_path: Path) -> None:
    from app.config import paths
    from app.library.quant import file_model_id
    from app.server.catalog import entry_for_file

    split = tmp_path / "Model-Q4_K_M-00001-of-00002.gguf"
    assert entry_for_file(split).id == file_model_id(split, paths().models_dir) == "Model-Q4_K_M"
    inside = paths().models_dir / "alice" / "repo" / "m.gguf"
    assert entry_for_file(inside).id == "alice/repo/m.gguf"
