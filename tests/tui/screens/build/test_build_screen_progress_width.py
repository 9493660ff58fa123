"""Between 120 columns (where the screen turns wide and its bar 60 cells long) and about 160,
the progress line's figures did not fit on its one line and were cut at the end: "ninja 166/469
(35%) · ETA 23.4s (8.2s–59.1s), first…" at 120×36 on libuv, the build's peak gone; at 160×48
the ETA's basis was cut to "· ETA …". The figures are shown whole (onto a second line where
they need one), and the basis only where it fits. Real ninja under the real supervisor, driven
with Pilot."""

from __future__ import annotations

import re
from pathlib import Path

from driving import open_screen, start_naps, wait_until
from needed_tools import needs_ninja
from supervision.supervised import Bench
from textual.widgets import Static

pytestmark = needs_ninja

ESTIMATE = re.compile(r"ETA \d")  # an estimate, not "ETA: not known yet"


def _drawn(static: Static) -> list[str]:
    """The widget's rows as drawn."""
    return [static.render_line(y).text.rstrip() for y in range(static.size.height)]


async def test_at_120_columns_the_progress_figures_are_whole(
    tui, bench: Bench, tmp_path: Path
) -> None:
    build_id = start_naps(bench, tmp_path, 80, 0.4, "naps", jobs=2)
    app = tui()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        assert screen.has_class("-wide")
        progress = screen.query_one("#build-progress-text", Static)

        def estimated() -> bool:
            text = str(progress.render())
            return bool(ESTIMATE.search(text)) and "peak" in text and "/80 " in text

        await wait_until(pilot, "an ETA and a peak", estimated, 60)
        await pilot.pause(0.3)
        text = str(progress.render())
        drawn = " ".join(_drawn(progress))
        assert "…" not in drawn, (text, drawn)
        assert re.search(r"peak \d+(\.\d+)? [KMG]i?B", drawn), (text, drawn)
        assert "basis" not in drawn or drawn.replace(" ", "") == text.replace(" ", "")
    bench.run("stop", str(build_id))
