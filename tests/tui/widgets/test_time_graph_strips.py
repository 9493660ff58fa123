"""A graph row is drawn as one Strip (issue 23 item 2: a live graph draws most of its rows again
at each new sample, and each of Textual's Strips carries seven caches of its own): the same
cells and styles as the widget's style applied over its runs, padded or cut to the width."""

from __future__ import annotations

from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.strip import Strip

from workbench.reading.build_text import memory, percent
from workbench.tui.widgets.parallelism_graph import ParallelismGraph
from workbench.tui.widgets.time_graph import TimeGraph


class Graphs(App[None]):
    def compose(self) -> ComposeResult:
        yield TimeGraph("CPU", percent, 100.0, scale_label="of all cores", id="cpu")
        yield TimeGraph(
            "Memory", memory, 0.0, limit_fraction=0.9, autoscale=True, peak_columns=True, id="rss"
        )
        yield ParallelismGraph(id="edges")


def _cells(strip: Strip) -> list[tuple[str, Any]]:
    return [(ch, style) for text, style, _ in strip for ch in text]


def _as_before(graph: TimeGraph, y: int) -> Strip:
    """The row as the graph drew it before: a Strip of its runs, the widget's style applied,
    then cut or padded to the width (three or four Strips)."""
    base = graph.rich_style
    segments = [
        Segment(cells, graph.get_component_rich_style(component) if component else None)
        for cells, component in graph._rows[y]  # type: ignore[index]
        if cells
    ]
    pad = Style.from_color(bgcolor=base.bgcolor)
    return Strip(segments).apply_style(base).crop_extend(0, graph.size.width, pad)


async def test_each_row_is_one_strip_with_the_cells_it_had(monkeypatch: pytest.MonkeyPatch) -> None:
    app = Graphs()
    async with app.run_test(size=(90, 30)) as pilot:
        cpu, rss = app.query_one("#cpu", TimeGraph), app.query_one("#rss", TimeGraph)
        edges = app.query_one(ParallelismGraph)
        edges.jobs = 4
        for second in range(40):
            cpu.add(float(second * 7 % 100), t=1000.0 + second)
            rss.add(float(2**20 * (second % 9 + 1)), 10.0 * 2**20, t=1000.0 + second)
            edges.show_sampled(float(second % 5), 1000.0 + second)
        await pilot.pause()
        made: list[int] = []
        original = Strip.__init__

        def counted(self: Strip, *args: Any, **kwargs: Any) -> None:
            made.append(1)
            original(self, *args, **kwargs)

        for graph in (cpu, rss, edges):
            graph._strips.clear()
            monkeypatch.setattr(Strip, "__init__", counted)
            drawn = [graph.render_line(y) for y in range(graph.size.height)]
            monkeypatch.setattr(Strip, "__init__", original)
            assert len(made) <= graph.size.height, len(made)  # one a row (was three or four)
            made.clear()
            for y, strip in enumerate(drawn):
                assert strip.cell_length == graph.size.width
                assert _cells(strip) == _cells(_as_before(graph, y)), (graph.id, y)


async def test_a_new_sample_makes_no_column_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph makes all its rows again to find those a sample changed: each column's cells
    are made once for each height, not again for every column at every sample."""
    import workbench.tui.widgets.time_graph as time_graph

    app = Graphs()
    async with app.run_test(size=(90, 30)) as pilot:
        cpu = app.query_one("#cpu", TimeGraph)
        for second in range(40):
            cpu.add(float(second * 7 % 100), t=1000.0 + second)
        await pilot.pause()
        cpu.render_line(0)
        made: list[int] = []
        original = time_graph._column
        monkeypatch.setattr(time_graph, "_column", lambda e, r: (made.append(e), original(e, r))[1])
        before = [list(row) for row in cpu.rows(cpu.size.width, cpu.size.height)]
        cpu.add(float(7 * 40 % 100), t=1040.0)
        after = cpu.rows(cpu.size.width, cpu.size.height)
        assert len(made) <= 1, made  # at most the new sample's height (was every column's)
        assert after != before
        assert time_graph.column_cells(0.5, 6) == [" "] * 3 + ["█"] * 3


async def test_samples_added_while_held_queue_no_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build screen adds its polls' samples at once and draws each graph once: no callback
    is queued (each of Textual's callbacks works out its function's signature again)."""
    app = Graphs()
    async with app.run_test(size=(90, 30)) as pilot:
        cpu = app.query_one("#cpu", TimeGraph)
        for second in range(10):
            cpu.add(50.0, t=1000.0 + second)
        await pilot.pause()
        cpu.render_line(0)
        queued: list[object] = []
        monkeypatch.setattr(cpu, "call_next", lambda *a, **k: queued.append(a))
        cpu.holding = True
        cpu.add(90.0, t=1010.0)
        cpu.add(95.0, t=1011.0)
        cpu.holding = False
        assert queued == []
        refreshed: list[object] = []
        original = cpu.refresh
        monkeypatch.setattr(
            cpu, "refresh", lambda *a, **k: (refreshed.append(a), original(*a, **k))[1]
        )
        cpu.draw_changed()
        assert refreshed and cpu._rows is not None
        assert "now 95%" in "".join(cells for cells, _ in cpu._rows[0])
        assert queued == []
