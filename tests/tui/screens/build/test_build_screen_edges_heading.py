"""The edges graph's heading says whether its figure is sampled or exact at 80 columns too,
for a build whose command gives no -j (the README's first steps: the sample project runs
ninja with its own default): it read "Edges  1.4 of no -j given…", the word that says what
the figure is cut away. Real ninja under the real supervisor, driven with Pilot."""

from __future__ import annotations

from pathlib import Path

from driving import open_screen, start, wait_until
from needed_tools import needs_ninja
from supervision.supervised import Bench

from workbench.tui.widgets.parallelism_graph import ParallelismGraph

pytestmark = needs_ninja


async def test_at_80_columns_the_edges_heading_says_exact(
    tui, bench: Bench, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    edges = "".join(f"build e{n}: nap\n" for n in range(6))
    (work / "build.ninja").write_text(f"rule nap\n  command = sleep 0.3 && : > $out\n{edges}")
    build_id = start(bench, "--name", "no-j", "--", "ninja", "-C", str(work), cwd=work)
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        graph = screen.query_one("#build-edges", ParallelismGraph)
        await wait_until(pilot, "the exact edges", lambda: graph.exact, 60)
        await pilot.pause(0.3)
        heading = str(graph.render()).splitlines()[0]
        assert heading.rstrip().endswith("· exact") and "…" not in heading, heading
