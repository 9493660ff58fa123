"""The process table draws its one-line cells without Rich's layout (issue 23: the table's
frame was most of a live build's second); what it draws must be DataTable's own, segment for
segment, style and mouse metadata included, for every kind of cell it shows."""

from __future__ import annotations

import importlib.metadata
from functools import partial
from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from workbench.supervision.stall import ProcessRow
from workbench.tui.widgets import process_table
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
                            table._cells_drawn.clear()
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


def _this_textuals_fill() -> str:
    """How the installed Textual's DataTable fills a row past its last column: its row cursor's
    style from 7.5.0 (its CHANGELOG, PR 6345), the row's colours faded before (6.2.1, the pin's)."""
    major, minor = (int(part) for part in importlib.metadata.version("textual").split(".")[:2])
    return process_table._FILL_CURSOR if (major, minor) >= (7, 5) else process_table._FILL_FADED


def _datatable_line(table: ProcessTable, row: int, cursor: Coordinate, hover: Coordinate) -> Any:
    """Row `row`'s line as DataTable alone draws it: its own cells and row styles, no cache."""
    table._row_render_cache.clear()
    table._cell_render_cache.clear()
    table._row_renderable_cache.clear()
    key = table._row_locations.get_key(row) if row >= 0 else table._header_row_key
    table._render_cell = partial(DataTable._render_cell, table)  # type: ignore[method-assign]
    table._get_row_style = partial(DataTable._get_row_style, table)  # type: ignore[method-assign]
    try:
        return DataTable._render_line_in_row(table, key, 0, table.rich_style, cursor, hover)
    finally:
        del table._render_cell, table._get_row_style
        table._row_render_cache.clear()


async def test_each_line_is_drawn_as_datatable_draws_it_after_rows_move() -> None:
    """Whole lines (cells, the fill after the last column, cursor and hover rows), from the
    cells kept as drawn, before and after a new CPU order moved rows (a moved row's cells say
    their new row to the mouse)."""
    app = OneTable()
    async with app.run_test(size=(140, 14)) as pilot:
        table = app.query_one(ProcessTable)

        def rows(order: list[int]) -> list[ProcessRow]:
            return [
                ProcessRow(100 + i, "compiler", "cc1plus", f"/src/u{i}.cc", cpu, 10**8, 9.0, "R")
                for i, cpu in zip(range(6), order, strict=True)
            ]

        table.show(rows([90, 80, 70, 60, 50, 40]), flagged=103)
        await pilot.pause()
        table.move_cursor(row=1)
        await pilot.pause()
        table._show_hover_cursor = True  # as after a mouse move: hovered rows are drawn so
        compared = 0
        away = Coordinate(-2, 0)  # no row under the mouse
        # Rows moved by an odd and by an even number of places (the same zebra stripe).
        for order in ([90, 80, 70, 60, 50, 40], [40, 80, 95, 60, 50, 99], [40, 99, 95, 60, 50, 90]):
            table.show(rows(order), flagged=103)
            await pilot.pause()
            # Each row as the last order left its cells drawn (no hover), under the mouse, and
            # again without: the next order finds them drawn that way.
            for hovering in (False, True, False):
                for row in range(-1, table.row_count):  # -1: the header
                    hover = Coordinate(row, 2) if hovering else away
                    cursor = table.cursor_coordinate
                    key = table._row_locations.get_key(row) if row >= 0 else table._header_row_key
                    table._row_render_cache.clear()
                    fast = table._render_line_in_row(key, 0, table.rich_style, cursor, hover)
                    own = _datatable_line(table, row, cursor, hover)
                    assert fast == own, (order, row, hover)
                    compared += 1
        assert compared == 3 * 3 * 7
        # The lines compared were the table's own fast ones, not DataTable's drawn for it.
        assert table._row_fill == _this_textuals_fill()


async def test_new_processes_take_the_rows_of_those_gone() -> None:
    """A live build's second where some jobs ended and as many started (a quiet -j16 build: a
    few a second): the table is not emptied and filled again (every row added through
    DataTable, measured and drawn anew); the new processes take the rows of the ones gone, and
    every line is still DataTable's own drawing of the rows in their order, the highlighted
    process still highlighted (the cursor goes to the top where it is gone, as in a table
    filled anew)."""
    app = OneTable()
    async with app.run_test(size=(140, 14)) as pilot:
        table = app.query_one(ProcessTable)

        def rows(pids: list[int]) -> list[ProcessRow]:
            return [
                ProcessRow(pid, "compiler", "cc1plus", f"/src/u{pid}.cc", cpu, 10**8, 9.0, "R")
                for pid, cpu in zip(pids, (90, 80, 70, 60, 50, 40), strict=True)
            ]

        table.show(rows([100, 101, 102, 103, 104, 105]))
        await pilot.pause()
        table.move_cursor(row=2)  # process 102
        await pilot.pause()
        added: list[Any] = []
        add_row = table.add_row

        def counted(*cells: Any, **options: Any) -> Any:
            added.append(options.get("key"))
            return add_row(*cells, **options)

        table.add_row = counted  # type: ignore[method-assign]
        away = Coordinate(-2, 0)
        for pids, highlighted in (
            ([200, 102, 101, 201, 104, 105], 102),  # two ended, two started, 102 moved up
            ([300, 301, 302, 201, 200, 105], None),  # 102 ended: the cursor to the top
        ):
            table.show(rows(pids))
            await pilot.pause()
            assert added == [], added
            assert [table._row_locations.get_key(row).value for row in range(6)] == [
                str(pid) for pid in pids
            ]
            for row, pid in enumerate(pids):
                shown = [str(cell) for cell in table.get_row_at(row)]
                assert shown[0] == str(pid) and shown[3] == f"/src/u{pid}.cc", shown
            if highlighted is None:
                assert table.cursor_coordinate.row == 0
            else:
                assert table.selected_pid() == highlighted
            for row in range(-1, table.row_count):  # -1: the header
                cursor = table.cursor_coordinate
                key = table._row_locations.get_key(row) if row >= 0 else table._header_row_key
                table._row_render_cache.clear()
                fast = table._render_line_in_row(key, 0, table.rich_style, cursor, away)
                own = _datatable_line(table, row, cursor, away)
                assert fast == own, (pids, row)
        assert table._row_fill == _this_textuals_fill()
        # Fewer processes than rows: the table is filled anew, as before.
        table.show(rows([400, 401, 402, 403, 404, 405])[:4])
        await pilot.pause()
        assert table.row_count == 4 and len(added) == 4


async def test_a_fill_the_table_does_not_know_is_left_to_datatable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Textual whose DataTable fills a row past its last column otherwise than either known
    one (a stand-in: Textual's own _render_line_in_row, 8.2.8 or 6.2.1, with its fill made
    italic): the table draws every line through DataTable, never a fill of its own making."""
    drawn_by_datatable = DataTable._render_line_in_row

    def other_fill(table: DataTable[Any], *args: Any) -> Any:
        fixed, scrollable = drawn_by_datatable(table, *args)
        (fill,) = scrollable[-1]
        changed = [Segment(fill.text, (fill.style or Style()) + Style(italic=True))]
        return fixed, [*scrollable[:-1], changed]

    monkeypatch.setattr(DataTable, "_render_line_in_row", other_fill)
    app = OneTable()
    async with app.run_test(size=(140, 14)) as pilot:
        table = app.query_one(ProcessTable)
        table.show(
            [
                ProcessRow(100 + i, "compiler", "cc1plus", f"/src/u{i}.cc", 9.0, 1, 9.0, "R")
                for i in range(3)
            ]
        )
        await pilot.pause()
        assert table._row_fill == process_table._FILL_UNKNOWN
        for y in range(4):  # the header and three rows, as the screen draws them
            last = list(table.render_line(y))[-1]
            assert last.style is not None and last.style.italic, (y, last)
