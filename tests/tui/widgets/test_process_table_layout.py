"""A live build's jobs end and start every second: a new number of processes changes only the
table's own rows (its height is its own, CSS), so it is drawn without a layout of the whole
screen, which made such a frame cost twice as much (issue 23 item 2). Where the table's
scrollbar comes or goes, the screen is laid out as before."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import Static

from workbench.supervision.stall import ProcessRow
from workbench.tui.widgets.process_table import ProcessTable


class Panes(App[None]):
    CSS = "ProcessTable { height: 12; border-top: solid $primary; } Static { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield ProcessTable(id="processes")
        yield Static("the log", id="log")


def _rows(count: int, seconds: float) -> list[ProcessRow]:
    return [
        ProcessRow(1000 + n, "compiler", "cc1plus", f"/src/unit_{n}.cc", 50.0, 10**8, seconds, "R")
        for n in range(count)
    ]


def _pids(table: ProcessTable) -> list[str]:
    return [
        table.render_line(y).text.split()[0]
        for y in range(1, table.scrollable_content_region.height)
        if table.render_line(y).text.strip()
    ]


async def test_a_new_number_of_processes_draws_the_table_without_a_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = Panes()
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(ProcessTable)
        table.show(_rows(16, 5.0))
        await pilot.pause()
        assert table.show_vertical_scrollbar  # 16 rows in a table of 10
        layouts: list[bool] = []  # the table asking for a layout of the screen
        original = Widget.refresh

        def counted(self: Widget, *regions: object, **kwargs: object) -> Widget:
            if self is table and kwargs.get("layout"):
                layouts.append(True)
            return original(self, *regions, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Widget, "refresh", counted)
        for count in (15, 17, 16, 14):
            table.show(_rows(count, 6.0 + count / 10))  # the same widths
            await pilot.pause()
            await pilot.pause()
            assert table.virtual_size.height == count + 1  # the header and the rows
            assert table.vertical_scrollbar.window_virtual_size == count + 1
            assert _pids(table)[:3] == ["1000", "1001", "1002"]
        assert layouts == []  # was one a new count
        table.scroll_end(animate=False)
        await pilot.pause()
        table.show(_rows(12, 7.0))  # scrolled to the end, fewer rows: still in range
        await pilot.pause()
        await pilot.pause()
        assert table.scroll_y <= table.max_scroll_y
        shown = _pids(table)
        first = 1000 + round(table.scroll_y)
        assert shown == [str(pid) for pid in range(first, first + len(shown))], shown
        assert len(shown) == 10 and int(shown[-1]) <= 1011
        table.show(_rows(3, 7.5))  # the scrollbar goes: the screen is laid out
        await pilot.pause()
        await pilot.pause()
        assert layouts
        assert not table.show_vertical_scrollbar
        assert _pids(table) == ["1000", "1001", "1002"]
