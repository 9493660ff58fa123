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


class TableUnderALine(App[None]):
    """A table of 30 rows with a line above it that is shown late (the first screen's daemon
    line): the table gets one row shorter."""

    CSS = "#late { display: none; height: 1; } SteadyTable { height: 1fr; }"

    def compose(self) -> ComposeResult:
        from textual.widgets import Static

        yield Static("a late line", id="late")
        yield SteadyTable(cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(SteadyTable)
        table.add_column("row", key="row")
        for index in range(30):
            table.add_row(f"row {index}", key=str(index))


async def test_a_row_cursor_on_the_last_visible_row_stays_in_view_when_the_table_shrinks() -> None:
    app = TableUnderALine()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(SteadyTable)
        await pilot.pause()
        table.move_cursor(row=20, animate=False)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        rows_shown = table.scrollable_content_region.height - 1  # less the header
        assert table.scroll_y == 20 - rows_shown + 1  # the cursor on the last row shown
        app.query_one("#late").display = True  # the table is a row shorter now
        await pilot.pause()
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        rows_shown = table.scrollable_content_region.height - 1
        assert table.scroll_y <= 20 <= table.scroll_y + rows_shown - 1, (
            table.scroll_y,
            rows_shown,
        )
