"""Build the Ember bundle for this OS: the one-folder app and its artifact in ``dist/``.

    .venv/bin/python packaging/build.py              # build (reusing PyInstaller's cache)
    .venv/bin/python packaging/build.py --if-needed  # only if app/, packaging/ or venv changed
    .venv/bin/python packaging/build.py --clean      # from scratch

Linux: ``dist/Ember/`` (``ember``, ``_internal/``, ``share/`` with the .desktop file and icons,
``install.sh``) and ``dist/Ember-<version>-linux-<arch>.tar.gz``.
macOS: ``dist/Ember.app`` and ``dist/Ember-<version>-macos-<arch>.zip``.
Windows: ``dist/Ember/`` (``Ember.exe``, ``ember.com``) and
``dist/Ember-<version>-windows-<arch>.zip``.
Must run with the project's venv (the bundle is made of what is installed there).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import bundle_config as cfg
import icons

DIST = cfg.ROOT / "dist"
WORK = cfg.ROOT / "build"
STAMP = WORK / "bundle.stamp"


def log(message: str) -> None:
    print(f"[bundle] {message}", flush=True)


def bundle_dir() -> Path:
    """The built app: ``dist/Ember.app`` on macOS, ``dist/Ember`` elsewhere."""
    return DIST / (f"{cfg.APP_NAME}.app" if sys.platform == "darwin" else cfg.APP_NAME)


def artifact_path() -> Path:
    suffix = ".tar.gz" if cfg.os_tag() == "linux" else ".zip"
    return DIST / f"{cfg.artifact_stem()}{suffix}"


def ensure_pyinstaller() -> None:
    if importlib.util.find_spec("PyInstaller") is not None:
        return
    log("installing PyInstaller (packaging/requirements.txt)")
    requirements = cfg.HERE / "requirements.txt"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "-r", str(requirements)], check=True
    )


def inputs_digest() -> str:
    """What the bundle is made of: the app, the packaging files and the venv's contents."""
    digest = hashlib.sha256()
    for folder in (cfg.ROOT / "app", cfg.HERE):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".md":
                digest.update(str(path.relative_to(cfg.ROOT)).encode())
                digest.update(path.read_bytes())
    digest.update((cfg.ROOT / "pyproject.toml").read_bytes())
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    for dist_info in sorted(site.glob("*.dist-info")):
        digest.update(dist_info.name.encode())  # name and version of every installed package
    return digest.hexdigest()


def up_to_date(digest: str) -> bool:
    return (
        bundle_dir().exists()
        and artifact_path().exists()
        and STAMP.exists()
        and STAMP.read_text() == digest
    )


def run_pyinstaller(clean: bool) -> None:
    command = [
        sys.executable,
        "-m",
        "PyInstaller",
        str(cfg.HERE / "ember.spec"),
        "--noconfirm",
        "--log-level",
        "WARN",
        "--distpath",
        str(DIST),
        "--workpath",
        str(WORK / "pyinstaller"),
    ]
    if clean:
        command.append("--clean")
    env = {**os.environ, "EMBER_BUILD_DIR": str(WORK), "PYTHONNOUSERSITE": "1"}
    log(" ".join(command))
    subprocess.run(command, check=True, env=env, cwd=cfg.ROOT)


def link_duplicates(folder: Path) -> int:
    """Replace byte-identical copies (llama.cpp's ``libx.so`` and ``libx.so.0``) by relative
    symlinks; returns the bytes saved. POSIX only; tar keeps the links."""
    seen: dict[tuple[int, str], Path] = {}
    saved = 0
    for path in sorted(folder.iterdir()):
        if path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        key = (size, hashlib.sha256(path.read_bytes()).hexdigest())
        first = seen.setdefault(key, path)
        if first is path:
            continue
        path.unlink()
        path.symlink_to(first.name)
        saved += size
    return saved


def strip_debug_info(internal: Path) -> int:
    """``strip --strip-debug`` on the interpreter's own libraries (libpython and lib-dynload),
    which a pyenv or self-built Python ships with 20+ MB of DWARF; returns the bytes saved.

    Only those: wheels' libraries (numpy.libs, …) were rewritten by auditwheel's patchelf, and
    strip breaks them ("ELF load command address/offset not page-aligned"). Never touches the
    executables either: their bundled archive sits after the ELF data.
    """
    strip = shutil.which("strip")
    if strip is None:
        log("no `strip` on PATH: debug information stays in the bundle")
        return 0
    candidates = [*internal.glob("libpython3*.so*"), *internal.glob("python3*/lib-dynload/*.so")]
    saved = 0
    for path in sorted(candidates):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if not data.startswith(b"\x7fELF") or b".debug_info" not in data:
            continue
        subprocess.run([strip, "--strip-debug", str(path)], check=True)
        saved += len(data) - path.stat().st_size
    return saved


def finish_linux(app_dir: Path, icon_dir: Path) -> None:
    internal = app_dir / "_internal"
    saved = link_duplicates(internal / "llama_cpp" / "lib")
    log(f"linked duplicate llama.cpp libraries ({saved / 1e6:.1f} MB saved)")
    saved = strip_debug_info(internal)
    log(f"stripped debug information ({saved / 1e6:.1f} MB saved)")
    share = app_dir / "share"
    shutil.rmtree(share, ignore_errors=True)
    (share / "applications").mkdir(parents=True)
    desktop = cfg.RESOURCES / "linux" / "ember.desktop"
    shutil.copy2(desktop, share / "applications" / "ember.desktop")
    for size in icons.LINUX_SIZES:
        target = share / "icons" / "hicolor" / f"{size}x{size}" / "apps"
        target.mkdir(parents=True)
        shutil.copy2(icon_dir / f"ember-{size}.png", target / "ember.png")
    scalable = share / "icons" / "hicolor" / "scalable" / "apps"
    scalable.mkdir(parents=True)
    shutil.copy2(icons.SOURCE_SVG, scalable / "ember.svg")
    shutil.copy2(cfg.HERE / "linux" / "install.sh", app_dir / "install.sh")
    (app_dir / "install.sh").chmod(0o755)


def make_tarball(app_dir: Path, target: Path) -> None:
    def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    partial = target.with_name(target.name + ".partial")
    # gzip level 6: close to 9's size on these binaries, at a fraction of the time
    with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
        tar.add(app_dir, arcname=app_dir.name, filter=normalise)
    partial.replace(target)


def make_zip(app_dir: Path, target: Path) -> None:
    base = str(target).removesuffix(".zip") + "-partial"
    partial = Path(base + ".zip")
    partial.unlink(missing_ok=True)
    if sys.platform == "darwin":
        # ditto keeps the .app's symlinks, extended attributes and code signature intact
        subprocess.run(
            ["ditto", "-c", "-k", "--sequesterRsrc", "--keepParent", str(app_dir), str(partial)],
            check=True,
        )
    else:
        shutil.make_archive(base, "zip", root_dir=app_dir.parent, base_dir=app_dir.name)
    partial.replace(target)


def folder_size(folder: Path) -> int:
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def build(clean: bool) -> Path:
    ensure_pyinstaller()
    WORK.mkdir(exist_ok=True)
    icon_dir = WORK / "icons"
    icons.write_all(icon_dir)
    started = time.monotonic()
    run_pyinstaller(clean)
    app_dir = bundle_dir()
    if cfg.os_tag() == "linux":
        finish_linux(app_dir, icon_dir)
    log(f"PyInstaller finished in {time.monotonic() - started:.0f} s: {app_dir}")
    artifact = artifact_path()
    for stale in DIST.glob(f"{cfg.APP_NAME}-*"):
        if stale.is_file():
            stale.unlink()
    if artifact.suffix == ".gz":
        make_tarball(app_dir, artifact)
    else:
        make_zip(app_dir, artifact)
    log(
        f"{app_dir.name}: {folder_size(app_dir) / 1e6:.0f} MB; "
        f"{artifact.name}: {artifact.stat().st_size / 1e6:.0f} MB "
        f"(total {time.monotonic() - started:.0f} s)"
    )
    return artifact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--if-needed", action="store_true", help="skip the build when nothing changed"
    )
    parser.add_argument("--clean", action="store_true", help="empty PyInstaller's cache first")
    parser.add_argument(
        "--print-artifact", action="store_true", help="print the artifact's path; build nothing"
    )
    args = parser.parse_args()
    if args.print_artifact:
        print(artifact_path())
        return 0
    digest = inputs_digest()
    if args.if_needed and up_to_date(digest):
        log(f"up to date: {bundle_dir()} and {artifact_path().name}")
        return 0
    STAMP.unlink(missing_ok=True)
    build(args.clean)
    STAMP.write_text(digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
