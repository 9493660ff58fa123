"""The time axes of an ended build's graphs: each ends in a label, the build's length, at 80 and
160 columns (the CPU graph's could lose its last tick at 80), and all three (CPU, memory, edges)
span the same interval, the build's start to its end. Before, the CPU and memory graphs drew
each 1 Hz sample a second wide from the first one, the supervisor's last sample (at the exit,
less than a second after the one before) included: a 3.6 s build drew 5 s of them, beside exact
edges on the 4 s that end at the build's end. Real ninja under the real supervisor, Pilot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from driving import open_screen, start_naps, wait_until
from supervision.supervised import Bench
from textual.app import App, ComposeResult

from workbench.history.records import SUCCEEDED
from workbench.tui.widgets.parallelism_graph import ParallelismGraph
from workbench.tui.widgets.time_graph import AXIS_WIDTH, TICK_COLUMNS, TimeGraph, time_label

SIZES = [(80, 24), (160, 48)]


def axis_labels(graph: TimeGraph) -> list[tuple[int, str]]:
    """The drawn time axis's labels: (where in the plot each begins, its text)."""
    axis = graph.render().plain.splitlines()[-1]
    return [(found.start() - AXIS_WIDTH, found.group()) for found in re.finditer(r"\w+", axis)]


def plot_width(graph: TimeGraph) -> int:
    return len(graph.render().plain.splitlines()[-1]) - AXIS_WIDTH


@pytest.mark.parametrize("size", SIZES)
async def test_an_ended_builds_graphs_span_its_start_to_its_end(
    tui, bench: Bench, tmp_path: Path, size: tuple[int, int]
) -> None:
    build_id = start_naps(bench, tmp_path, 3, 1.2, "naps", jobs=1)
    app = tui()
    async with app.run_test(size=size) as pilot:
        screen = await open_screen(app, pilot, build_id)
        graphs = [
            screen.query_one("#build-cpu", TimeGraph),
            screen.query_one("#build-memory", TimeGraph),
            screen.query_one("#build-edges", ParallelismGraph),
        ]
        edges_graph = graphs[2]
        assert isinstance(edges_graph, ParallelismGraph)
        await wait_until(pilot, "the exact edges", lambda: edges_graph.exact, 60)
        await pilot.pause(0.3)
        record = screen.record
        assert record is not None and record.state == SUCCEEDED
        assert record.started is not None and record.ended is not None
        length = record.ended - record.started
        assert len(graphs[0].samples) >= 1
        for graph in graphs:
            width = plot_width(graph)
            labels = axis_labels(graph)
            # The right end: the build's length, ending in the axis's last cell.
            end = time_label(length)
            assert labels[-1] == (width - len(end), end), (graph.id, labels)
            # The left edge is the build's start; each tick is its column's time, the plot's
            # columns spanning the build's start to its end evenly.
            assert labels[0] == (0, "0s"), (graph.id, labels)
            for where, label in labels[:-1]:
                assert where % TICK_COLUMNS == 0, (graph.id, labels)
                assert label == time_label(where * length / width), (graph.id, labels, length)


class GraphApp(App[None]):
    """A graph as wide as the build screen's are at 80 and 160 columns (25 or 26, and 52 or 53
    cells: a third of the screen each, less a cell of padding)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def compose(self) -> ComposeResult:
        yield TimeGraph("CPU", lambda v: f"{v:.0f}%", 100.0, id="graph")

    def on_mount(self) -> None:
        self.query_one(TimeGraph).styles.width = self.width


@pytest.mark.parametrize("width", [25, 26, 52, 53])
@pytest.mark.parametrize("seconds", [9, 100, 1000, 3900, 40000])
async def test_the_time_axis_always_ends_in_the_builds_length(width: int, seconds: int) -> None:
    """An ended graph's axis ends in its length at the widths of 80 and 160 columns, whatever
    its length: a tick that would run into it gives way (at 26 cells the tick at 15 columns of
    a 65-minute build, "51m19", fits no more than "1h05" beside it)."""
    app = GraphApp(width)
    async with app.run_test(size=(width, 8)) as pilot:
        graph = app.query_one(TimeGraph)
        for second in range(seconds):
            graph.add(50.0, t=1000.0 + second)
        graph.live = False
        await pilot.pause()
        axis = graph.render().plain.splitlines()[-1]
        assert len(axis) == width, axis
        assert axis.endswith(time_label(seconds)), axis
        assert axis.startswith(" " * (AXIS_WIDTH - 1) + "└0s"), axis
        assert "─" + time_label(seconds) in axis, axis  # a cell of line before it
