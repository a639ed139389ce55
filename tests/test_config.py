"""Settings: typed values in settings.json, written atomically and only when they change,
versioned and migrated; EMBER_HOME's folders and files readable by the user only."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def test_setting_an_unchanged_value_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GUI sets values freely (every spin-box step, every chat switch): only changes
    reach the disk."""
    from app import config

    writes: list[Path] = []
    real = config.atomic_write_text

    def counting(path: Path, text: str) -> None:
        writes.append(path)
        real(path, text)

    monkeypatch.setattr(config, "atomic_write_text", counting)
    settings = config.Settings(tmp_path / "settings.json")
    settings.set("server.port", 9000)
    settings.set("server.port", 9000)
    settings.set_extra("ui.page", "models")
    settings.set_extra("ui.page", "models")
    assert len(writes) == 2
    assert config.Settings(tmp_path / "settings.json").get("server.port") == 9000


# -- private files ------------------------------------------------------------------------------

posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX permissions")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most users have (022), under which plain files come out 0644."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@posix_only
@pytest.mark.usefixtures("usual_umask")
def test_ember_home_and_settings_are_readable_by_the_user_only(
    ember_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.config import Settings, paths

    home = ember_home / "fresh"
    monkeypatch.setenv("EMBER_HOME", str(home))
    Settings().set("server.port", 9000)  # the first write creates the folder
    assert mode(home) == 0o700
    p = paths().ensure()
    for folder in (p.home, p.models_dir, p.downloads_dir, p.logs_dir, p.cache_dir):
        assert mode(folder) == 0o700, folder
    assert mode(p.settings_file) == 0o600


@posix_only
@pytest.mark.usefixtures("usual_umask")
def test_an_older_world_readable_home_is_made_private(ember_home: Path) -> None:
    """Files and folders an older Ember left 0755/0644 lose group and other access."""
    from app.config import Settings, paths

    p = paths()
    for folder in (p.home, p.logs_dir):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
    p.settings_file.write_text('{"server.port": 9000}')
    p.settings_file.chmod(0o644)
    assert Settings().get("server.port") == 9000
    assert mode(p.settings_file) == 0o600
    p.ensure()
    assert mode(p.home) == mode(p.logs_dir) == 0o700


@posix_only
@pytest.mark.usefixtures("usual_umask")
def test_private_helpers(tmp_path: Path) -> None:
    from app.config import atomic_write_text, make_private_dirs, private_opener

    with open(tmp_path / "log.jsonl", "a", opener=private_opener) as f:
        f.write("x\n")
    assert mode(tmp_path / "log.jsonl") == 0o600
    make_private_dirs(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == mode(tmp_path / "a" / "b") == 0o700
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    atomic_write_text(shared / "new" / "file.json", "{}")
    assert mode(shared) == 0o755  # folders that exist are not Ember's to change
    assert mode(shared / "new") == 0o700
    assert mode(shared / "new" / "file.json") == 0o600


@posix_only
def test_a_symlinked_folder_is_left_alone(tmp_path: Path) -> None:
    """Models on a shared disk, linked into EMBER_HOME, keep the permissions the user chose."""
    from app.config import private_dir

    shared = tmp_path / "shared-models"
    shared.mkdir()
    shared.chmod(0o755)
    link = tmp_path / "models"
    link.symlink_to(shared)
    private_dir(link)
    assert mode(shared) == 0o755


# -- versions and migrations ------------------------------------------------------------------


def read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_a_file_without_a_version_is_upgraded_and_saved(tmp_path: Path) -> None:
    from app.config import Settings, settings_version

    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"server.port": 9000, "ui.page": "models"}))
    settings = Settings(path)
    assert settings.get("server.port") == 9000
    assert settings.extra("ui.page") == "models"
    assert "version" not in settings._values  # not a setting
    assert read_json(path) == {
        "version": settings_version(),
        "server.port": 9000,
        "ui.page": "models",
    }


def test_a_renamed_setting_keeps_the_users_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a developer does to rename ui.theme: register the new key, append a migration."""
    from app import config

    version = config.settings_version()
    monkeypatch.setattr(
        config, "MIGRATIONS", [*config.MIGRATIONS, config.renamed("ui.theme", "appearance.theme")]
    )
    monkeypatch.setitem(
        config.SETTINGS, "appearance.theme", config.Setting("appearance.theme", str, "system", "")
    )
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": version, "ui.theme": "dark", "server.port": 9000}))
    assert config.Settings(old).get("appearance.theme") == "dark"
    assert read_json(old) == {
        "version": version + 1,
        "appearance.theme": "dark",
        "server.port": 9000,
    }
    assert config.Settings(old).get("appearance.theme") == "dark"  # upgraded once, kept

    # A file from before versions existed takes every step.
    oldest = tmp_path / "oldest.json"
    oldest.write_text(json.dumps({"ui.theme": "light"}))
    assert config.Settings(oldest).get("appearance.theme") == "light"
    assert read_json(oldest) == {"version": version + 1, "appearance.theme": "light"}

    # A value already under the new name (set by a newer build, say) wins.
    both = tmp_path / "both.json"
    both.write_text(json.dumps({"version": version, "ui.theme": "dark", "appearance.theme": "x"}))
    assert config.Settings(both).get("appearance.theme") == "x"


def test_a_failing_migration_stops_at_the_version_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from app import config

    version = config.settings_version()

    def broken(values: dict[str, Any]) -> None:
        values["server.port"] = 1
        raise RuntimeError("migration bug")

    monkeypatch.setattr(config, "MIGRATIONS", [*config.MIGRATIONS, broken])
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": version, "server.port": 9000}))
    settings = config.Settings(path)
    assert settings.get("server.port") == 9000  # nothing half-done
    assert settings.version == version
    assert read_json(path)["version"] == version
    assert "migration bug" in caplog.text


def test_a_file_from_a_newer_ember_keeps_its_version_and_unknown_keys(tmp_path: Path) -> None:
    from app.config import Settings, settings_version

    newer = settings_version() + 5
    future = {"tools": [{"name": "search", "enabled": True}], "mode": "agent"}
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": newer, "server.port": 9000, "future.thing": future}))
    settings = Settings(path)
    assert settings.get("server.port") == 9000
    settings.set("ui.theme", "dark")
    assert read_json(path) == {
        "version": newer,
        "server.port": 9000,
        "future.thing": future,
        "ui.theme": "dark",
    }


def test_a_damaged_settings_file_is_kept_aside(tmp_path: Path) -> None:
    """The next change would overwrite it: the user's file is kept, not lost."""
    from app.config import Settings

    path = tmp_path / "settings.json"
    path.write_text('{"server.port": 9000, "ui.theme": "da')  # cut short
    settings = Settings(path)
    assert settings.get("server.port") == 8434
    (aside,) = tmp_path.glob("settings.json.damaged-*")
    assert aside.read_text() == '{"server.port": 9000, "ui.theme": "da'
    settings.set("ui.theme", "dark")
    assert read_json(path)["ui.theme"] == "dark"


def test_version_is_not_an_extra(tmp_path: Path) -> None:
    from app.config import Settings

    with pytest.raises(ValueError, match="version"):
        Settings(tmp_path / "settings.json").set_extra("version", 3)
