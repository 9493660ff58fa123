"""The percentage beside ninja's own count is never more than done: 299 of 300 edges is 99%,
as the bar beside it says, not "(100%)" while an edge still runs (the text rounded 99.67 up,
the bar cut it down: "66% ninja 312/469 (67%)" on one line, seen on libuv). Real ninja under
the real supervisor; the build screen driven with Pilot and `workbench status` beside it."""

from __future__ import annotations

from pathlib import Path

from driving import open_screen, start, wait_until
from needed_tools import needs_ninja
from supervision.supervised import Bench
from textual.widgets import ProgressBar, Static
from textual.widgets._progress_bar import PercentageStatus

pytestmark = needs_ninja

EDGES = 300


def _last_edge_waits(work: Path) -> Path:
    """300 edges: 299 that are done at once and a last one that waits for `release`."""
    release = work / "release"
    quick = " ".join(f"q{n}" for n in range(EDGES - 1))
    lines = [
        "rule quick\n  command = : > $out\n",
        f"rule held\n  command = while [ ! -e {release} ]; do sleep 0.1; done; : > $out\n",
        *(f"build q{n}: quick\n" for n in range(EDGES - 1)),
        f"build last: held || {quick}\n",
    ]
    (work / "build.ninja").write_text("".join(lines))
    return release


async def test_299_of_300_edges_is_99_percent_not_100(tui, bench: Bench, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    release = _last_edge_waits(work)
    build_id = start(bench, "--name", "held", "--", "ninja", "-C", str(work), cwd=work)
    app = tui()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            screen = await open_screen(app, pilot, build_id)
            progress = screen.query_one("#build-progress-text", Static)

            def shown() -> str:
                return str(progress.render())

            await wait_until(pilot, "299/300 drawn", lambda: f"{EDGES - 1}/{EDGES}" in shown(), 60)
            assert f"ninja {EDGES - 1}/{EDGES} (99%)" in shown(), shown()
            bar = screen.query_one("#build-bar", ProgressBar)
            assert bar.percentage is not None and bar.percentage < 1.0
            # The bar's own label says what the text says.
            label = str(bar.query_one(PercentageStatus).render())
            assert label.strip() == "99%", label
            status = bench.run("status")
            assert f"ninja {EDGES - 1}/{EDGES} (99%)" in status.stdout, status.stdout
    finally:
        release.touch()
    done = bench.run("attach", str(build_id))
    assert done.returncode == 0, done.stderr
