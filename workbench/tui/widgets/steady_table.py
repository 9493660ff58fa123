"""A DataTable whose rows are never drawn at the column widths they had before an update.

Textual's DataTable (textual/widgets/_data_table.py, 8.2.8) measures new or changed cells when
the app is idle and widens its columns then, but caches each rendered cell under a key without
the column's width; only the Resize event that the new virtual size brings later changes the
key, and it asks for no redraw. A frame drawn in between (a loaded machine, a timer's refresh)
shows the new rows cut to the old widths ("comp", "src/") and can stay on screen until the next
refresh: seen on the build screen's process table, and as the variants table drawn narrower
under load. Here the cache key moves on as soon as the widths do.

A row cursor stays in view when the table is made shorter. Home and End move a row cursor
to the first and last row, as in every other list (DataTable's own Home and End only scroll
sideways, which left the highlight where it was).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.binding import Binding
from textual.widgets import DataTable


class SteadyTable(DataTable[Any]):
    """DataTable, with the widths measured at idle taking effect in the very next frame."""

    BINDINGS = [
        Binding("home", "first_row", "First", show=False),
        Binding("end", "last_row", "Last", show=False),
    ]

    def action_first_row(self) -> None:
        """The first row (a row cursor), else the leftmost column."""
        if self.cursor_type == "row":
            self.action_scroll_top()
        else:
            self.action_scroll_home()

    def action_last_row(self) -> None:
        """The last row (a row cursor), else the rightmost column."""
        if self.cursor_type == "row":
            self.action_scroll_bottom()
        else:
            self.action_scroll_end()

    def _render_widths(self) -> tuple[int, ...]:
        return tuple(column.get_render_width(self) for column in self.columns.values())

    def _update_dimensions(self, new_rows: Iterable[Any]) -> None:
        before = self._render_widths()
        super()._update_dimensions(new_rows)
        if self._render_widths() != before:
            self._update_count += 1  # what DataTable's own Resize handler does, only sooner
            self.refresh()

    def _update_column_widths(self, updated_cells: Any) -> None:
        before = self._render_widths()
        super()._update_column_widths(updated_cells)
        if self._render_widths() != before:
            self._update_count += 1
            self.refresh()

    def on_resize(self) -> None:
        # A table made shorter (a line shown above it, such as the first screen's nix-daemon
        # line) keeps its row cursor in view, after the layout that shortened it, whenever that
        # comes: a fix queued for "after the next refresh" ran before it on a loaded machine,
        # and the recommended row was left just below the table's last visible row.
        if self.cursor_type == "row" and self.row_count:
            self.move_cursor(row=self.cursor_row, animate=False)
