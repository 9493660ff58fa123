"""A table made narrower (a terminal resized, a tmux pane split) gives the file column back:
DataTable widens a column to its widest cell and never narrows it, so after a resize from 160 to
80 columns an ended build's jobs showed PID, kind, tool and a file column as wide as before,
their CPU, RSS and times pushed off the screen."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets.data_table import ColumnKey

from workbench.supervision.stall import ProcessRow
from workbench.tui.widgets.process_table import ProcessTable


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield ProcessTable(id="processes")


def _rows() -> list[ProcessRow]:
    deep = "/tmp/trial/libuv/test/fixtures/a/rather/deep/directory/of/the/tree"
    return [
        ProcessRow(None, "compiler", "cc", f"{deep}/test-unit-{n}.c", None, 60 << 20, 3.0 - n, None)
        for n in range(3)
    ]


async def test_a_narrower_table_shows_every_column_again() -> None:
    app = OneTable()
    async with app.run_test(size=(160, 12)) as pilot:
        table = app.query_one(ProcessTable)
        table.show(_rows())
        await pilot.pause()
        wide = table.columns[ColumnKey("file")].get_render_width(table)
        assert wide > 60, wide  # the whole path fits at 160 columns
        table.move_cursor(row=1)
        await pilot.resize_terminal(80, 12)
        await pilot.pause()
        await pilot.pause()
        widths = [column.get_render_width(table) for column in table.ordered_columns]
        assert sum(widths) <= table.size.width, (widths, table.size.width)
        line = "".join(segment.text for segment in table.render_line(1))
        assert "3.0s" in line and "60 MiB" in line, line
        # The highlighted job stays highlighted.
        assert table.cursor_row == 1
        # And wider again: the file column takes the room back.
        await pilot.resize_terminal(160, 12)
        await pilot.pause()
        await pilot.pause()
        assert table.columns[ColumnKey("file")].get_render_width(table) == wide
