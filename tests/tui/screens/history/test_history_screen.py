"""The history screen on two real builds: listed, sorted, opened, reported and compared."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from driving import wait_until
from monitor.cxx_project import needs_cxx_tools
from supervision.supervised import Bench, build_id_from
from textual.widgets import DataTable, Static

from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.screens.history.history_screen import HistoryScreen, ReportScreen
from workbench.tui.widgets.key_footer import KeyFooter


def build(bench: Bench, checkout: Path, build_dir: Path, *ninja: str) -> int:
    """A fixture build to its end through the real CLI (from clean); its id."""
    subprocess.run(["ninja", "-C", str(build_dir), "-t", "clean"], check=True, capture_output=True)
    result = bench.run(
        "run", "--name", "fixture", "--", "ninja", *ninja, "-C", str(build_dir), cwd=checkout
    )
    assert result.returncode == 0, result.stderr
    return build_id_from(result.stderr)


def report_text(app) -> str:
    screen = app.screen
    assert isinstance(screen, ReportScreen)
    return screen.markdown


@needs_cxx_tools
async def test_history_lists_reports_and_compares_real_builds(
    bench: Bench, cxx_project: tuple[Path, Path], tui
) -> None:
    checkout, build_dir = cxx_project
    first = build(bench, checkout, build_dir, "-j2")
    second = build(bench, checkout, build_dir, "-j1")
    app = tui()
    async with app.run_test(size=(120, 36)) as pilot:
        await app.workers.wait_for_complete()
        app.action_history()  # type: ignore[attr-defined]
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await wait_until(pilot, "the history", lambda: screen.loads >= 1, 20)
        table = screen.query_one("#history-table", DataTable)
        assert table.row_count == 2
        newest = table.get_row_at(0)
        assert newest[1] == str(second) and newest[2] == "fixture" and newest[3] == "succeeded"
        assert newest[5].endswith("MiB") and newest[6].endswith("%") and newest[7] == "1"
        assert table.get_row_at(1)[7] == "2"

        # The highlighted build's report.
        await pilot.press("r")
        await wait_until(pilot, "the report", lambda: isinstance(app.screen, ReportScreen), 20)
        text = report_text(app)
        assert f"| Metric | #{second} fixture (j1) |" in text and "Build time" in text
        assert "Slowest compile jobs" in text or "Slowest edges" in text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen

        # Mark both, compare: the two-build table with its Change column.
        await pilot.press("space", "down", "space")
        await pilot.pause()
        assert sorted(screen.marked) == [first, second]
        assert "c compares" in str(screen.query_one("#history-summary", Static).render())
        await pilot.press("c")
        await wait_until(pilot, "the comparison", lambda: isinstance(app.screen, ReportScreen), 20)
        text = report_text(app)
        assert f"| Metric | #{first} fixture (j2) | #{second} fixture (j1) | Change |" in text
        assert "| Jobs (-j / --cores) | 2 | 1 |" in text
        await pilot.press("escape")
        await pilot.pause()

        # Sorting by keys: the next column (build), then reversed ids.
        assert screen.sort_key == "id"
        await pilot.press("O")
        await pilot.pause()
        assert table.get_row_at(0)[1] == str(first)
        await pilot.press("o")
        await pilot.pause()
        assert screen.sort_key == "build"

        # Enter opens the highlighted build.
        table.move_cursor(row=0)
        highlighted = screen.highlighted_id()
        await pilot.press("enter")
        await wait_until(pilot, "the build screen", lambda: isinstance(app.screen, BuildScreen))
        assert app.screen.build_id == highlighted
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


async def test_history_of_an_empty_state_directory(tui) -> None:
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        app.action_history()  # type: ignore[attr-defined]
        # The screen mounts, starts its loading worker, and the rows come as a message after
        # the worker ended: wait for that message, not for the workers running now.
        await wait_until(
            pilot,
            "the history",
            lambda: isinstance(app.screen, HistoryScreen) and app.screen.loads >= 1,
            20,
        )
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert "No builds yet" in str(screen.query_one("#history-summary", Static).render())
        await pilot.press("r", "c")  # nothing to report or compare: no crash, a hint
        await pilot.pause()
        assert app.screen is screen


def drawn(widget: Static) -> str:
    """The widget's one row as the terminal shows it (the screen's composed row)."""
    row = widget.screen._compositor.render_strips()[widget.region.y]
    return row.crop(widget.region.x, widget.region.right).text.strip()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_failed_build_shows_its_first_error_under_the_table(
    bench: Bench, tui, tmp_path: Path, size: tuple[int, int]
) -> None:
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    # A real compile that fails, run by the real supervisor; the file name is markup-like: the
    # line must show it as text.
    source = tmp_path / "[b]bad.cc"
    source.write_text("// a line with the word error in it\nint main() { return undeclared; }\n")
    failed = bench.run("run", "--name", "broken", "--", "g++", "-c", source.name, cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr
    failed_id = build_id_from(failed.stderr)
    passed = bench.run("run", "--name", "fine", "--", "true", cwd=tmp_path)
    assert passed.returncode == 0, passed.stderr
    app = tui()
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        app.action_history()  # type: ignore[attr-defined]
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await wait_until(pilot, "the history", lambda: screen.loads >= 1, 20)
        table = screen.query_one("#history-table", DataTable)
        line = screen.query_one("#history-failure", Static)
        assert screen.highlighted_id() != failed_id  # the newest (succeeded) build first
        await wait_until(pilot, "an empty line", lambda: drawn(line) == "", 20)

        table.move_cursor(row=table.get_row_index(str(failed_id)))
        expected = f"#{failed_id} failed (exit 1): [b]bad.cc:2:21: error: ‘undeclared’"
        await wait_until(
            pilot, "the first error", lambda: drawn(line).startswith(expected[:60]), 20
        )
        shown = drawn(line)
        # Whole on the screen, on one row, cut with an ellipsis when the terminal is narrow.
        assert line.region.bottom <= screen.query_one(KeyFooter).region.y
        assert line.region.right <= size[0] and line.region.height == 1
        if size[0] == 80:
            assert shown.endswith("…") and len(shown) <= 80
        else:
            assert shown.startswith(expected) and "was not declared in this scope" in shown
