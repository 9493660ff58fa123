"""How many edges (compile and link jobs) ran at each second, against the job limit (-j).

A `TimeGraph` (same ring, same O(1) work per sample, same time axis as the CPU and memory
graphs beside it) whose full scale is the job limit, or the most that ran when more did, with
the limit drawn as a dotted line across the plot and named on the value axis: columns that stop
below the line are job slots left idle. The heading says whether the values are sampled (the
build's compile and link jobs seen at each 1 Hz sample, live) or exact (from `.ninja_log`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from workbench.tui.widgets.time_graph import AXIS, AXIS_WIDTH, Row, TimeGraph

LIMIT_LINE = "┈"


def count(value: float) -> str:
    """An edge count for the axis and the heading: "3", "2.5"."""
    return f"{value:.1f}".removesuffix(".0")


def limit_row(jobs: float, scale: float, rows: int) -> int:
    """The plot row (0 = top) that holds the top of a column of `jobs` on a `scale` plot."""
    filled_rows = math.ceil(round(jobs / scale * rows, 6)) if scale > 0 else 0
    return max(0, min(rows - 1, rows - filled_rows))


class ParallelismGraph(TimeGraph):
    """Edges running over time, with the job limit drawn; see the module docstring."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("Edges", count, 1.0, id=id)
        self._jobs: int | None = None
        self.exact = False

    @property
    def jobs(self) -> int | None:
        """The build's job limit (-j), drawn as the dotted line; None where none was given."""
        return self._jobs

    @jobs.setter
    def jobs(self, jobs: int | None) -> None:
        if jobs != self._jobs:
            self._jobs = jobs
            self._changed()

    def show_sampled(self, value: float, t: float) -> bool:
        """One live sample: the build's compile and link jobs running at `t`."""
        if self.exact:
            return False  # exact values already cover the build
        return self.add(value, t=t)

    def show_exact(self, values: Iterable[float], first_t: float, interval_s: float = 1.0) -> None:
        """Replace the sampled values with exact ones: one per `interval_s`, the first ending
        at `first_t` (epoch seconds)."""
        self.exact = True
        self.show_series(values, first_t, interval_s)

    def _prepare(self) -> None:
        # The scale holds the whole build's highest column: the limit, or more where more ran.
        highest = self.history.highest() or 0.0
        self.maximum = float(max(self.jobs or 0, math.ceil(highest), 1))

    def rows(self, width: int, height: int) -> list[Row]:
        drawn = super().rows(width, height)
        # The latest value known (NaN: no sample in that interval).
        latest = next((value for value in reversed(self.samples) if value == value), None)
        drawn[0] = self._heading(latest, width)
        if self.jobs:
            row = limit_row(self.jobs, self.maximum, max(1, height - 2))
            drawn[1 + row] = self._with_limit(drawn[1 + row], max(1, width - AXIS_WIDTH))
        return drawn

    def _heading(self, latest: float | None, width: int) -> Row:
        limit = f"-j{self.jobs}" if self.jobs else "no -j given"
        how = "exact" if self.exact else "sampled"
        if latest is None:
            forms = ["no samples yet" if self.live else "no samples recorded"]
        else:
            value = f"{count(latest)} of {limit}"
            # At 80 columns "now"/"last" gives way before whether the figure is exact, then the
            # limit ("no -j given" is long; a given -j is named on the axis too).
            forms = [
                f"{'now' if self.live else 'last'} {value} · {how}",
                f"{value} · {how}",
                f"{count(latest)} · {how}",
            ]
        room = width - len(self.title) - 2
        return self._heading_row(
            next((form for form in forms if len(form) <= room), forms[-1]), width
        )

    def _with_limit(self, line: Row, plot_width: int) -> Row:
        """The plot row holding the limit: the limit named on the axis, blank cells dotted."""
        label = f"-j{self.jobs}"
        result: list[tuple[str, str]] = [(f"{label:>{AXIS_WIDTH - 1}.{AXIS_WIDTH - 1}}│", AXIS)]
        # Runs of blanks become the dotted limit, runs of bars stay (this graph has no limit
        # colour: every bar is in the bar style).
        plain = "".join(cells for cells, _ in line)[AXIS_WIDTH : AXIS_WIDTH + plot_width]
        for run in re.finditer(r" +|[^ ]+", plain):
            cells = run.group()
            if cells[0] == " ":
                result.append((LIMIT_LINE * len(cells), "graph--limit"))
            else:
                result.append((cells, "graph--bar"))
        return tuple(result)
