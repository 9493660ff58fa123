"""The matrix screen on a matrix build recorded from real Nix over the loopback host
(`fixed_matrix`): its looks at 80x24 and 160x48, mid-build and ended; the view following the
log as it grows to the build's end; hostile text from the log shown as text; reached with `m`
from anywhere, the highlighted matrix build from the history.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from driving import screen_still, wait_until
from recorded_builds import end
from recorded_host import recorded_doctor
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from tui.fixed_history import frozen_clock, write_history
from tui.fixed_matrix import FIRST_ERROR, LOG, MID_BUILD_LINES, WAITING, write_matrix_build

from workbench.history.records import FAILED
from workbench.history.store import History, database_path
from workbench.tui.app import WorkbenchApp, make_app
from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.screens.history.history_screen import HistoryScreen
from workbench.tui.screens.matrix.matrix_screen import MatrixScreen

REPO = Path(__file__).resolve().parents[4]
SIZES = [(80, 24), (160, 48)]


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC while a snapshot is taken."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def app_for(state: Path) -> WorkbenchApp:
    return make_app(str(REPO / "configs"), str(state), doctor=recorded_doctor(), clock=frozen_clock)


async def settled(pilot: Pilot) -> None:
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def open_matrix(pilot: Pilot) -> MatrixScreen:
    """The first screen settled (and any running build reattached), then `m`."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
    await settled(pilot)
    await pilot.press("m")
    await wait_until(pilot, "the matrix screen", lambda: isinstance(app.screen, MatrixScreen), 20)
    screen = app.screen
    assert isinstance(screen, MatrixScreen)
    await wait_until(pilot, "the matrix read", lambda: screen.refreshes > 0, 20)
    await settled(pilot)
    await screen_still(pilot)
    return screen


def table_rows(screen: MatrixScreen) -> dict[str, tuple[str, ...]]:
    """target (full name) -> its cells as plain text."""
    table = screen.query_one("#matrix-table", DataTable)
    return {str(key.value): tuple(str(cell) for cell in table.get_row(key)) for key in table.rows}


def static_text(screen: MatrixScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


@pytest.mark.snapshot
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("moment", ["mid-build", "ended"])
def test_matrix_screen(snap_compare, tmp_path: Path, size, moment: str) -> None:
    state = tmp_path / "state"
    write_matrix_build(state, running=moment == "mid-build")
    assert snap_compare(app_for(state), terminal_size=size, run_before=open_matrix)


async def test_the_matrix_follows_the_log_to_the_build_s_end(tmp_path: Path) -> None:
    state = tmp_path / "state"
    build_id = write_matrix_build(state, running=True)
    app = app_for(state)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_matrix(pilot)
        rows = table_rows(screen)
        vnni, bf16 = "onnxruntime-python313-cpu-avx512vnni", "onnxruntime-python313-cpu-avx512bf16"
        # Nix's retry elsewhere: its build hook could not reach badkey just before.
        assert rows[vnni][2:5] == ("building", "local (after badkey)", "21m")
        assert rows[bf16][2:4] == ("failed", "remote") and rows[bf16][-1] == FIRST_ERROR
        assert rows[WAITING][2] == "waiting"
        assert rows["onnxruntime-python313-cuda12_9-sm89-avx2"][2] == "in store"
        # Each target's ONNX Runtime release, two releases in one matrix build.
        assert rows[WAITING][1] == "1.24.2" and rows[vnni][1] == rows[bf16][1] == "1.23.2"
        hosts = static_text(screen, "#matrix-hosts")
        assert "local          1 building: avx512vnni" in hosts
        assert "remote         idle" in hosts and "badkey         GONE: cannot build there" in hosts

        # The rest of the log arrives, then the build ends: the screen follows by itself.
        with History(state) as history:
            record = history.get(build_id)
        rest = LOG.read_text().splitlines(keepends=True)[MID_BUILD_LINES:]
        with open(record.log_path, "a") as log:
            log.write("".join(rest))
        with History(state) as history:
            end(history, build_id, FAILED, ended=record.started + 60, duration_s=60, lines=103)
        await wait_until(
            pilot, "the build's end", lambda: screen.view is not None and not screen.view.active
        )
        await settled(pilot)
        rows = table_rows(screen)
        assert rows[vnni][2:4] == ("done", "local (after badkey)")
        assert rows[WAITING][2] == "not built"
        assert rows[WAITING][1] == "1.24.2"  # the ended build's rows keep it
        assert "local          idle" in static_text(screen, "#matrix-hosts")
        assert static_text(screen, "#matrix-summary").startswith(
            f"build #{build_id} (matrix-6): failed · 3 done · 1 in store · 1 failed · 1 not built"
        )


async def test_hostile_text_from_the_log_is_shown_as_text(tmp_path: Path) -> None:
    """A first error line with Rich markup and terminal escapes (a build prints anything)."""
    state = tmp_path / "state"
    build_id = write_matrix_build(state, running=False)
    hostile = "error: [bold red]x[/] \x1b]0;pwned\x07 [link=file:///etc]y[/link]"
    with History(state) as history:
        record = history.get(build_id)
    log = Path(record.log_path)
    text = log.read_text()
    assert json.dumps(FIRST_ERROR)[1:-1] in text
    log.write_text(text.replace(json.dumps(FIRST_ERROR)[1:-1], json.dumps(hostile)[1:-1]))
    # Rows worked out again from the log, as for a build nobody followed to its end.
    with sqlite3.connect(database_path(state)) as db:
        db.execute("DELETE FROM build_targets")
    app = app_for(state)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_matrix(pilot)
        bf16 = table_rows(screen)["onnxruntime-python313-cpu-avx512bf16"]
        assert bf16[-1] == "error: [bold red]x[/] ^[]0;pwned^G [link=file:///etc]y[/link]"
        table = screen.query_one("#matrix-table", DataTable)
        table.move_cursor(row=table.get_row_index("onnxruntime-python313-cpu-avx512bf16"))
        await settled(pilot)
        detail = static_text(screen, "#matrix-detail")
        assert detail.endswith("failed on remote: " + bf16[-1])


async def test_m_over_the_history_opens_the_highlighted_matrix_build(tmp_path: Path) -> None:
    state = tmp_path / "state"
    plain = write_history(state)  # builds that are not matrix builds
    older = write_matrix_build(state, running=False)
    newer = write_matrix_build(state, running=False)
    app = app_for(state)

    async def matrix_of_highlighted(pilot: Pilot, build_id: int) -> MatrixScreen:
        history = app.screen
        assert isinstance(history, HistoryScreen)
        table = history.query_one("#history-table", DataTable)
        table.move_cursor(row=table.get_row_index(str(build_id)))
        await pilot.press("m")
        await wait_until(pilot, "the matrix", lambda: isinstance(app.screen, MatrixScreen))
        screen = app.screen
        assert isinstance(screen, MatrixScreen)
        await wait_until(pilot, "the matrix read", lambda: screen.refreshes > 0)
        return screen

    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await settled(pilot)
        await pilot.press("h")
        history = app.screen
        assert isinstance(history, HistoryScreen)
        await wait_until(pilot, "the history", lambda: history.loads > 0)
        screen = await matrix_of_highlighted(pilot, older)
        assert screen.view is not None and screen.view.build_id == older
        await pilot.press("escape")
        # A build that is not a matrix build highlighted: the latest matrix build.
        screen = await matrix_of_highlighted(pilot, plain[0])
        assert screen.view is not None and screen.view.build_id == newer
        # Enter: the whole build, its log and graphs.
        await pilot.press("enter")
        await wait_until(pilot, "the build", lambda: isinstance(app.screen, BuildScreen))
        assert app.screen.build_id == newer  # type: ignore[attr-defined]


def test_at_80_columns_a_target_goes_without_the_release_its_ort_cell_says() -> None:
    from workbench.remote.matrix_view import MatrixRow
    from workbench.tui.screens.matrix.matrix_screen import detail_text, narrow_target

    def row(name: str, ort: str) -> MatrixRow:
        return MatrixRow(name, "waiting", "", (), None, None, None, "", ort_version=ort)

    assert narrow_target(row(WAITING, "1.24.2")) == "py313-cuda12_9-sm90-avx512"
    # A name without its release's suffix (the pin's own), or of a build from before releases.
    assert narrow_target(row("onnxruntime-python313-cpu-avx2", "1.23.2")) == "py313-cpu-avx2"
    assert narrow_target(row(WAITING, "")) == "py313-cuda12_9-sm90-avx512-ort1_24_2"
    assert detail_text(row(WAITING, "1.24.2")) == f"{WAITING} (ONNX Runtime 1.24.2): waiting"
    assert detail_text(row(WAITING, "")) == f"{WAITING}: waiting"
