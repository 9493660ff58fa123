"""The process table draws its one-line cells without Rich's layout (issue 23: the table's
frame was most of a live build's second); what it draws must be DataTable's own, segment for
segment, style and mouse metadata included, for every kind of cell it shows."""

from __future__ import annotations

from rich.style import Style
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from workbench.supervision.stall import ProcessRow
from workbench.tui.widgets.process_table import ProcessTable


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield ProcessTable(id="processes")


async def test_each_cell_is_drawn_as_datatable_draws_it() -> None:
    app = OneTable()
    async with app.run_test(size=(120, 14)) as pilot:
        table = app.query_one(ProcessTable)
        rows = [
            ProcessRow(
                100 + i,
                "compiler",
                "cc1plus←c++",
                f"/src/unit_{i}.cc",
                99.0 - i,
                10**8,
                60.0 + i,
                "R",
            )
            for i in range(6)
        ]
        rows.append(ProcessRow(None, "link", "ld", None, None, None, None, None))  # "-" cells
        rows.append(
            ProcessRow(200, "compiler", "cc1plus", "/src/[b]not markup[/b].cc", 5.0, 1, 1.0, "R")
        )
        table.show(rows, flagged=102)  # the flagged row: styled Text cells with a ⚠
        await pilot.pause()
        table.move_cursor(row=2)
        await pilot.pause()
        compared = 0
        for base in (table.rich_style, table.rich_style + Style(bgcolor="red", bold=True)):
            for row in range(table.row_count):
                for column, spec in enumerate(table.ordered_columns):
                    width = spec.get_render_width(table)
                    for cursor in (False, True):
                        for hover in (False, True):
                            table._cell_render_cache.clear()
                            fast = table._one_line_cell(row, column, base, width, cursor, hover)
                            table._cell_render_cache.clear()
                            own = DataTable._render_cell(
                                table, row, column, base, width, cursor, hover
                            )
                            assert fast is not None, (row, column)
                            assert fast == own, (row, column, cursor, hover, fast, own)
                            compared += 1
        assert compared == 2 * 8 * 7 * 4
        # A cell wider than its column (before the widths are measured) is left to DataTable.
        assert table._one_line_cell(0, 3, table.rich_style, 4, False, False) is None
