"""The build screen's compositor draws, for a partial update, only the rows the update covers
(issue 23 item 2): the same chops as Textual's compositor for any set of changed regions, and
none of the screen's other rows drawn."""

from __future__ import annotations

import random
from functools import partial
from typing import Any

from textual._compositor import Compositor
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Header, Static

from workbench.tui.cropped_compositor import CroppedCompositor


class Panes(Screen[None]):
    CSS = """
    #head { height: auto; background: $panel; }
    #graphs { height: 6; }
    #graphs Static { width: 1fr; background: $boost; }
    #table { height: 8; border-top: solid $primary; }
    #log { height: 1fr; border-top: solid $primary; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._compositor = CroppedCompositor()

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="head"):
            yield Static("#1 quiet · running · 12s · run: ninja -j16", id="title")
            yield Static("running: a.cc, b.cc (+3)", id="detail")
        with Horizontal(id="graphs"):
            for name in ("cpu", "memory", "edges"):
                yield Static("\n".join(f"{name} row {n} ▁▂▃▄" for n in range(6)), id=name)
        with Vertical(id="panes"):
            yield DataTable(id="table")
            yield Static(
                "\n".join(f"[{n}/40] Building CXX object u{n}.o" for n in range(30)), id="log"
            )
        yield Footer()


class Screens(App[None]):
    def on_mount(self) -> None:
        self.push_screen(Panes())


def _cells(chops: Any, y: int) -> list[tuple[int, list[tuple[str, Any]]]]:
    return [
        (x, [(ch, style) for text, style, _ in strip for ch in text])
        for x, strip in chops[y].items()
        if strip is not None
    ]


async def test_the_chops_are_textuals_for_any_changed_regions() -> None:
    app = Screens()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        table = screen.query_one(DataTable)
        table.add_columns("PID", "file", "time")
        for n in range(12):
            table.add_row(str(1000 + n), f"src/u{n}.cc", f"{n}.0s")
        await pilot.pause()
        compositor = screen._compositor
        assert isinstance(compositor, CroppedCompositor)
        rng = random.Random(23)
        for _ in range(60):
            regions = [
                Region(
                    rng.randrange(100), rng.randrange(40), rng.randint(1, 100), rng.randint(1, 8)
                )
                for _ in range(rng.randint(1, 3))
            ]
            crop = Region.from_union(regions).intersection(Region(0, 0, 100, 40))
            rows = {y for region in regions for y in range(region.y, min(40, region.bottom))}
            ours = compositor._render_chops(crop, rows.__contains__)
            compositor._get_renders = partial(Compositor._get_renders, compositor)  # type: ignore[method-assign]
            try:
                theirs = compositor._render_chops(crop, rows.__contains__)
            finally:
                del compositor._get_renders
            for y in rows:
                assert _cells(ours, y) == _cells(theirs, y), (regions, y)


async def test_a_one_line_change_draws_only_the_widgets_on_that_line() -> None:
    app = Screens()
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        drawn: list[str] = []
        original = Widget.render_lines

        def counted(self: Widget, crop: Region) -> Any:
            drawn.append(f"{type(self).__name__}#{self.id}:{crop.height}")
            return original(self, crop)

        Widget.render_lines = counted  # type: ignore[method-assign]
        try:
            screen.query_one("#title", Static).update("#1 quiet · running · 13s · run: ninja -j16")
            await pilot.pause()
        finally:
            Widget.render_lines = original  # type: ignore[method-assign]
        # The title's row: the screen, the head and the title, one row each (Textual's own
        # compositor drew the header, the footer, the graphs' and panes' containers and the
        # screen, every row of each).
        assert sorted(drawn) == ["Panes#None:1", "Static#title:1", "Vertical#head:1"], drawn
