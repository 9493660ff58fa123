"""The log view's scrollbar draws again only when what it shows changes (issue 23: a following
log view set its bar's sizes every second and the whole bar was drawn again each time), and
what it shows is always what a fresh drawing shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driving import wait_until
from textual.app import App, ComposeResult
from textual.geometry import Region

from workbench.tui.widgets.log_view import LogView
from workbench.tui.widgets.steady_scrollbar import SteadyScrollBar


class LogApp(App[None]):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        yield LogView(self.path, id="log", driven=True)

    def on_mount(self) -> None:
        self.query_one(LogView).focus()


def _shown(bar: SteadyScrollBar) -> list[list[Any]]:
    return [list(strip) for strip in bar.render_lines(Region(0, 0, *bar.size))]


async def test_the_bar_draws_again_only_when_its_thumb_moves(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(2000)))
    app = LogApp(path)
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await wait_until(pilot, "the bar shown", lambda: log.show_vertical_scrollbar, 20)
        await wait_until(pilot, "the end shown", lambda: log.scroll_y == log.max_scroll_y, 20)
        await pilot.pause()
        bar = log.vertical_scrollbar
        assert isinstance(bar, SteadyScrollBar)
        drawn = 0
        render = bar.render

        def counted() -> Any:
            nonlocal drawn
            drawn += 1
            return render()

        bar.render = counted  # type: ignore[method-assign]

        async def shown_fresh(what: str) -> None:
            """The bar on screen is what a fresh drawing of it shows."""
            nonlocal drawn
            shown = _shown(bar)
            before = drawn
            bar._shown = None
            bar.refresh()
            await wait_until(pilot, "the bar drawn afresh", lambda: bar._shown is not None, 20)
            drawn = before  # the test's own drawing is not counted
            assert _shown(bar) == shown, f"{what}: the bar on screen is stale"

        # Each poll moves the view (following) and sets the bar's sizes and position; the
        # thumb of a 2,000-line log in 19 rows stays one cell at the bottom: after the first
        # poll (the bar learns the position the view scrolled to before it was shown), nothing
        # is drawn.
        for poll, lines in enumerate((10, 10, 10, 500, 10, 3000)):
            with path.open("a") as handle:
                handle.write("".join(f"more {n}\n" for n in range(lines)))
            log.take_in_new_lines(now=True)
            await pilot.pause()
            await pilot.pause()
            await shown_fresh(f"poll {poll}")
            if poll == 0:
                drawn = 0
        assert drawn == 0, drawn
        # The view goes to the top: the thumb moves, and is drawn there.
        log.action_scroll_home()
        await wait_until(pilot, "the thumb drawn at the top", lambda: drawn >= 1, 20)
        await shown_fresh("at the top")
