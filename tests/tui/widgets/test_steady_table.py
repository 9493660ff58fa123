"""The tables' rows are drawn at the widths measured for them, in the first frame after."""

from __future__ import annotations

from textual import events
from textual.app import App, ComposeResult

from workbench.tui.widgets.steady_table import SteadyTable


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield SteadyTable()

    def on_mount(self) -> None:
        table = self.query_one(SteadyTable)
        table.add_column("kind", key="kind")
        table.add_column("file", key="file")


async def test_a_frame_drawn_after_the_widths_are_measured_shows_whole_cells() -> None:
    app = OneTable()
    async with app.run_test(size=(80, 10)) as pilot:
        table = app.query_one(SteadyTable)
        await pilot.pause()
        table.clear()
        table.add_row("compiler", "src/heavy_0.cc", key="job")
        # A frame drawn before the table measured its new row (a loaded machine): cut to the
        # labels' widths, as DataTable draws it; the cells are cached as drawn.
        assert table.render_line(1).text.split() == ["comp", "src/"]
        # The table measures at idle; the Resize its new size brings is still queued when the
        # next frame is drawn. DataTable drew that frame from its cache, still cut ("comp src/").
        await table._on_idle(events.Idle())
        assert table.render_line(1).text.split() == ["compiler", "src/heavy_0.cc"]
        await pilot.pause()
        assert table.render_line(1).text.split() == ["compiler", "src/heavy_0.cc"]


async def test_an_updated_cell_wider_than_its_column_is_drawn_whole_at_once() -> None:
    app = OneTable()
    async with app.run_test(size=(80, 10)) as pilot:
        table = app.query_one(SteadyTable)
        table.add_row("ld", "a.o", key="job")
        await pilot.pause()
        assert table.render_line(1).text.split() == ["ld", "a.o"]
        table.update_cell(
            "job", "file", "CMakeFiles/onnxruntime.dir/session.cc.o", update_width=True
        )
        table.render_line(1)
        await table._on_idle(events.Idle())
        assert table.render_line(1).text.split() == [
            "ld",
            "CMakeFiles/onnxruntime.dir/session.cc.o",
        ]
