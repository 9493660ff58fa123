"""A no-op rebuild (`ninja: no work to do`) ends between two of the 1 Hz samples, which meet
no process of it: the build screen's memory graph and the History screen say that no process
was sampled, never "peak 0Mi" or "0 MiB". Real ninja under the real supervisor, the app
driven with Pilot."""

from __future__ import annotations

from pathlib import Path

from driving import open_screen, wait_until
from needed_tools import needs_ninja
from supervision.supervised import Bench

from workbench.tui.screens.history.history_screen import HistoryScreen, cells
from workbench.tui.widgets.time_graph import TimeGraph

pytestmark = needs_ninja


async def test_a_no_op_rebuild_shows_no_peak_of_0(tui, bench: Bench, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "build.ninja").write_text("rule made\n  command = : > $out\nbuild a: made\n")
    for _ in range(2):  # the build, then the same command with nothing to do
        done = bench.run("run", "--", "ninja", "-C", str(work), cwd=work)
        assert done.returncode == 0, done.stderr
    assert "no work to do" in done.stdout + done.stderr
    build_id = bench.latest_id()
    with bench.history() as history:
        measured = history.measured(build_id, slowest=0)
    assert measured is not None
    sampled = bool(measured.peak_rss)  # a sample met ninja after all: a true peak
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        await wait_until(pilot, "the first poll", lambda: screen.polls >= 1, 20)
        graph = screen.query_one("#build-memory", TimeGraph)
        await wait_until(pilot, "the stored samples", lambda: len(graph.samples) >= 1, 10)
        await pilot.pause()
        heading = str(graph.render()).splitlines()[0]
        if not sampled:
            assert "peak 0" not in heading and "no process sampled" in heading, heading
        await pilot.press("h")
        await wait_until(pilot, "the history", lambda: isinstance(app.screen, HistoryScreen), 10)
        history_screen = app.screen
        assert isinstance(history_screen, HistoryScreen)
        await wait_until(pilot, "its rows", lambda: history_screen.loads >= 1, 10)
        # Every column, the wide table's peak RSS included (80 columns leave it out).
        row = next(row for row in history_screen.rows if row.id == build_id)
        if not sampled:
            assert "0 MiB" not in cells(row, marked=False), cells(row, marked=False)
