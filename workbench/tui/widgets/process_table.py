"""The build's processes (or, once it ended, its jobs) as a table sortable by any column.

An update replaces at most a screenful of rows (the supervisor's live view keeps the busiest
two dozen processes), so its cost does not grow with the build's length.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.color import Color
from textual.coordinate import Coordinate
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from workbench.progress.visible import visible
from workbench.reading.follow import duration, size
from workbench.supervision.stall import ProcessRow
from workbench.tui.widgets.steady_table import SteadyTable

# Where Nix builders unpack sources: /build/SRC/ (sandbox), /tmp/nix-build-NAME.drv-0/SRC/.
_BUILDER_ROOT = re.compile(r"^(?:/build|/tmp/nix-build-[^/]+)/[^/]+/")
# Cells other than the file's, and the gaps between columns (7 columns, 2 cells each).
# The tool column holds a folded driver ("cc1plus←c++"); CPU is labelled per core.
_OTHER_COLUMNS = 7 + 9 + 13 + 10 + 8 + 7 + 14


def short_file(path: str | None, width: int = 48, base: str | None = None) -> str:
    """A path as short as it can be told: relative to `base` (the build's directory) or to a
    Nix builder's source directory, then its last parts that fit ("core/cpu/math/gemm.cc")."""
    if not path:
        return ""
    if base and path.startswith(base.rstrip(os.sep) + os.sep):
        path = path[len(base.rstrip(os.sep)) + 1 :]
    else:
        path = _BUILDER_ROOT.sub("", path)
    if len(path) <= width:
        return path
    parts = path.split(os.sep)
    shown = parts[-1]
    for part in reversed(parts[:-1]):
        if len(shown) + len(part) + 2 > width:
            break
        shown = f"{part}{os.sep}{shown}"
    return shown if len(shown) <= width else "…" + shown[-(width - 1) :]


# (label, key, sort value, numbers sort largest first)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("PID", "pid"),
    ("kind", "kind"),
    ("tool", "tool"),
    ("file", "file"),
    ("CPU %/core", "cpu"),
    ("RSS", "rss"),
    ("time", "time"),
)
_NUMERIC = {"pid", "cpu", "rss", "time"}
# How DataTable fills a row's line past its last column (`ProcessTable._fill_style`).
_FILL_CURSOR = "the row cursor's style, to the edge"  # Textual >= 7.5.0
_FILL_FADED = "the row's colours, faded"  # Textual < 7.5.0 (6.2.1)
_FILL_UNKNOWN = "neither: DataTable draws every line"
_FILLS = (_FILL_CURSOR, _FILL_FADED)
CELLS_DRAWN = 4096  # one-line cells kept as drawn (a screenful is 16 rows of 7)


def sort_value(row: ProcessRow, key: str) -> Any:
    """What a column sorts by (missing numbers sort as -1, below every real one)."""
    if key == "pid":
        return row.pid if row.pid is not None else -1
    if key == "cpu":
        return row.cpu_percent if row.cpu_percent is not None else -1.0
    if key == "rss":
        return row.rss if row.rss is not None else -1
    if key == "time":
        return row.running_s if row.running_s is not None else -1.0
    return (getattr(row, key) or "").lower()


def sorted_rows(rows: Iterable[ProcessRow], key: str, descending: bool) -> list[ProcessRow]:
    """The rows by one column; ties keep the order they came in."""
    return sorted(rows, key=lambda row: sort_value(row, key), reverse=descending)


def _forget(cache: Any, drop: Callable[[tuple[Any, ...]], bool]) -> None:
    """Discard the entries of one of DataTable's LRUCaches whose key `drop` says."""
    known = cache.keys()  # an LRUCache is not iterable itself
    for cached in [cached for cached in known if drop(cached)]:
        cache.discard(cached)


class ProcessTable(SteadyTable):
    """PID, kind, tool, file, CPU %, RSS, running time; `o` / a header click sorts."""

    BINDINGS = [
        Binding(
            "o",
            "next_sort",
            "Sort",
            id="processes.sort",
            tooltip="Sort by the next column (PID, kind, tool, file, CPU %, RSS, time)",
        ),
        Binding(
            "O",
            "reverse_sort",
            "Reverse",
            id="processes.reverse",
            show=False,
            tooltip="Reverse the order of the sorted column",
        ),
    ]
    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {"processes--flagged"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.rows_shown: list[ProcessRow] = []
        self.sort_key = "cpu"
        self.descending = True
        self.flagged: int | None = None  # a stalled process's PID, marked in the table
        self.base: str | None = None  # files under this directory are shown relative to it
        self._filled: list[tuple[str, list[Any]]] | None = None  # what the table holds now
        self._frame_styles: dict[str, Any] | None = None  # while a frame is drawn
        # Each one-line cell as last drawn, with what it was drawn for (see `_one_line_cell`).
        self._cells_drawn: dict[
            tuple[RowKey, ColumnKey], tuple[tuple[Any, ...], Any, list[list[Segment]]]
        ] = {}
        self._header_drawn: tuple[tuple[Any, ...], tuple[list[Any], list[Any]]] | None = None
        # How this Textual's DataTable fills a row past its last column (`_fill_style`): found
        # from its own drawing of the first line drawn.
        self._row_fill: str | None = None
        self._styles_made: dict[tuple[Any, ...], tuple[Style, Style]] = {}
        self._styles_applied: dict[tuple[Style, Style], tuple[Style | None, Style | None]] = {}
        self._sizing_from: Size | None = None  # the virtual size before, while it is updated
        self._width_seen: int | None = None  # the width at the last resize

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def show(self, rows: Iterable[ProcessRow], flagged: int | None = None) -> None:
        """Replace the rows, keeping the highlighted process highlighted."""
        self.rows_shown = list(rows)
        self.flagged = flagged
        self._fill()

    def _fill(self) -> None:
        flagged_style = self.get_component_rich_style("processes--flagged", partial=True)
        file_width = max(16, self.size.width - _OTHER_COLUMNS) if self.size.width else 48
        filled: list[tuple[str, list[Any]]] = []
        for number, row in enumerate(sorted_rows(self.rows_shown, self.sort_key, self.descending)):
            key = str(row.pid) if row.pid is not None else f"job-{number}"
            # Every cell is Text: process and file names are the build's, never markup, and a
            # str cell would be parsed as markup each time its row is drawn again.
            cells: list[Any] = [
                Text(str(row.pid) if row.pid is not None else "-"),
                Text(row.kind),
                Text(visible(row.tool)),
                Text(visible(short_file(row.file, file_width, self.base))),
                Text(f"{row.cpu_percent:.0f}" if row.cpu_percent is not None else "-"),
                Text(size(row.rss) if row.rss is not None else "-"),
                Text(duration(row.running_s)),
            ]
            if row.pid is not None and row.pid == self.flagged:
                cells = [Text(f"⚠{cells[0]}", style=flagged_style)] + [
                    Text(str(cell), style=flagged_style) for cell in cells[1:]
                ]
            filled.append((key, cells))
        if filled == self._filled:
            return  # nothing changed: nothing is redrawn, nothing written to the terminal
        before, self._filled = self._filled, filled
        if before is not None and [key for key, _ in before] == [key for key, _ in filled]:
            # The same processes in the same order (a live build's usual second): only the
            # cells whose text changed are set; the rows stay, and with them the cursor.
            changed: set[tuple[RowKey, ColumnKey]] = set()
            for (key, old_cells), (_, cells) in zip(before, filled, strict=True):
                for (_, column), old, new in zip(COLUMNS, old_cells, cells, strict=True):
                    if old != new and self._set_cell(key, column, new):
                        changed.add((RowKey(key), ColumnKey(column)))
            if changed:
                self._redraw_cells(changed)
            return
        selected = self.selected_key()
        if before is not None and len(before) == len(filled):
            # As many processes, some of them new, in another order (a live build's second:
            # its CPU order moves, and on a quiet -j16 build a few jobs end and as many start):
            # the rows of the processes gone are taken by the new ones, the changed cells set
            # and the rows reordered in place, as DataTable's own sort does, instead of a table
            # emptied, filled and measured again (every row added anew through DataTable, each
            # measured, the cursor moved: a third of the TUI's second on such a build).
            cells_before = dict(before)
            keys = [key for key, _ in filled]
            arrived = [key for key in keys if key not in cells_before]
            staying = set(keys)
            gone = [key for key, _ in before if key not in staying]
            if self._reorder(keys, dict(zip(gone, arrived, strict=True))):
                for old_key, new_key in zip(gone, arrived, strict=True):
                    cells_before[new_key] = cells_before.pop(old_key)
                for key, cells in filled:
                    for (_, column), old, new in zip(
                        COLUMNS, cells_before[key], cells, strict=True
                    ):
                        if old != new:
                            self._set_cell(key, column, new)
                if selected is not None and selected in self.rows:
                    self.move_cursor(row=self.get_row_index(selected), animate=False)
                elif selected is not None:
                    # Its process is gone: where a table filled anew puts the cursor.
                    self.move_cursor(row=0, animate=False)
                    self.scroll_to(0, 0, animate=False)
                return
        self.clear()
        for key, cells in filled:
            self.add_row(*cells, key=key)
        if selected is not None and selected in self.rows:
            self.move_cursor(row=self.get_row_index(selected), animate=False)

    def _reorder(self, keys: list[str], renamed: dict[str, str] | None = None) -> bool:
        """Put the rows in this order (DataTable.sort's own steps, with the order given), the
        rows of `renamed`'s keys first given its values as keys (a row of a process gone taken
        by a new one: its cells are set after); False where DataTable's insides are not as
        known (nothing changed then)."""
        try:
            from textual._two_way_dict import TwoWayDict
            from textual.widgets.data_table import Row

            locations = TwoWayDict({RowKey(key): index for index, key in enumerate(keys)})
            rows, data = self.rows, self._data
            if any(RowKey(old) not in rows or RowKey(old) not in data for old in renamed or ()):
                return False
            for old, new in (renamed or {}).items():
                row = rows.pop(RowKey(old))
                rows[RowKey(new)] = Row(RowKey(new), row.height, row.label, row.auto_height)
                data[RowKey(new)] = data.pop(RowKey(old))
            self._row_locations = locations
        except (ImportError, AttributeError, TypeError):
            return False
        self._update_count += 1
        self.refresh()
        return True

    def _set_cell(self, key: str, column: str, value: Any) -> bool:
        """Set one cell; True where it is left to `_redraw_cells` to draw. DataTable's own
        `update_cell` makes it draw every cell of the table again (each of its caches is keyed
        by one update counter): 16 rows of 7 cells took 60-150 ms a poll on the loaded VM, the
        longest thing the event loop ran. A cell that fits its column is set in place and only
        its row is drawn again; one wider than its column goes through `update_cell`."""
        try:
            row_key, column_key = RowKey(key), ColumnKey(column)
            width = self.columns[column_key]
            room = width.content_width if width.auto_width else width.width
            shown = value.cell_len if isinstance(value, Text) else cell_len(str(value))
            row = self._data[row_key]
        except (AttributeError, KeyError):  # not DataTable's insides as known: the public way
            row = None
        if row is None or shown > room:
            self.update_cell(key, column, value, update_width=True)
            return False
        row[column_key] = value
        return True

    def _redraw_cells(self, cells: set[tuple[RowKey, ColumnKey]]) -> None:
        """Forget what was drawn of these cells (and of their rows' renderables and lines) and
        draw their rows again: the other cells come from DataTable's caches as they are (a
        live build's second changes the time and CPU of each row, not its PID, tool or file)."""
        rows = {row for row, _ in cells}
        try:
            # Cells and rows are keyed (row key, [column key,] ...); row renderables (update
            # count, index).
            _forget(self._cell_render_cache, lambda cached: (cached[0], cached[1]) in cells)
            _forget(self._row_render_cache, lambda cached: cached[0] in rows)
            indices = {self._row_locations.get(row) for row in rows}
            _forget(self._row_renderable_cache, lambda cached: cached[1] in indices)
            self._line_cache.clear()
        except AttributeError:  # not DataTable's insides as known: draw every cell again
            self._update_count += 1
            self.refresh()
            return
        # Only these rows' lines are drawn again (the others stay on screen as they are).
        for index in indices:
            if index is not None:
                self.refresh_row(index)

    # -- one frame's styles ---------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        # The styles every line of a frame shares (the table's own, each row kind's) are each
        # a walk up the DOM: DataTable works them out for every line it draws, a third of the
        # table's frame when every row changed; here once a frame.
        self._frame_styles = {}
        try:
            return super().render_lines(crop)
        finally:
            self._frame_styles = None

    def _frame_style(self, component: str) -> Style:
        """The table's style ("") or a component's, once a frame (outside one: each time)."""
        styles = self._frame_styles
        style = None if styles is None else styles.get(component)
        if style is None:
            style = (
                self.rich_style
                if component == ""
                else self.get_component_styles(component).rich_style
            )
            if styles is not None:
                styles[component] = style
        return style

    def render_line(self, y: int) -> Strip:
        if self.fixed_rows:
            return super().render_line(y)
        # DataTable.render_line with no fixed rows, its style from the frame's.
        scroll_x, scroll_y = self.scroll_offset
        if y >= (self.header_height if self.show_header else 0):
            y += scroll_y
        return self._render_line(y, scroll_x, scroll_x + self.size.width, self._frame_style(""))

    def _get_row_style(self, row_index: int, base_style: Style) -> Style:
        if row_index == -1:
            return self._frame_style("datatable--header")
        if row_index < self.fixed_rows:
            return self._frame_style("datatable--fixed")
        if self.zebra_stripes:
            return self._frame_style(
                "datatable--odd-row" if row_index % 2 else "datatable--even-row"
            )
        return base_style

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> Any:
        """DataTable's cell, made without Rich's layout where the cell is one line of text that
        fits: the same segments (a test compares them with DataTable's own for every cell of
        a table), in a fraction of the time. A live build's table changes every second (its
        times, its CPU order), and Rich's Padding and Styled around each cell were most of the
        table's frame."""
        try:
            lines = self._one_line_cell(row_index, column_index, base_style, width, cursor, hover)
        except (AttributeError, KeyError, IndexError, TypeError):  # DataTable's insides moved
            lines = None
        if lines is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        return lines

    def _one_line_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> list[list[Segment]] | None:
        context = self._cell_context()
        if row_index < 0 or column_index < 0 or context[-2]:  # fixed rows or columns
            return None
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None or self.rows[row_key].height != 1:
            return None
        # Kept by cell, not by DataTable's update count: a new CPU order (every second or so
        # on a live build) moves rows, and a row that kept its place keeps its cells.
        cell = self._data[row_key].get(column_key)
        how = (row_index, column_index, width, base_style, cursor, hover, context)
        drawn = self._cells_drawn.get((row_key, column_key))
        if drawn is not None and drawn[0] == how and (drawn[1] is cell or drawn[1] == cell):
            return drawn[2]
        padding = context[-1]
        room = width - 2 * padding
        if not isinstance(cell, Text):
            return None
        length = cell.cell_len
        if (
            "\n" in cell.plain
            or cell.justify not in (None, "default", "left")
            or length > room
            or room < 0
        ):
            return None
        pre_style, post_style = self._cell_styles(
            row_index, column_index, base_style, cursor, hover
        )
        if not cell._spans and not cell.style:
            # Plain text: its pieces take the two styles DataTable's would (a blank's and an
            # unstyled piece's), worked out once for the cell's place, not piece by piece.
            on_blank, on_text = self._applied(pre_style, post_style)
            line = [Segment(" " * padding, on_blank)] if padding else []
            line.append(Segment(cell.plain, on_text))
            if room > length:
                line.append(Segment(" " * (room - length), on_blank))
            if padding:
                line.append(Segment(" " * padding, on_blank))
        else:
            blank = Style()
            segments = [Segment(" " * padding, blank)] if padding else []
            segments.extend(cell.render(self.app.console, end=""))
            if room > length:
                segments.append(Segment(" " * (room - length), blank))
            if padding:
                segments.append(Segment(" " * padding, blank))
            line = list(Segment.apply_style(segments, pre_style, post_style))
        lines = [line]
        if len(self._cells_drawn) > CELLS_DRAWN:
            self._cells_drawn.clear()
        self._cells_drawn[(row_key, column_key)] = (how, cell, lines)
        return lines

    def _cell_context(self) -> tuple[Any, ...]:
        """What every cell's drawing depends on beside its place, read once a frame (each is a
        reactive or a property read; they were most of a cell's time when kept as drawn):
        whether a row or column is fixed and the cell padding are the last two."""
        styles = self._frame_styles
        context = None if styles is None else styles.get("#context")
        if context is None:
            context = (
                self.show_cursor,
                self._show_hover_cursor,
                self._pseudo_class_state,
                self.cursor_foreground_priority,
                self.cursor_background_priority,
                bool(self.fixed_rows or self.fixed_columns),
                self.cell_padding,
            )
            if styles is not None:
                styles["#context"] = context
        return context

    def _cell_styles(
        self, row_index: int, column_index: int, base_style: Style, cursor: bool, hover: bool
    ) -> tuple[Style, Style]:
        """DataTable's styles before and after a cell's own (its place's mouse metadata, the
        cursor's and the hover's), kept by place: a moved row finds them made."""
        context = self._cell_context()
        key = (row_index, column_index, base_style, cursor, hover, context)
        styles = self._styles_made.get(key)
        if styles is None:
            component_style, post_style = self._get_styles_to_render_cell(
                False,
                False,
                False,
                hover,
                cursor,
                context[0],
                context[1],
                context[3] == "css",
                context[4] == "css",
            )
            pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index})
            pre_style += component_style
            if len(self._styles_made) > CELLS_DRAWN:
                self._styles_made.clear()
            styles = self._styles_made[key] = (pre_style, post_style)
        return styles

    def _applied(self, pre_style: Style, post_style: Style) -> tuple[Style, Style]:
        """The styles `Segment.apply_style` gives a blank piece and an unstyled one."""
        key = (pre_style, post_style)
        applied = self._styles_applied.get(key)
        if applied is None:
            pieces = [Segment(" ", Style()), Segment("x")]
            blank, text = Segment.apply_style(pieces, pre_style, post_style)
            if len(self._styles_applied) > CELLS_DRAWN:
                self._styles_applied.clear()
            applied = self._styles_applied[key] = (blank.style, text.style)
        return applied  # type: ignore[return-value]

    def _fill_style(
        self, fill: str, row_index: int, row_style: Style, cursor: bool, hover: bool
    ) -> Style:
        """The style of the blank that fills a row's line past its last column, as DataTable
        draws it on a table with a row cursor: since Textual 7.5.0 (CHANGELOG: "The DataTable
        row cursor will extend to the full width", PR 6345) the row's style with its cursor's
        and hover's, and the mouse told it is past the last column; before (6.2.1, the pin's
        and pyproject's lower bound) the row's colours, its background faded a quarter toward
        the table's, and no mouse metadata."""
        if fill == _FILL_CURSOR:
            extend_style, _ = self._get_styles_to_render_cell(
                row_index == -1,
                False,
                False,
                hover,
                cursor,
                self.show_cursor,
                self._show_hover_cursor,
                False,
                False,
            )
            extend_style = row_style + extend_style
            return extend_style + Style.from_meta(
                {"row": row_index, "column": 0, "out_of_bounds": True}
            )
        if row_style.bgcolor is None:
            return Style.from_color(row_style.color, row_style.bgcolor)
        styles = self._frame_styles
        background = None if styles is None else styles.get("#background")
        if background is None:
            background = self.background_colors[1]  # a walk up the DOM: once a frame
            if styles is not None:
                styles["#background"] = background
        faded = Color.from_rich_color(row_style.bgcolor).blend(background, factor=0.25)
        return Style.from_color(row_style.color, faded.rich_color)

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[list[Any], list[Any]]:
        """DataTable's row line where the table is as this one always is (a row cursor, no
        row labels, no fixed columns): its cells, then the blank that fills the width, with
        the frame's styles (DataTable works out the header's style and the fill's for every
        line). The fill is drawn as this Textual's DataTable draws it (`_fill_style`: two
        ways, 6.2.1's and 7.5's on). A test compares every line with DataTable's own."""
        if (
            self.cursor_type != "row"
            or self.fixed_columns
            or (self._labelled_row_exists and self.show_row_labels)
            or self._row_fill == _FILL_UNKNOWN
        ):
            return super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
        cache_key = (
            row_key,
            line_no,
            base_style,
            cursor_location,
            hover_location,
            self.cursor_type,
            self.show_cursor,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        cached = self._row_render_cache.get(cache_key)
        if cached is not None:
            return cached
        locations = self._row_locations
        found = locations.get(row_key) if row_key in locations else None
        row_index = -1 if found is None else found
        row_style = self._get_row_style(row_index, base_style)
        # A row cursor highlights every cell of its row (DataTable._should_highlight).
        cursor = cursor_location.row == row_index
        hover = hover_location.row == row_index
        columns = self.ordered_columns
        widths = [column.get_render_width(self) for column in columns]
        header = None
        if row_index == -1:
            # The header is drawn again only when it changes (DataTable draws it, through
            # Rich's layout, after each new order of the rows).
            header = (
                line_no,
                base_style,
                row_style,
                cursor,
                hover,
                tuple(widths),
                tuple(str(column.label) for column in columns),
                self.size.width,
                self.show_cursor,
                self._show_hover_cursor,
                self._pseudo_class_state,
            )
            if self._header_drawn is not None and self._header_drawn[0] == header:
                return self._header_drawn[1]
        remaining = max(0, self.size.width - sum(widths) - self._row_label_column_width)
        if self._row_fill is None:
            # The first line is drawn by DataTable, and its fill tells which of the two known
            # this Textual's is; where neither, every line is left to DataTable from now on.
            own = super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
            fills = {
                fill: [
                    Segment(
                        " " * remaining, self._fill_style(fill, row_index, row_style, cursor, hover)
                    )
                ]
                for fill in _FILLS
            }
            self._row_fill = next(
                (fill for fill, drawn in fills.items() if drawn == own[1][-1]), _FILL_UNKNOWN
            )
            return own
        cells = [
            self._render_cell(row_index, index, row_style, width, cursor=cursor, hover=hover)[
                line_no
            ]
            for index, width in enumerate(widths)
        ]
        fill_style = self._fill_style(self._row_fill, row_index, row_style, cursor, hover)
        cells.append([Segment(" " * remaining, fill_style)])
        pair: tuple[list[Any], list[Any]] = ([], cells)
        self._row_render_cache[cache_key] = pair
        if header is not None:
            self._header_drawn = (header, pair)
        return pair

    # -- a new row count without a layout of the screen ---------------------------------------

    def _update_dimensions(self, new_rows: Iterable[Any]) -> None:
        before = self.virtual_size
        self._sizing_from = before
        try:
            super()._update_dimensions(new_rows)
        finally:
            self._sizing_from = None

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> ProcessTable:
        """Widget.refresh; the layout DataTable asks for when only its number of rows changed
        (its virtual size, a reactive that lays the whole screen out) is its scrollbars told
        instead: the table's height is its own (CSS), nothing else moves. A live build's jobs
        end and start every second, and each new count laid the screen out: a frame of twice
        the cost (VM). Where a scrollbar comes or goes, that still lays the screen out (the
        scrollbar's reactive asks for it)."""
        before = getattr(self, "_sizing_from", None)  # (DataTable's __init__ refreshes too)
        if (
            layout
            and before is not None
            and not regions
            and not recompose
            and self.virtual_size.width == before.width
            and self.is_mounted
        ):
            self._sizing_from = None
            self._scroll_update(self.virtual_size)
            if self.scroll_y > self.max_scroll_y:
                self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
            layout = False
        super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        return self

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cells_drawn.clear()  # the theme changed: the cells' styles are stale
        self._header_drawn = None
        self._styles_made.clear()
        self._styles_applied.clear()

    def on_resize(self) -> None:
        # The file column takes what the others leave. DataTable widens a column to its widest
        # cell and never narrows it (`Column.content_width`): its width goes back to its label's
        # and the rows are added anew, measured at the new width (a table made narrower kept
        # the file column as wide as before, CPU, RSS and time pushed off the screen).
        # Only where it got narrower (or on its first size): a height's change (a pane shown
        # or hidden) fills nothing anew.
        width, before = self.size.width, self._width_seen
        self._width_seen = width
        file_column = self.columns.get(ColumnKey("file"))
        narrower = before is None or width < before
        if narrower and file_column is not None and self._filled is not None:
            file_column.content_width = cell_len(file_column.label.plain)
            self._filled = None
        self._fill()

    def selected_key(self) -> str | None:
        """The highlighted row's key (a PID's digits for a live process)."""
        if self.row_count == 0:
            return None
        key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return key.value

    def selected_pid(self) -> int | None:
        """The PID of the highlighted process; None for a finished job or an empty table."""
        key = self.selected_key()
        return int(key) if key is not None and key.isdigit() else None

    def sort_by(self, key: str, descending: bool | None = None) -> None:
        """Sort by a column; numbers largest first and words A to Z unless told otherwise."""
        self.sort_key = key
        self.descending = key in _NUMERIC if descending is None else descending
        self._fill()

    def action_next_sort(self) -> None:
        keys = [key for _, key in COLUMNS]
        self.sort_by(keys[(keys.index(self.sort_key) + 1) % len(keys)])

    def action_reverse_sort(self) -> None:
        self.sort_by(self.sort_key, not self.descending)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = event.column_key.value or "cpu"
        if key == self.sort_key:
            self.action_reverse_sort()
        else:
            self.sort_by(key)

    @property
    def sort_label(self) -> str:
        """The sorted column and its direction: "CPU % ↓"."""
        label = dict((key, label) for label, key in COLUMNS)[self.sort_key]
        return f"{label} {'↓' if self.descending else '↑'}"
