"""An ended ninja build's job table gives each compile the time `.ninja_log` gives its edge,
not the sampled one: the sampled time runs from the job's start to the last 1 Hz sample that
saw it, up to a second short, so a job seen once read "0.0s" (the sample project's heavy_0.cc
in the README's own screenshot, a compile of about 1.4 s). Real g++ and ninja under the real
supervisor, driven with Pilot."""

from __future__ import annotations

from pathlib import Path

from driving import open_screen, start, wait_until
from monitor.cxx_project import needs_cxx_tools
from supervision.supervised import Bench

from workbench.analysis.edges import source_of
from workbench.history.records import SUCCEEDED
from workbench.tui.widgets.process_table import ProcessTable


@needs_cxx_tools
async def test_an_ended_builds_jobs_take_their_times_from_the_ninja_log(
    bench: Bench, cxx_project: tuple[Path, Path], tui
) -> None:
    checkout, build = cxx_project
    build_id = start(
        bench, "--name", "fixture", "--", "ninja", "-C", str(build), "-j2", cwd=checkout
    )
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)

        def ended() -> bool:
            record = screen.record
            return record is not None and record.state == SUCCEEDED and not screen._polling

        await wait_until(pilot, "the build to succeed", ended, 120)
        table = screen.query_one(ProcessTable)
        await wait_until(pilot, "its jobs", lambda: len(table.rows_shown) >= 3, 20)
        with bench.history() as history:
            edges = history.edges(build_id)
        exact = {}
        for edge in edges:  # a compile is named by its source, a link by its output
            source = source_of(edge.outputs[0])
            for path in [source] if source is not None else edge.outputs:
                exact[Path(path).name] = edge.ended - edge.started
        rows = [row for row in table.rows_shown if row.file]
        assert len(rows) >= 3  # the sampled ones: the three heavy units at least
        for row in rows:
            assert row.running_s is not None
            assert abs(row.running_s - exact[Path(row.file).name]) < 0.05, (row, exact)
        times = [row.running_s for row in table.rows_shown]
        assert times == sorted(times, reverse=True)  # slowest first, by the exact times
        assert "exact" in str(table.border_title), table.border_title
        # Its RSS column is what the samples saw, which a job shorter than a second may not.
        assert "RSS sampled" in str(table.border_title), table.border_title
