"""A compositor that draws, for a partial update, only the rows that update covers.

Textual's compositor (textual/_compositor.py, `_get_renders`, 8.2.8) asks every widget whose
clip overlaps the update for its whole visible region, and `_render_chops` then keeps the
rows that changed. The clip of a widget placed on the screen is the whole screen: each frame,
however small, had the screen, the header, the footer and every container at the top level draw
all their rows (on the build screen 48 + 34 + 8 + ... lines, from their caches, each line
through its filters) to keep one: the title's clock, a one-line change each second, cost a
tenth of a full frame (issue 23 item 2).

Here a partial update asks each widget only for the rows of its visible region that lie in the
update (the same columns: chops are cut at widget edges), in Textual's order, and skips the
widgets with none; a full update is Textual's own.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip


class CroppedCompositor(Compositor):
    """Compositor whose partial updates draw only the rows they cover."""

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        if crop is None:
            yield from super()._get_renders(crop)
            return
        top, bottom = crop.y, crop.bottom
        intersection = Region.intersection
        for widget, (region, clip) in self.visible_widgets.items():
            shown = intersection(region, clip)
            first, last = max(shown.y, top), min(shown.bottom, bottom)
            if not shown.width or last <= first:
                continue
            rows = Region(shown.x, first, shown.width, last - first)
            yield (
                region,
                rows,
                widget.render_lines(
                    Region(rows.x - region.x, rows.y - region.y, rows.width, rows.height)
                ),
            )
