"""The top-level resources/ folder is found in a source checkout, an installed wheel and the
PyInstaller bundle, and every file in it travels to each."""

from __future__ import annotations

import configparser
import importlib.util
import json
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from xml.etree import ElementTree

import pytest

from app import resources

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "resources"


def _metadata() -> dict[str, str]:
    data: dict[str, str] = json.loads((SOURCE / "app.json").read_text("utf-8"))
    return data


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
    assert {"icon.svg", "icon.png", "themes/app.qss", "linux/ember.desktop", "app.json"} <= set(
        names
    )
    assert f"linux/{_metadata()['id']}.metainfo.xml" in names
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


def test_the_app_metadata_has_one_home_that_the_bundle_reads() -> None:
    """resources/app.json names the app; the bundle's settings are read from it."""
    meta = _metadata()
    cfg = _bundle_config()
    read = {"name": "APP_NAME", "command": "CLI_NAME", "id": "BUNDLE_ID", "copyright": "COPYRIGHT"}
    read |= {"desktop_id": "DESKTOP_ID", "summary": "SUMMARY"}
    for key, constant in read.items():
        assert getattr(cfg, constant) == meta[key], constant
    import app

    assert meta["version_from"] == "app/__init__.py" and cfg.version() == app.__version__
    assert cfg.info_plist()["NSHumanReadableCopyright"] == meta["copyright"]
    assert f"StringStruct('CompanyName', {meta['name']!r})" in cfg.windows_version_info()
    source = (ROOT / "packaging" / "bundle_config.py").read_text("utf-8")
    for value in (meta["id"], meta["copyright"], f'"{meta["name"]}"'):
        assert value not in source, f"{value} is a literal in bundle_config.py again"


def test_the_bundle_settings_follow_whatever_app_json_says(tmp_path: Path) -> None:
    """Derived, not copied: a copy of bundle_config next to another app.json and version."""
    (tmp_path / "packaging").mkdir()
    shutil.copy2(ROOT / "packaging" / "bundle_config.py", tmp_path / "packaging")
    (tmp_path / "resources").mkdir()
    other = {**_metadata(), "name": "Kindle", "id": "org.example.Kindle", "copyright": "(c) K"}
    other["version_from"] = "kindle/about.py"
    (tmp_path / "resources" / "app.json").write_text(json.dumps(other), "utf-8")
    (tmp_path / "kindle").mkdir()
    (tmp_path / "kindle" / "about.py").write_text('__version__ = "7.8.9"\n', "utf-8")
    spec = importlib.util.spec_from_file_location(
        "other_bundle_config", tmp_path / "packaging" / "bundle_config.py"
    )
    assert spec is not None and spec.loader is not None
    cfg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cfg)
    assert (cfg.APP_NAME, cfg.BUNDLE_ID, cfg.version()) == ("Kindle", "org.example.Kindle", "7.8.9")
    assert cfg.info_plist()["NSHumanReadableCopyright"] == "(c) K"
    assert cfg.artifact_stem().startswith("Kindle-7.8.9-")


def test_the_desktop_entry_and_the_appstream_metainfo_match_app_json() -> None:
    meta = _metadata()
    desktop = configparser.ConfigParser(interpolation=None)
    desktop.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    desktop.read(SOURCE / "linux" / f"{meta['desktop_id']}.desktop", encoding="utf-8")
    entry = desktop["Desktop Entry"]
    assert (entry["Name"], entry["Comment"]) == (meta["name"], meta["summary"])
    assert entry["Exec"].split()[0] == meta["command"]

    component = ElementTree.parse(SOURCE / "linux" / f"{meta['id']}.metainfo.xml").getroot()
    assert component.tag == "component" and component.get("type") == "desktop-application"

    def text(path: str) -> str:
        found = component.find(path)
        assert found is not None and found.text is not None, path
        return " ".join(found.text.split())

    assert text("id") == meta["id"]
    assert text("name") == meta["name"]
    assert text("summary") == meta["summary"]
    assert text("description/p") == meta["description"]
    assert text("project_license") == meta["license"]
    assert text("developer/name") == meta["developer"]
    assert text("launchable[@type='desktop-id']") == f"{meta['desktop_id']}.desktop"
    assert text("provides/binary") == meta["command"]
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    assert f'description = "{meta["description"]}"' in pyproject
