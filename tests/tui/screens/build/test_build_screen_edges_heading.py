"""The edges graph's heading says whether its figure is sampled or exact at 80 columns too,
for a build whose command gives no -j (the README's first steps: the sample project runs
ninja with its own default): it read "Edges  1.4 of no -j given…", the word that says what
the figure is cut away. Real ninja under the real supervisor, driven with Pilot."""

from __future__ import annotations

from pathlib import Path

from driving import open_screen, start, start_naps, wait_until
from needed_tools import needs_ninja
from supervision.supervised import Bench

from workbench.tui.widgets.parallelism_graph import ParallelismGraph
from workbench.tui.widgets.time_graph import TimeGraph

pytestmark = needs_ninja


async def test_at_80_columns_the_edges_heading_says_exact(
    tui, bench: Bench, tmp_path: Path
) -> None:
    build_id = start_naps(bench, tmp_path, 6, 0.3, "no-j", jobs=None)
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        graph = screen.query_one("#build-edges", ParallelismGraph)
        await wait_until(pilot, "the exact edges", lambda: graph.exact, 60)
        await pilot.pause(0.3)
        heading = str(graph.render()).splitlines()[0]
        assert heading.rstrip().endswith("· exact") and "…" not in heading, heading


async def test_at_80_columns_an_ended_builds_cpu_heading_names_its_unit(
    tui, bench: Bench, tmp_path: Path
) -> None:
    """The CPU graph of an ended build read "CPU  last 60%" at 80 columns, while the process
    table beside it counts per core: which 60% was not said. It keeps "all cores"."""
    work = tmp_path / "work"
    work.mkdir()
    # Two edges spinning on both cores to the end: every sample, the last too, is far above 0%.
    edges = "".join(f"build e{n}: spin\n" for n in range(2))
    spin = "timeout 3.5 sh -c 'while :; do :; done'; : > $out"
    (work / "build.ninja").write_text(f"rule spin\n  command = {spin}\n{edges}")
    build_id = start(bench, "--name", "spin", "--", "ninja", "-C", str(work), "-j2", cwd=work)
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        graph = screen.query_one("#build-cpu", TimeGraph)
        await wait_until(pilot, "the ended build's samples", lambda: not graph.live, 60)
        await wait_until(pilot, "its samples", lambda: len(graph.samples) >= 1, 10)
        await pilot.pause(0.3)
        heading = str(graph.render()).splitlines()[0]
        assert graph.samples[-1] >= 10, list(graph.samples)  # a figure of two digits at least
        assert heading.startswith("CPU  last ") and "all cores" in heading, heading
        assert "…" not in heading, heading
