"""The top-level resources/ folder is found in a source checkout, an installed wheel and the
PyInstaller bundle, and every file in it travels to each."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from app import resources

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "resources"


def _files() -> list[str]:
    return sorted(p.relative_to(SOURCE).as_posix() for p in SOURCE.rglob("*") if p.is_file())


@pytest.fixture
def fresh_root() -> Iterator[None]:
    """Forget the folder found so far (the tests move where it is)."""
    resources.root.cache_clear()
    yield
    resources.root.cache_clear()


def test_the_checkout_finds_every_resource() -> None:
    names = _files()
    assert {"icon.svg", "icon.png", "themes/app.qss", "linux/ember.desktop"} <= set(names)
    assert resources.root() == SOURCE
    for name in names:
        assert resources.path(name).read_bytes() == (SOURCE / name).read_bytes(), name
    sheets = resources.stylesheets()
    assert sheets[0].name == "app.qss"
    assert {p.name for p in sheets} == {Path(n).name for n in names if n.endswith(".qss")}
    with pytest.raises(FileNotFoundError, match=r"themes/none\.qss is missing"):
        resources.path("themes/none.qss")


def test_the_old_package_is_gone() -> None:
    """The icon and the stylesheets are read through app.resources only."""
    assert importlib.util.find_spec("app.ui.resources") is None


def _bundle_config() -> ModuleType:
    """packaging/ is not a package (it must not shadow PyPI's ``packaging``): load by path."""
    if "bundle_config" in sys.modules:
        return sys.modules["bundle_config"]
    spec = importlib.util.spec_from_file_location(
        "bundle_config", ROOT / "packaging" / "bundle_config.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bundle_config"] = module
    spec.loader.exec_module(module)
    return module


def test_the_bundle_collects_every_resource_where_the_app_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_root: None
) -> None:
    """PyInstaller copies each (source, folder) pair of datas() into the bundle's data folder
    (sys._MEIPASS); laid out the same way, that is where the frozen app finds them."""
    bundled = tmp_path / "_internal"
    for source, folder in _bundle_config().datas():
        (bundled / folder).mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, bundled / folder)
    monkeypatch.setattr(sys, "_MEIPASS", str(bundled), raising=False)
    assert resources.root() == bundled / "resources"
    for name in _files():
        assert resources.path(name).read_bytes() == (SOURCE / name).read_bytes(), name


def test_missing_resources_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_root: None
) -> None:
    monkeypatch.setattr(resources, "_candidates", lambda: [tmp_path])
    with pytest.raises(FileNotFoundError, match=r"resources .* are missing .*reinstall Ember"):
        resources.root()


@pytest.mark.slow  # builds a wheel and a virtual environment
def test_an_installed_wheel_finds_every_resource(tmp_path: Path) -> None:
    """Build the wheel from a copy of the sources, install it into a fresh environment and ask
    the installed app.resources, run from elsewhere, for every file."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("app", "resources"):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("ember-*.whl")
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    code = (
        "import sys; from app import resources; "
        "print(resources.root()); "
        "[print(resources.path(n).read_bytes() == open(sys.argv[1] + '/' + n, 'rb').read()) "
        "for n in sys.argv[2:]]"
    )
    names = _files()
    out = subprocess.run(
        [str(python), "-I", "-c", code, str(SOURCE), *names],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split()
    assert Path(out[0]) == (env_dir / "share" / "ember").resolve()
    assert out[1:] == ["True"] * len(names)
