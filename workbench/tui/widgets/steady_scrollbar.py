"""A scrollbar drawn again only when what it shows changes.

Textual's ScrollBar (textual/scrollbar.py, 8.2.8) draws itself again, whole, whenever its
window's size, its virtual size or its position is set, even where the thumb stays on the same
cells: the build screen's log view, following a growing log, sets them every second, and its
bar of a pane's height was drawn again each time (Rich's layout for each row, then the
compositor) although a long log's thumb moves by a cell only now and then. Here a refresh that
would draw what the bar already shows (the same size, colours and thumb, to an eighth of a cell,
as `ScrollBarRender.render_bar` places it), looked at once the handler that set its values is
done, is skipped; any other refresh (a layout, a region) goes through.

Where only the thumb moved, only the rows whose cells change are drawn again: a bar is as tall
as its pane, and each row drawn costs the compositor a line (styles, filters, a new strip),
while a thumb that moves by a cell changes two rows (py-spy, a quiet -j16 build: the whole bar
drawn each second was a fifth of the TUI's frame time while the log was short).
"""

from __future__ import annotations

from math import ceil
from typing import Any

from rich.console import RenderableType
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender


class SteadyScrollBar(ScrollBar):
    """ScrollBar; a refresh that would not change its drawing draws nothing."""

    _shown: tuple[Any, ...] | None = None  # what the last drawing showed
    _looking = False  # a look at whether the drawing changed is due

    def _drawing(self) -> tuple[Any, ...] | None:
        """What the bar shows: its size, colours and thumb; None where not known (a renderer of
        another kind, no parent)."""
        parent = self.parent
        if self.renderer is not ScrollBarRender or parent is None:
            return None
        styles = parent.styles
        if self.grabbed:
            colours = (styles.scrollbar_background_active, styles.scrollbar_color_active)
        elif self.mouse_over:
            colours = (styles.scrollbar_background_hover, styles.scrollbar_color_hover)
        else:
            colours = (styles.scrollbar_background, styles.scrollbar_color)
        size = self.size.height if self.vertical else self.size.width
        virtual = ceil(self.window_virtual_size)
        window = ceil(self.window_size if self.window_size < self.window_virtual_size else 0)
        thumb = None
        if window and size and virtual and size != virtual:
            # ScrollBarRender.render_bar's placing of the thumb, in eighths of a cell.
            glyphs = (
                ScrollBarRender.VERTICAL_BARS if self.vertical else ScrollBarRender.HORIZONTAL_BARS
            )
            thumb_size = max(1, window / (virtual / size))
            position = (size - thumb_size) * (self.position / (virtual - window))
            start = int(position * len(glyphs))
            thumb = (start, start + ceil(thumb_size * len(glyphs)))
        return (
            self.size,
            self.thickness,
            colours,
            parent.background_colors[0],
            self.screen.styles.scrollbar_color.a == 0,
            thumb,
        )

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> SteadyScrollBar:
        if (
            self._shown is not None
            and not regions
            and repaint
            and not layout
            and not recompose
            and self.is_mounted
        ):
            # Looked at once what set it is done: its window's size is set before its position
            # (a longer log moves the thumb up for a moment, then following moves it back).
            if not self._looking:
                self._looking = True
                self.call_later(self._refresh_if_changed)
            return self
        super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        return self

    def _refresh_if_changed(self) -> None:
        self._looking = False
        drawing, shown = self._drawing(), self._shown
        if drawing == shown:
            return
        rows = changed_rows(shown, drawing) if self.vertical else None
        if rows is None:
            super().refresh()
        elif rows:
            width = self.size.width
            super().refresh(*(Region(0, y, width, 1) for y in rows))

    def render(self) -> RenderableType:
        self._shown = self._drawing()
        return super().render()


def _row(y: int, thumb: tuple[int, int]) -> tuple[bool, bool, int | None, int | None]:
    """What decides row `y` of a vertical bar whose thumb spans `thumb` (eighths of a cell), as
    `ScrollBarRender.render_bar` draws it: above the thumb's first row, above its end row, and
    the partial glyph where `y` is that first or end row."""
    start_index, start_bar = divmod(max(0, thumb[0]), 8)
    end_index, end_bar = divmod(max(0, thumb[1]), 8)
    return (
        y < start_index,
        y < end_index,
        start_bar if y == start_index else None,
        end_bar if y == end_index else None,
    )


def changed_rows(before: tuple[Any, ...] | None, after: tuple[Any, ...] | None) -> list[int] | None:
    """The rows of a vertical bar that differ between two drawings (`SteadyScrollBar._drawing`)
    that differ only in their thumbs; None where more than the thumb changed (draw it whole)."""
    if before is None or after is None or before[:-1] != after[:-1]:
        return None
    old, new = before[-1], after[-1]
    if old is None or new is None:
        return None
    height = before[0].height
    return [y for y in range(height) if _row(y, old) != _row(y, new)]
