"""Modules are split by job: none reaches into another's ``_private`` names, and none is a shim.

A module that imports another's ``_helper`` (``from x import _helper``, or ``x._helper`` on an
imported module) shares a job with it: the helper is public in its one home, or the two are one
module. A re-export shim (a module importing names only to hand them on: ``from x import y as
y``, an imported name listed in ``__all__`` or never used, ``NAME = module.NAME``) gives a name
two homes and hides where it lives: importers name the module that defines it (``from x import
y`` where x only imports y is a reach through x). A package's ``__init__`` is its public face
and may gather its modules' names.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWED_PREFIXES: tuple[str, ...] = ()  # none: every module is split by job


def _modules() -> dict[str, ast.Module]:
    return {
        path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted((ROOT / "app").rglob("*.py"))
    }


def _module_name(relpath: str) -> str:
    name = relpath.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def _absolute(relpath: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = _module_name(relpath).split(".")
    if not relpath.endswith("__init__.py"):
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _app_module_aliases(relpath: str, tree: ast.Module) -> dict[str, str]:
    """Local names bound to an app module by an import: ``{alias: module}``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("app.") and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(relpath, node)
            if module == "app" or module.startswith("app."):
                for alias in node.names:
                    # `from app.engine import llamacpp`: a module if such a file exists
                    full = f"{module}.{alias.name}"
                    path = ROOT / full.replace(".", "/")
                    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
                        aliases[alias.asname or alias.name] = full
    return aliases


def _private_reaches(relpath: str, tree: ast.Module) -> list[str]:
    own = _module_name(relpath)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(relpath, node)
            if module.startswith("app") and module != own:
                found += [f"from {module} import {a.name}" for a in node.names if _private(a.name)]
            elif not module.startswith("app"):
                continue
        elif isinstance(node, ast.Import):
            found += [
                f"import {a.name}"
                for a in node.names
                if a.name.startswith("app.") and any(map(_private, a.name.split(".")))
            ]
    aliases = _app_module_aliases(relpath, tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and aliases[node.value.id] != own
            and _private(node.attr)
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def _shims(relpath: str, tree: ast.Module) -> list[str]:
    imported: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            for alias in node.names:
                if isinstance(node, ast.ImportFrom) and alias.asname == alias.name:
                    return [f"from {node.module} import {alias.name} as {alias.asname}"]
                imported[(alias.asname or alias.name).split(".")[0]] = node.lineno
    found: list[str] = []
    aliases = _app_module_aliases(relpath, tree)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id != "__all__"
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in aliases
            and node.value.attr == node.targets[0].id
        ):
            found.append(f"{node.targets[0].id} = {node.value.value.id}.{node.value.attr}")
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            found += [
                f"__all__ lists the imported {e.value}"
                for e in node.value.elts
                if isinstance(e, ast.Constant) and e.value in imported
            ]
    used = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)
    }
    # names quoted in annotations count as used
    used |= {
        word
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 200
        for word in n.value.replace("[", " ").replace("]", " ").replace(",", " ").split()
    }
    found += [f"imports {name} without using it" for name in imported if name not in used]
    return found


@functools.cache
def _definitions(module: str) -> tuple[set[str], set[str]] | None:
    """What an app module (not a package) defines, and what it imports: ``None`` if no file."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.is_file():
        return None
    defined: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            imported |= {a.asname or a.name.split(".")[0] for a in node.names}
    return defined, imported


def _reaches_through(relpath: str, tree: ast.Module) -> list[str]:
    """``from x import y`` where x only imports y: the import names a copy, not y's home."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(relpath, node)
            names = _definitions(module) if module.startswith("app.") else None
            if names is not None:
                defined, imported = names
                found += [
                    f"from {module} import {a.name}"
                    for a in node.names
                    if a.name in imported and a.name not in defined
                ]
    return found


def _violations(check: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for relpath, tree in _modules().items():
        if check == "shim" and relpath.endswith("__init__.py"):
            continue  # a package's __init__ is its public face: it may gather its modules' names
        checks = {"private": _private_reaches, "shim": _shims, "through": _reaches_through}
        sites = checks[check](relpath, tree)
        if sites:
            found[relpath] = sites
    return found


def _unallowed(found: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: v for k, v in found.items() if not k.startswith(ALLOWED_PREFIXES)}


def test_no_module_imports_another_modules_private_names() -> None:
    assert not _unallowed(_violations("private"))


def test_no_module_is_a_re_export_shim() -> None:
    assert not _unallowed(_violations("shim"))


def test_names_are_imported_from_their_home() -> None:
    assert not _unallowed(_violations("through"))


def test_the_checks_find_what_they_forbid() -> None:
    tree = ast.parse(
        "from app.engine.llamacpp import _llama_cpp\n"
        "from app.engine import sizing\n"
        "import app.engine.types as t\n"
        "DEFAULT_N_CTX = sizing.DEFAULT_N_CTX\n"
        "x = t._job_ids(_llama_cpp)\n"
    )
    assert _private_reaches("app/x.py", tree) == [
        "from app.engine.llamacpp import _llama_cpp",
        "t._job_ids",
    ]
    assert _shims("app/x.py", tree) == ["DEFAULT_N_CTX = sizing.DEFAULT_N_CTX"]
    assert _shims("app/x.py", ast.parse("from app.engine.gguf import human_bytes\n")) == [
        "imports human_bytes without using it"
    ]
    assert _shims("app/x.py", ast.parse("from a import b as b\n")) == ["from a import b as b"]
    tree = ast.parse("from app.engine.llamacpp import choose_n_ctx\n")
    assert _reaches_through("app/x.py", tree) == ["from app.engine.llamacpp import choose_n_ctx"]
    tree = ast.parse("from app.engine.gguf import f\n__all__ = ['f']\n")
    assert _shims("app/x.py", tree) == ["__all__ lists the imported f"]
