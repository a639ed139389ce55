"""The Models page against the local fake Hub: search, repository detail with fit badges,
downloads started from the GUI (pause, resume, failure and Retry, surviving a restart), and
My models (Load, Delete). Real huggingface_hub, real DownloadManager, real files."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox, QPushButton
from pytestqt.qtbot import QtBot

from app.config import Settings, paths
from app.library import downloads as downloads_mod
from app.library.download_state import Download, DownloadState
from app.library.hub import ModelFile
from app.ui import theme
from app.ui.main_window import MainWindow
from app.ui.models import fit
from app.ui.models.downloads_view import DownloadRow
from app.ui.models.file_row import FileRow
from app.ui.models.my_models import LocalModelRow
from app.ui.models.pane import DOWNLOADS, MY_MODELS, ModelsPane
from app.ui.services import Services, create_services
from app.ui.task_runner import tasks
from app.ui.toast import Toast
from tests.helpers.gguf_writer import gguf_bytes
from tests.helpers.hub_server import FakeHub, FakeRepo

S = DownloadState
MB = 1_000_000
TIMEOUT = 20_000

Opener = Callable[[], tuple[ModelsPane, Services]]


@pytest.fixture
def open_pane(qtbot: QtBot, ember_app: QApplication, hub: FakeHub) -> Iterator[Opener]:
    """A Models page on fresh services (its own engine worker, no model loaded)."""
    opened: list[tuple[ModelsPane, Services]] = []

    def make() -> tuple[ModelsPane, Services]:
        services = create_services()
        pane = ModelsPane(services)
        qtbot.addWidget(pane)
        pane.resize(1200, 800)
        pane.show()
        qtbot.waitExposed(pane)
        opened.append((pane, services))
        return pane, services

    yield make
    for pane, services in opened:
        pane.close()
        services.close()


def repo(repo_id: str, quants: tuple[str, ...] = ("Q4_K_M",), payload: int = 0, **kw: object):
    stem = repo_id.split("/")[1].removesuffix("-GGUF")
    files: dict[str, object] = {
        f"{stem}-{q}.gguf": gguf_bytes(quant=q, name=stem, payload=payload) for q in quants
    }
    return FakeRepo(repo_id, files, **kw)  # type: ignore[arg-type]


def result_ids(pane: ModelsPane) -> list[str]:
    return [r.id for r in pane.discover.results]


def open_repo(qtbot: QtBot, pane: ModelsPane, repo_id: str) -> None:
    pane.activate()
    qtbot.waitUntil(lambda: repo_id in result_ids(pane), timeout=TIMEOUT)
    pane.discover.open_result(repo_id)
    qtbot.waitUntil(lambda: bool(pane.detail.rows), timeout=TIMEOUT)


def file_row(pane: ModelsPane, filename: str) -> FileRow:
    return pane.detail.rows[filename]


def download_of(pane: ModelsPane, filename: str) -> Download | None:
    return next((d for d in pane.bridge.downloads.values() if filename in d.filenames), None)


def done_bytes(pane: ModelsPane, filename: str) -> int:
    download = download_of(pane, filename)
    return download.done_bytes if download is not None else 0


def row_of(pane: ModelsPane, filename: str) -> DownloadRow:
    download = download_of(pane, filename)
    assert download is not None
    row = pane.downloads.row(download.id)
    assert row is not None
    return row


def wait_state(qtbot: QtBot, pane: ModelsPane, filename: str, *states: S, timeout: int = TIMEOUT):
    def reached() -> bool:
        d = download_of(pane, filename)
        return d is not None and d.state in states

    qtbot.waitUntil(reached, timeout=timeout)
    download = download_of(pane, filename)
    assert download is not None
    return download


# --- Discover --------------------------------------------------------------------------------


def test_search_lists_results_sorts_and_filters(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub
) -> None:
    hub.add(repo("alice/Alpha-GGUF", downloads=10, likes=300))
    hub.add(repo("bob/Beta-GGUF", downloads=500, likes=5))
    hub.add(repo("carol/Gamma-7B-GGUF", downloads=100, likes=50))
    pane, _ = open_pane()
    pane.activate()
    qtbot.waitUntil(lambda: len(pane.discover.results) == 3, timeout=TIMEOUT)
    assert result_ids(pane) == ["bob/Beta-GGUF", "carol/Gamma-7B-GGUF", "alice/Alpha-GGUF"]
    first = pane.discover.list.itemWidget(pane.discover.list.item(0))
    texts = [label.text() for label in first.findChildren(QLabel)]
    assert "500" in texts and "5" in texts  # downloads and likes on the row
    assert "3 GGUF models" in pane.discover.caption.text()

    pane.discover.sort_box.setCurrentIndex(1)  # most liked
    qtbot.waitUntil(lambda: result_ids(pane)[0] == "alice/Alpha-GGUF", timeout=TIMEOUT)
    assert result_ids(pane) == ["alice/Alpha-GGUF", "carol/Gamma-7B-GGUF", "bob/Beta-GGUF"]

    hub.reset_log()
    qtbot.keyClicks(pane.discover.search, "gam")  # debounced: one request, not three
    qtbot.waitUntil(lambda: result_ids(pane) == ["carol/Gamma-7B-GGUF"], timeout=TIMEOUT)
    searches = [r.query.get("search") for r in hub.log(path_contains="/api/models")]
    assert searches == [["gam"]]

    pane.discover.search.clear()
    pane.discover.size_box.setCurrentIndex(2)  # 3B - 9B: only the 7B model has a size
    qtbot.waitUntil(lambda: result_ids(pane) == ["carol/Gamma-7B-GGUF"], timeout=TIMEOUT)

    pane.discover.size_box.setCurrentIndex(0)
    pane.discover.search.setText("nothing-like-this")
    pane.discover.search_now()
    qtbot.waitUntil(lambda: pane.discover.results_stack.currentWidget() is pane.discover.state)
    assert "No GGUF models match" in pane.discover.state.title.text()


def test_search_error_is_shown_in_the_page_and_try_again_works(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub
) -> None:
    hub.add(repo("alice/Alpha-GGUF"))
    hub.fail_next(503, path_contains="/api/models")
    pane, _ = open_pane()
    pane.activate()
    state = pane.discover.state
    qtbot.waitUntil(lambda: state.property("kind") == "error", timeout=TIMEOUT)
    assert pane.discover.results_stack.currentWidget() is state
    assert "503" in state.text.text() and "try again" in state.text.text().lower()
    assert not QApplication.activeModalWidget()  # no dialog
    state.button.click()
    qtbot.waitUntil(lambda: result_ids(pane) == ["alice/Alpha-GGUF"], timeout=TIMEOUT)


def test_repository_detail_groups_quants_with_fit_badges_and_card(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub
) -> None:
    tiny = repo(
        "alice/Tiny-GGUF",
        ("Q8_0", "Q4_K_M"),
        card="---\nlicense: mit\n---\n# Tiny\n\nA **small** model.",
    )
    tiny.files["mmproj-Tiny-F16.gguf"] = tiny.files["Tiny-Q8_0.gguf"]
    hub.add(tiny)
    pane, _ = open_pane()
    open_repo(qtbot, pane, "alice/Tiny-GGUF")
    detail = pane.detail
    assert list(detail.rows) == ["Tiny-Q4_K_M.gguf", "Tiny-Q8_0.gguf"]  # mmproj is no model
    headings = [w.property("quant") for w in detail.body.findChildren(QLabel, "QuantHeading")]
    assert headings == ["Q4_K_M", "Q8_0"]
    qtbot.waitUntil(
        lambda: all(row.fit.text() == "Fits" for row in detail.rows.values()), timeout=TIMEOUT
    )
    tooltip = detail.rows["Tiny-Q4_K_M.gguf"].fit.toolTip()
    assert "needs about" in tooltip and "tokens of context" in tooltip
    assert all(row.button.text() == "Download" for row in detail.rows.values())
    qtbot.waitUntil(lambda: "small" in detail.card.text(), timeout=TIMEOUT)
    assert "<b>small</b>" in detail.card.text() or "<strong>small</strong>" in detail.card.text()
    assert "license" not in detail.card.text()  # front matter stripped

    del hub.repos["alice/Tiny-GGUF"]  # gone from the Hub: a readable error in the page
    detail.open_repo(detail.summary)  # type: ignore[arg-type]
    qtbot.waitUntil(lambda: detail.state.property("kind") == "error", timeout=TIMEOUT)
    assert "no repository alice/Tiny-GGUF" in detail.state.text.text()


def test_slow_hub_does_not_freeze_the_gui(qtbot: QtBot, open_pane: Opener, hub: FakeHub) -> None:
    """The Hub holds every answer until released: a GUI thread that waited for it would never
    get to run its timer (a held request is answered 504 after a failsafe, failing the test)."""
    hub.add(repo("alice/Alpha-GGUF"))
    pane, _ = open_pane()
    ticks: list[int] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(hub.held))
    timer.start()
    steps: list[tuple[Callable[[], None], Callable[[], bool]]] = [
        (pane.activate, lambda: result_ids(pane) == ["alice/Alpha-GGUF"]),
        (lambda: pane.discover.open_result("alice/Alpha-GGUF"), lambda: bool(pane.detail.rows)),
    ]
    for step, done in steps:
        hub.hold()
        step()
        qtbot.waitUntil(lambda: hub.held > 0, timeout=TIMEOUT)  # asked, not answered
        ticks.clear()
        qtbot.waitUntil(lambda: len(ticks) >= 5, timeout=TIMEOUT)  # the GUI runs meanwhile
        assert all(ticks)  # every tick came while the Hub still held an answer
        assert not done()
        hub.release()
        qtbot.waitUntil(done, timeout=TIMEOUT)
    timer.stop()


# --- downloads -------------------------------------------------------------------------------


def test_download_from_the_gui_lands_in_my_models_and_the_picker(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub, gemma_path: Path
) -> None:
    hub.add(FakeRepo("google/gemma-3-270m-GGUF", {"gemma-3-270m-Q4_K_M.gguf": gemma_path}))
    pane, services = open_pane()
    open_repo(qtbot, pane, "google/gemma-3-270m-GGUF")
    row = file_row(pane, "gemma-3-270m-Q4_K_M.gguf")
    active: list[int] = []
    pane.downloads_active.connect(active.append)
    with qtbot.waitSignal(pane.bridge.completed, timeout=90_000) as blocker:
        row.button.click()
    download = blocker.args[0]
    target = paths().models_dir / "google" / "gemma-3-270m-GGUF" / "gemma-3-270m-Q4_K_M.gguf"
    assert download.paths == (target,) and target.stat().st_size == gemma_path.stat().st_size
    assert active[0] == 1 and active[-1] == 0  # the rail badge counted it, then cleared
    qtbot.waitUntil(lambda: row.button.text() == "Downloaded", timeout=TIMEOUT)
    assert not row.button.isEnabled()
    assert row_of(pane, "gemma-3-270m-Q4_K_M.gguf").status.text().startswith("Downloaded")

    my_models = pane.my_models
    qtbot.waitUntil(lambda: any(r.model.path == target for r in my_models.rows.values()))
    model_row = next(r for r in my_models.rows.values() if r.model.path == target)
    assert model_row.model.quant == "Q4_K_M" and model_row.model.owned
    qtbot.waitUntil(lambda: str(target) in [m.path for m in services.catalog.models])

    toast = pane.window().findChild(Toast, "Toast")
    assert toast is not None and toast.isVisible() and "ready" in toast.label.text()
    with qtbot.waitSignal(pane.load_requested) as loaded:
        toast.action_button.click()
    assert loaded.args == [str(target)]

    # Loaded another way (the Downloads row's Load): the "is ready · Load" toast goes away too.
    pane.bridge.completed.emit(download)
    assert toast.isVisible()
    with qtbot.waitSignal(pane.load_requested):
        row_of(pane, "gemma-3-270m-Q4_K_M.gguf").primary.click()
    assert not toast.isVisible()


def test_pause_and_resume(qtbot: QtBot, open_pane: Opener, hub: FakeHub) -> None:
    hub.add(repo("alice/Big-GGUF", payload=4 * MB))
    hub.throttle_bps = MB
    pane, _ = open_pane()
    open_repo(qtbot, pane, "alice/Big-GGUF")
    file_row(pane, "Big-Q4_K_M.gguf").button.click()
    wait_state(qtbot, pane, "Big-Q4_K_M.gguf", S.DOWNLOADING)
    qtbot.waitUntil(lambda: done_bytes(pane, "Big-Q4_K_M.gguf") > 0)
    pane.show_tab(DOWNLOADS)
    row = row_of(pane, "Big-Q4_K_M.gguf")
    assert row.primary.text() == "Pause" and " of 4.0 MB" in row.status.text()
    row.primary.click()
    paused = wait_state(qtbot, pane, "Big-Q4_K_M.gguf", S.PAUSED)
    assert row.primary.text() == "Resume" and row.status.text().startswith("Paused")
    assert 0 < paused.done_bytes < paused.total_bytes
    assert file_row(pane, "Big-Q4_K_M.gguf").button.text().startswith("Paused")
    hub.throttle_bps = None
    hub.reset_log()
    row.primary.click()
    wait_state(qtbot, pane, "Big-Q4_K_M.gguf", S.COMPLETED)
    ranges = [r.headers.get("range") for r in hub.log(path_contains="/cdn/", method="GET")]
    assert any(r and not r.startswith("bytes=0-") for r in ranges)  # continued, not restarted
    assert row.primary.text() == "Load"


def test_failed_download_shows_the_error_and_retry_works(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub
) -> None:
    hub.add(repo("alice/Flaky-GGUF"))
    pane, _ = open_pane()
    open_repo(qtbot, pane, "alice/Flaky-GGUF")
    fit_badge = file_row(pane, "Flaky-Q4_K_M.gguf").fit
    qtbot.waitUntil(lambda: fit_badge.text() == "Fits", timeout=TIMEOUT)  # its header is read
    hub.fail_next(404, path_contains="Flaky-Q4_K_M.gguf")
    file_row(pane, "Flaky-Q4_K_M.gguf").button.click()
    failed = wait_state(qtbot, pane, "Flaky-Q4_K_M.gguf", S.FAILED)
    row = row_of(pane, "Flaky-Q4_K_M.gguf")
    assert row.error.isVisibleTo(pane.downloads) and row.error.text() == failed.error
    assert "not on the Hub" in row.error.text() and row.primary.text() == "Retry"
    assert file_row(pane, "Flaky-Q4_K_M.gguf").button.text() == "Retry download"
    # the row that failed while shown really takes the failed style (its red border)
    edge = row.grab().toImage().pixelColor(0, row.height() // 2)
    assert edge.name().lower() == theme.current().danger_soft.lower()
    row.primary.click()
    wait_state(qtbot, pane, "Flaky-Q4_K_M.gguf", S.COMPLETED)
    assert not row.error.isVisibleTo(pane.downloads)


def test_interrupted_download_resumes_when_the_app_starts_again(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub
) -> None:
    hub.add(repo("alice/Big-GGUF", payload=4 * MB))
    hub.throttle_bps = MB
    pane, services = open_pane()
    open_repo(qtbot, pane, "alice/Big-GGUF")
    file_row(pane, "Big-Q4_K_M.gguf").button.click()
    qtbot.waitUntil(lambda: done_bytes(pane, "Big-Q4_K_M.gguf") > MB // 2, timeout=TIMEOUT)
    services.close()  # as when the app quits: downloads stop, their state stays
    pane.close()
    hub.throttle_bps = None
    hub.reset_log()

    pane2, _ = open_pane()  # a new start: restored off the GUI thread and resumed
    with qtbot.waitSignal(pane2.downloads_active, check_params_cb=lambda n: n == 1):
        pass
    done = wait_state(qtbot, pane2, "Big-Q4_K_M.gguf", S.COMPLETED)
    assert done.paths[0].stat().st_size == done.total_bytes
    ranges = [r.headers.get("range") for r in hub.log(path_contains="/cdn/", method="GET")]
    assert ranges and ranges[0] and not ranges[0].startswith("bytes=0-")


# --- My models -------------------------------------------------------------------------------


def test_my_models_loads_deletes_and_explains_files_it_does_not_own(
    qtbot: QtBot, open_pane: Opener, ember_home: Path, tmp_path: Path
) -> None:
    owned = paths().models_dir / "alice" / "Tiny-GGUF" / "Tiny-Q4_K_M.gguf"
    owned.parent.mkdir(parents=True)
    owned.write_bytes(gguf_bytes(context_length=32768))
    outside = tmp_path / "elsewhere" / "Other-Q8_0.gguf"
    outside.parent.mkdir()
    outside.write_bytes(gguf_bytes(quant="Q8_0"))
    pane, services = open_pane()
    services.settings.set("library.extra_dirs", [])
    view = pane.my_models
    pane.show_tab(MY_MODELS)
    qtbot.waitUntil(lambda: len(view.rows) == 1, timeout=TIMEOUT)
    view.add_folder(str(outside.parent))
    qtbot.waitUntil(lambda: len(view.rows) == 2, timeout=TIMEOUT)
    assert services.settings.get("library.extra_dirs") == [str(outside.parent.resolve())]
    mine = next(r for r in view.rows.values() if r.model.path == owned)
    chips = [label.text() for label in mine.findChildren(QLabel, "Chip")]
    assert {"Downloaded", "Q4_K_M", "32K context"} <= set(chips)

    with qtbot.waitSignal(pane.load_requested) as loaded:
        mine.load_button.click()
    assert loaded.args == [str(owned)]

    theirs = next(r for r in view.rows.values() if r.model.path != owned)
    theirs.delete_button.click()  # not Ember's: hidden, said so, nothing deleted
    qtbot.waitUntil(lambda: view.banner.isVisible() and len(view.rows) == 1, timeout=TIMEOUT)
    assert "never deletes another app's files" in view.banner.text.text() and outside.exists()
    buttons = view.banner.findChildren(QPushButton, "BannerAction")
    assert [b.text() for b in buttons] == ["Undo", "Stop listing this folder"]
    buttons[0].click()  # Undo: listed again
    qtbot.waitUntil(lambda: len(view.rows) == 2, timeout=TIMEOUT)
    mine = next(r for r in view.rows.values() if r.model.path == owned)

    mine.delete_button.click()
    qtbot.waitUntil(lambda: view.confirm is not None)
    box = view.confirm
    assert isinstance(box, QMessageBox) and "Tiny-Q4_K_M" in box.text()
    assert owned.exists()  # nothing happens before the answer
    delete = next(b for b in box.buttons() if b.text() == "Delete")
    delete.click()
    qtbot.waitUntil(lambda: not owned.exists() and len(view.rows) == 1, timeout=TIMEOUT)
    assert next(iter(view.rows.values())).model.path == outside.resolve() or outside.exists()


def test_empty_chat_offers_browse_models(window: MainWindow, qtbot: QtBot) -> None:
    with qtbot.waitSignal(window.chat.browse_models_requested):
        window.chat.empty.browse_button.click()
    assert window.pages.currentWidget() is window.models_pane


def test_state_messages_wrap_without_being_cut_off(qtbot: QtBot, ember_app: object) -> None:
    """A long error in a narrow column wraps onto as many lines as it needs (an aligned label
    used to keep its one-line width and lose the lines below)."""
    from app.ui.models.widgets import StatePanel

    panel = StatePanel()
    qtbot.addWidget(panel)
    panel.show_state(
        "error",
        "Can't search the Hub",
        "Can't reach the Hugging Face Hub at https://huggingface.co: [Errno -2] Name or "
        "service not known. Check your internet connection (or HF_ENDPOINT) and try again.",
        "Try again",
    )
    panel.resize(380, 500)
    panel.show()
    qtbot.waitExposed(panel)
    for label in (panel.title, panel.text):
        assert label.width() >= 300
        assert label.height() >= label.heightForWidth(label.width())


def test_one_search_result_is_one_result(qtbot: QtBot, open_pane: Opener, hub: FakeHub) -> None:
    hub.add(repo("alice/Alpha-GGUF", downloads=1, likes=1))
    hub.add(repo("bob/Beta-GGUF"))
    pane, _ = open_pane()
    pane.activate()
    qtbot.keyClicks(pane.discover.search, "alpha")
    qtbot.waitUntil(lambda: result_ids(pane) == ["alice/Alpha-GGUF"], timeout=TIMEOUT)
    qtbot.waitUntil(lambda: "for" in pane.discover.caption.text(), timeout=TIMEOUT)
    assert pane.discover.caption.text().startswith("1 result for “alpha”")
    pane.discover.open_result("alice/Alpha-GGUF")
    qtbot.waitUntil(lambda: "download" in pane.detail.meta.text(), timeout=TIMEOUT)
    assert "1 download " in pane.detail.meta.text() and "1 like " in pane.detail.meta.text()


def test_a_file_that_wont_fit_has_a_subdued_download_button(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """The accent goes to the files that fit; one that will not keeps a usable, quieter
    button."""
    from app.library.hub import RemoteFile

    def row_with(level: fit.FitLevel) -> FileRow:
        part = RemoteFile(f"Big-{level}.gguf", 40 * 10**9, None, None)
        row = FileRow(ModelFile("Big", "Q8_0", (part,)), None)  # type: ignore[arg-type]
        qtbot.addWidget(row)
        row.set_download(None, installed=False)
        label = {"fits": "Fits", "tight": "Tight", "wont_fit": "Won't fit"}[level]
        row.set_fit(fit.FitBadge(level, label, "why"))
        row.resize(700, 50)
        row.show()
        qtbot.waitExposed(row)
        return row

    def fill(row: FileRow) -> str:
        image = row.button.grab().toImage()
        return image.pixelColor(6, image.height() // 2).name()

    accent = QColor(theme.current().accent).name()
    assert fill(row_with("fits")) == accent
    assert fill(row_with("tight")) == accent
    big = row_with("wont_fit")
    assert fill(big) != accent
    assert big.button.isEnabled() and big.button.text() == "Download"
    assert "free memory" in big.button.toolTip()


def test_a_long_file_name_gives_way_to_the_badge_and_button(
    qtbot: QtBot, ember_app: QApplication
) -> None:
    """In a narrow page the file name ends in "…"; the size, badge and button stay whole."""
    from app.library.hub import RemoteFile

    name = "Meta-Llama-3.1-70B-Instruct-abliterated-uncensored-imatrix-IQ2_XXS.gguf"
    part = RemoteFile(name, 20 * 10**9, None, None)
    row = FileRow(ModelFile(name, "IQ2_XXS", (part,)), None)  # type: ignore[arg-type]
    qtbot.addWidget(row)
    row.set_download(None, installed=False)
    row.resize(440, 50)
    row.show()
    qtbot.waitExposed(row)
    assert row.name.text().endswith("…") and name.startswith(row.name.text()[:-1])
    for shown in (row.size_label, row.fit, row.button):
        assert shown.geometry().right() <= row.contentsRect().right(), shown
        assert shown.width() >= shown.minimumSizeHint().width()


# --- background work: latest wins, few disk reads, rows kept ---------------------------------

MANY = ("Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q8_0")


def test_fast_typing_drops_the_searches_still_waiting(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub
) -> None:
    hub.add(repo("alice/Alpha-GGUF"))
    hub.add(repo("bob/Beta-GGUF"))
    pane, _ = open_pane()
    discover = pane.discover
    qtbot.waitUntil(lambda: not tasks().busy(pane.hub_lane), timeout=TIMEOUT)  # restored downloads
    shown: list[str] = []
    show = discover._on_search_done

    def recording(q: object, result: object, error: BaseException | None) -> None:
        shown.append(q.text)  # type: ignore[attr-defined]
        show(q, result, error)  # type: ignore[arg-type]

    discover._on_search_done = recording  # type: ignore[method-assign]
    hub.hold()  # nothing is answered until all six are typed: none waited for the Hub
    hub.reset_log()
    for text in ("a", "al", "alp", "alph", "alpha", "be"):  # faster than the Hub answers
        discover.search.setText(text)
        discover.search_now()
    qtbot.waitUntil(lambda: hub.held == 3, timeout=TIMEOUT)  # the runner's three threads
    hub.release()
    qtbot.waitUntil(lambda: not tasks().busy(pane.hub_lane), timeout=TIMEOUT)
    assert result_ids(pane) == ["bob/Beta-GGUF"]
    assert shown == ["be"]  # the older answers, which came first, were never shown
    searches = sorted(r.query["search"][0] for r in hub.log(path_contains="/api/models"))
    # three threads took the first three; "alph" and "alpha" waited and were superseded
    assert searches == ["a", "al", "alp", "be"]


def test_opening_another_repository_drops_its_waiting_fit_checks(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add(repo("alice/Many-GGUF", MANY))
    hub.add(repo("bob/Other-GGUF"))
    gate = threading.Event()
    checked: list[tuple[str, str]] = []
    real_check = fit.check

    def slow_check(repo_id: str, commit: str, model: ModelFile, settings: Settings) -> object:
        checked.append((repo_id, model.filename))
        gate.wait(TIMEOUT / 1000)
        return real_check(repo_id, commit, model, settings)

    monkeypatch.setattr(fit, "check", slow_check)
    pane, _ = open_pane()
    open_repo(qtbot, pane, "alice/Many-GGUF")
    detail = pane.detail
    qtbot.waitUntil(lambda: len(checked) == 2, timeout=TIMEOUT)  # two threads, the rest wait
    assert sum(row.fit_requested for row in detail.rows.values()) > 2
    pane.discover.open_result("bob/Other-GGUF")
    gate.set()
    qtbot.waitUntil(lambda: "Other-Q4_K_M.gguf" in detail.rows, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: detail.rows["Other-Q4_K_M.gguf"].fit.text() == "Fits", timeout=TIMEOUT)
    qtbot.waitUntil(lambda: not tasks().busy(detail.fit_lane), timeout=TIMEOUT)
    assert len([c for c in checked if c[0] == "alice/Many-GGUF"]) == 2


def test_a_repository_file_list_reads_the_manifest_once(
    qtbot: QtBot, open_pane: Opener, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add(repo("alice/Many-GGUF", MANY))
    reads: list[Path] = []
    real_read = downloads_mod.read_manifest

    def counting(folder: Path) -> dict[str, dict[str, object]]:
        if folder.name == "Many-GGUF":
            reads.append(folder)
        return real_read(folder)

    monkeypatch.setattr(downloads_mod, "read_manifest", counting)
    pane, _ = open_pane()
    open_repo(qtbot, pane, "alice/Many-GGUF")
    assert len(pane.detail.rows) == len(MANY)
    assert len(reads) == 1  # not once per file
    pane.detail.recheck_installed()
    qtbot.waitUntil(lambda: not tasks().busy(pane.hub_lane), timeout=TIMEOUT)
    assert len(reads) == 2


def test_my_models_refresh_updates_only_the_rows_that_changed(
    qtbot: QtBot, open_pane: Opener, ember_home: Path
) -> None:
    folder = paths().models_dir / "alice" / "Tiny-GGUF"
    folder.mkdir(parents=True)
    for quant in ("Q4_K_M", "Q8_0"):
        (folder / f"Tiny-{quant}.gguf").write_bytes(gguf_bytes(quant=quant))
    pane, services = open_pane()
    services.settings.set("library.extra_dirs", [])
    view = pane.my_models
    pane.show_tab(MY_MODELS)
    qtbot.waitUntil(lambda: len(view.rows) == 2, timeout=TIMEOUT)

    def rescan() -> dict[str, LocalModelRow]:
        before = dict(view.rows)
        with qtbot.waitSignal(view.library_changed, timeout=TIMEOUT):
            view.refresh()
        layout = view.rows_layout
        items = [layout.itemAt(i) for i in range(layout.count() - 1)]
        on_screen = [item.widget() if item is not None else None for item in items]
        assert on_screen == [view.rows[m.id] for m in view.models]  # in the library's order
        return before

    before = rescan()  # nothing changed: every row is the same widget
    assert view.rows == before and all(view.rows[k] is row for k, row in before.items())

    # (another model's bytes: a copy of Tiny-Q4_K_M would be the same file, listed once)
    (folder / "Tiny-Q2_K.gguf").write_bytes(gguf_bytes(quant="Q2_K", name="Tiny Q2"))
    before = rescan()  # one more: the others stay
    assert len(view.rows) == 3 and all(view.rows[k] is row for k, row in before.items())

    changed = folder / "Tiny-Q8_0.gguf"
    changed.write_bytes(gguf_bytes(quant="Q8_0", context_length=65536))
    later = changed.stat().st_mtime + 10
    os.utime(changed, (later, later))
    before = rescan()  # a changed file gets a new row, showing what changed
    changed_id = next(k for k, r in view.rows.items() if r.model.path == changed)
    assert view.rows[changed_id] is not before[changed_id]
    chips = [label.text() for label in view.rows[changed_id].findChildren(QLabel, "Chip")]
    assert "64K context" in chips
    assert all(view.rows[k] is row for k, row in before.items() if k != changed_id)

    (folder / "Tiny-Q4_K_M.gguf").unlink()
    before = rescan()  # a gone file loses its row
    assert len(view.rows) == 2 and all(view.rows[k] is before[k] for k in view.rows)
    gone = next(row for k, row in before.items() if k not in view.rows)
    assert not gone.isVisible()
