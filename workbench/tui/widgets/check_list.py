"""A SelectionList whose checked and unchecked rows differ without colour.

Textual's SelectionList (textual/widgets/_selection_list.py, 8.2.8) draws the same "▐X▌" on
every row and tells checked from unchecked by colour alone: on a monochrome terminal, or to a
colour-blind user, every architecture looked picked. Here a checked row's box holds "✓" and an
unchecked one's a blank.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from textual.strip import Strip
from textual.widgets import SelectionList
from textual.widgets.option_list import OptionDoesNotExist

CHECKED = "✓"
UNCHECKED = " "


class CheckList(SelectionList[Any]):
    """SelectionList with "▐✓▌" for a checked row and "▐ ▌" for an unchecked one."""

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        segments = list(line)
        try:
            selection = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return line
        if len(segments) < 2:
            return line
        mark = CHECKED if selection.value in self._selected else UNCHECKED
        inner = segments[1]
        segments[1] = Segment(mark, inner.style, inner.control)
        return Strip(segments, line.cell_length)
