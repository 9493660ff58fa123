"""How every screen looks, at 80×24 and 160×48, on a recorded host (pytest-textual-snapshot).

Nothing in them depends on this machine or on when they run: the host is recorded (the
nvidia-smi stand-in, a recorded /proc/cpuinfo), the history is written with fixed times
(`tui/fixed_history.py`), the app's clock is frozen and local time is UTC.

Update after an intended change with `scripts/test.sh tests/tui/test_snapshots.py --snapshot-update`
and look at the SVGs in tests/tui/__snapshots__/test_snapshots/.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from patch_fixture import write_fixture_series, write_fixture_source
from recorded_host import recorded_daemon, recorded_doctor
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static
from tui.driving import screen_still
from tui.fixed_history import frozen_clock, write_history

from workbench.debugging.model import capture_from_json
from workbench.tui.app import WorkbenchApp, make_app
from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.screens.debug.debug_screen import DebugScreen
from workbench.tui.screens.history.history_screen import HistoryScreen, ReportScreen
from workbench.tui.screens.patches.patches_screen import PatchesScreen

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "debugging" / "recorded"
SIZES = [(80, 24), (160, 48)]


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC while a snapshot is taken (the history shows local start times)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A state directory holding the fixed history."""
    directory = tmp_path / "state"
    write_history(directory)
    return directory


def app_for(state: Path, daemon: bool = False) -> WorkbenchApp:
    """The app on the recorded host; `daemon`: its user served by an untrusting nix-daemon."""
    doctor = recorded_doctor(nix_store=recorded_daemon() if daemon else None)
    return make_app(str(REPO / "configs"), str(state), doctor=doctor, clock=frozen_clock)


async def until(pilot: Pilot, what: str, predicate: Callable[[], object]) -> None:
    """Let the app run until `predicate()` holds (bounded)."""
    for _ in range(400):
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def settled(pilot: Pilot) -> None:
    """Every worker and animation is done and the screen (its footer too) is drawn."""
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def recommended_row_noted(pilot: Pilot) -> None:
    """The first screen's table has settled: the cursor on the recommended row, the line under
    the table saying so (it follows the cursor's RowHighlighted message, which a loaded machine
    may deliver late), and the column widths holding (the last-build column is filled by a
    worker and widened on a later refresh: a snapshot of any screen over this one, help's, once
    caught the table narrower under two CPU hogs)."""
    note = pilot.app.screen.query_one("#row-note", Static)
    await until(pilot, "the row note", lambda: "for this host" in str(note.render()))
    # The "last build" column is filled by a worker; the table then widens its columns on a
    # later refresh. Under load that can come after `settled`: wait until its size holds.
    table = pilot.app.screen.query_one("#variants", DataTable)
    sizes = []
    for _ in range(100):
        sizes.append(
            (table.virtual_size, tuple(c.get_render_width(table) for c in table.columns.values()))
        )
        if len(sizes) >= 4 and len(set(sizes[-4:])) == 1:
            break
        await pilot.pause(0.05)


async def first_screen(pilot: Pilot) -> None:
    """The first screen has shown the recorded host and the last builds, its table settled."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    await until(pilot, "the recorded host", lambda: app.report is not None)
    await settled(pilot)
    await recommended_row_noted(pilot)


def pressing(*keys: str, then: Callable[[Pilot], Awaitable[None]] | None = None):
    """run_before for snap_compare: the first screen, these keys, then `then`."""

    async def run_before(pilot: Pilot) -> None:
        await first_screen(pilot)
        for key in keys:
            await pilot.press(key)
            await settled(pilot)
        if then is not None:
            await then(pilot)
        await settled(pilot)
        await screen_still(pilot)

    return run_before


async def history_loaded(pilot: Pilot) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, HistoryScreen)
    await until(pilot, "the history", lambda: screen.loads > 0)


async def report_shown(pilot: Pilot) -> None:
    await until(pilot, "the report", lambda: isinstance(pilot.app.screen, ReportScreen))


async def build_shown(pilot: Pilot) -> None:
    await until(
        pilot,
        "the build's jobs",
        lambda: isinstance(pilot.app.screen, BuildScreen) and pilot.app.screen.polls > 0,
    )


@pytest.mark.parametrize("size", SIZES)
def test_variants_screen(snap_compare, state: Path, size) -> None:
    """The first screen; its host's Nix is a multi-user install (the daemon's line shows)."""
    assert snap_compare(app_for(state, daemon=True), terminal_size=size, run_before=pressing())


async def steady_cursor(pilot: Pilot) -> None:
    """The focused field's cursor stops blinking: a snapshot must not catch it half-way."""
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False


@pytest.mark.parametrize("size", SIZES)
def test_settings_screen(snap_compare, state: Path, size) -> None:
    """The settings form, its first field focused as it opens."""
    run_before = pressing("s", then=steady_cursor)
    assert snap_compare(app_for(state), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_help_screen(snap_compare, state: Path, size) -> None:
    """`?` over the first screen: its keys and the app's, from their bindings."""
    assert snap_compare(app_for(state), terminal_size=size, run_before=pressing("question_mark"))


@pytest.mark.parametrize("size", SIZES)
def test_history_screen(snap_compare, state: Path, size) -> None:
    run_before = pressing("h", then=history_loaded)
    assert snap_compare(app_for(state), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_build_screen(snap_compare, state: Path, size) -> None:
    """The -j1 sample build as it ended: its jobs, graphs and log (opened from the history)."""

    async def open_build(pilot: Pilot) -> None:
        await history_loaded(pilot)
        await pilot.press("down", "enter")
        await build_shown(pilot)

    run_before = pressing("h", then=open_build)
    assert snap_compare(app_for(state), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_build_screen_log_pane(snap_compare, state: Path, size) -> None:
    """The same build with the log in front (`p`), its warning highlighted."""

    async def open_log(pilot: Pilot) -> None:
        await history_loaded(pilot)
        await pilot.press("down", "enter")
        await build_shown(pilot)
        await pilot.press("p")

    run_before = pressing("h", then=open_log)
    assert snap_compare(app_for(state), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_report_screen(snap_compare, state: Path, size) -> None:
    async def open_report(pilot: Pilot) -> None:
        await history_loaded(pilot)
        await pilot.press("down", "r")
        await report_shown(pilot)

    run_before = pressing("h", then=open_report)
    assert snap_compare(app_for(state), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_compare_screen(snap_compare, state: Path, size) -> None:
    """The -j2 and -j1 sample builds side by side: the ninja-jobs report's table."""

    async def open_comparison(pilot: Pilot) -> None:
        await history_loaded(pilot)
        await pilot.press("down", "space", "down", "space", "c")
        await report_shown(pilot)

    run_before = pressing("h", then=open_comparison)
    assert snap_compare(app_for(state), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_debug_screen(snap_compare, state: Path, size) -> None:
    captured = capture_from_json(json.loads((RECORDED / "bridge_o2.json").read_text()))

    async def open_debug(pilot: Pilot) -> None:
        await pilot.app.push_screen(DebugScreen(capture=captured, source_roots=[RECORDED.parent]))

    assert snap_compare(app_for(state), terminal_size=size, run_before=pressing(then=open_debug))


@pytest.mark.parametrize("size", SIZES)
def test_patches_screen(snap_compare, config_copy: Path, tmp_path: Path, size) -> None:
    """The fixture's series for the cpu flavour, checked against its source tree, with the
    failing patch highlighted (the tree's path is cleared from the input: it is a temp dir)."""
    source = tmp_path / "source"
    write_fixture_source(source, units=14)
    write_fixture_series(config_copy, source, broken_enabled=True)
    state = tmp_path / "state"
    app = make_app(str(config_copy), str(state), doctor=recorded_doctor(), clock=frozen_clock)

    async def checked(pilot: Pilot) -> None:
        screen = PatchesScreen(app.matrix, config_copy, state, "cpu")
        await pilot.app.push_screen(screen)
        await settled(pilot)
        screen.run_check(source)
        await until(pilot, "the check", lambda: bool(screen.checks))
        await pilot.press("down", "down")
        screen.query_one("#patches-source", Input).value = ""
        pilot.app.clear_notifications()  # their toasts time out: not part of the look

    assert snap_compare(app, terminal_size=size, run_before=pressing(then=checked))
