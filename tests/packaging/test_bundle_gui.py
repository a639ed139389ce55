"""The built app's window: starts offscreen, shows a real X11 window with its icon, and quits
cleanly on its own (``EMBER_QUIT_AFTER_START``, app/ui/app.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.bundle import Bundle, VirtualDisplay

QUIT_HOOK = "EMBER_QUIT_AFTER_START"
BAD_SIGNS = ("Traceback", "QThread: Destroyed", "Could not load the Qt platform plugin")


def log_text(home: Path) -> str:
    log = home / "logs" / "ember.log"
    return log.read_text("utf-8", errors="replace") if log.exists() else ""


def wait_for(condition: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {condition}")


def finish(process: subprocess.Popen[str]) -> tuple[str, str]:
    if process.poll() is None:
        process.terminate()
    try:
        return process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()


def test_gui_starts_offscreen_and_keeps_running(bundle: Bundle, tmp_path: Path) -> None:
    """Qt's platform plugin, the stylesheet, the icons and every pane load in the bundle: the
    app logs its start, builds the main window and stays up without an error."""
    home = tmp_path / "home"
    process = subprocess.Popen(
        [str(bundle.gui)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=bundle.env(home),
        cwd=tmp_path,
    )
    try:
        wait_for(
            "the start in the log",
            lambda: "starting" in log_text(home) or process.poll() is not None,
            timeout=90,
        )
        time.sleep(5)  # long enough to build the window and restore state
        alive = process.poll() is None
    finally:
        out, err = finish(process)
    assert alive, f"the app exited with {process.returncode}:\n{out}\n{err}"
    text = log_text(home)
    assert "starting" in text, text
    for sign in BAD_SIGNS:
        assert sign not in err and sign not in text, f"{sign}:\n{err}\n{text}"
    assert " ERROR " not in text, text


def test_gui_shows_its_window_then_quits_cleanly(bundle: Bundle, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = subprocess.run(
        [str(bundle.gui)],
        capture_output=True,
        text=True,
        env=bundle.env(home, **{QUIT_HOOK: "1"}),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    text = log_text(home)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{text}"
    for sign in BAD_SIGNS:
        assert sign not in result.stderr and sign not in text, f"{sign}:\n{result.stderr}"
    assert "Ember stopped" in text, text


@pytest.fixture
def x_display() -> Iterator[str]:
    """A private Xvfb display, for the xcb platform plugin."""
    if not VirtualDisplay.available() or not shutil.which("xprop"):
        pytest.skip("needs Linux with Xvfb, xdotool and xprop (apt: xvfb xdotool x11-utils)")
    with VirtualDisplay() as name:
        yield name


def test_gui_maps_a_window_with_its_name_and_icon_on_x11(
    bundle: Bundle, tmp_path: Path, x_display: str
) -> None:
    """The xcb platform plugin (and the system libraries it needs) work from the bundle; the
    window carries the class a .desktop file matches (StartupWMClass=Ember) and an icon."""
    home = tmp_path / "home"
    env = bundle.env(home, QT_QPA_PLATFORM="xcb", DISPLAY=x_display)
    process = subprocess.Popen(
        [str(bundle.gui)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        search = subprocess.run(
            ["xdotool", "search", "--sync", "--onlyvisible", "--class", "Ember"],
            capture_output=True,
            text=True,
            env=env,
            timeout=90,
            check=False,
        )
        window = search.stdout.split()[0] if search.stdout.split() else ""
        assert window, f"no visible Ember window: {search.stderr}"
        time.sleep(0.2)  # see VirtualDisplay: no back-to-back X connections
        props = subprocess.run(
            ["xprop", "-id", window, "WM_CLASS", "_NET_WM_ICON", "_NET_WM_NAME"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=True,
        ).stdout
    finally:
        _out, err = finish(process)
    assert 'WM_CLASS(STRING) = "ember", "Ember"' in props, props
    assert "_NET_WM_ICON(CARDINAL) = " in props, props
    assert "Ember" in props.split("_NET_WM_NAME", 1)[1], props
    assert "Traceback" not in err, err
