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


async def _following_at_the_end(app: LogApp, pilot: Any) -> tuple[LogView, SteadyScrollBar]:
    """The log view once its file is read, its bar shown and its end in view, and that bar."""
    log = app.query_one(LogView)
    await app.workers.wait_for_complete()
    await wait_until(pilot, "the bar shown", lambda: log.show_vertical_scrollbar, 20)
    await wait_until(pilot, "the end shown", lambda: log.scroll_y == log.max_scroll_y, 20)
    bar = log.vertical_scrollbar
    assert isinstance(bar, SteadyScrollBar)
    return log, bar


async def test_the_bar_draws_again_only_when_its_thumb_moves(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(2000)))
    app = LogApp(path)
    async with app.run_test(size=(80, 20)) as pilot:
        log, bar = await _following_at_the_end(app, pilot)
        await pilot.pause()
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


async def test_a_moved_thumb_draws_only_the_rows_it_changes(tmp_path: Path) -> None:
    """A short log that grows a line at a time moves its thumb each poll: only the rows whose
    cells change are drawn again, not the whole bar, and the bar on screen is always what a
    fresh drawing shows."""
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(40)))
    app = LogApp(path)
    async with app.run_test(size=(80, 20)) as pilot:
        log, bar = await _following_at_the_end(app, pilot)
        rows: list[int] = []
        render_line = bar.render_line

        def counted(y: int) -> Any:
            rows.append(y)
            return render_line(y)

        bar.render_line = counted  # type: ignore[method-assign]
        moved = 0
        for poll in range(14):
            before = bar._shown
            with path.open("a") as handle:
                handle.write(f"more {poll}\n")
            log.take_in_new_lines(now=True)
            await pilot.pause()
            await wait_until(pilot, "the bar's look", lambda: not bar._looking, 20)
            await pilot.pause()
            await pilot.pause()
            after = bar._shown
            # The first polls may meet the bar's styles being applied (a whole drawing).
            if poll >= 2 and before is not None and after is not None:
                if before[-1] != after[-1]:
                    moved += 1
                    assert 0 < len(set(rows)) <= 3, (poll, sorted(set(rows)))
                else:
                    assert rows == [], (poll, rows)
            rows.clear()
            assert _shown(bar) == _fresh(bar), f"poll {poll}: the bar on screen is stale"
            rows.clear()
        # 40 lines in 20 rows, a line a poll: the thumb moves on every poll.
        assert moved >= 8, moved


def _fresh(bar: SteadyScrollBar) -> list[list[Any]]:
    """The bar's rows drawn whole, as Textual's ScrollBar draws them (the screen's copy is
    marked dirty whole, so the next frame draws it whole again: the test's own look)."""
    saved = bar._shown
    bar._shown = None
    bar.refresh()
    lines = _shown(bar)
    bar._shown = saved
    return lines


async def test_the_bar_learns_where_the_view_scrolled_before_it_was_shown(tmp_path: Path) -> None:
    """A log that outgrows its view is scrolled to its end (following) before the layout shows
    the bar: the bar, once shown, has the view's position (its thumb at the bottom), without
    waiting for another scroll."""
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(5)))
    app = LogApp(path)
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await wait_until(pilot, "the lines shown", lambda: log.line_count == 5, 20)
        await pilot.pause()
        assert not log.show_vertical_scrollbar
        with path.open("a") as handle:
            handle.write("".join(f"more {n}\n" for n in range(200)))
        log.take_in_new_lines(now=True)
        await wait_until(pilot, "the bar shown", lambda: log.show_vertical_scrollbar, 20)
        await wait_until(pilot, "the end shown", lambda: log.scroll_y == log.max_scroll_y, 20)
        await pilot.pause()
        await pilot.pause()
        bar = log.vertical_scrollbar
        assert bar.position == log.scroll_y > 0, (bar.position, log.scroll_y)
        drawing = bar._drawing() if isinstance(bar, SteadyScrollBar) else None
        assert drawing is not None and drawing[-1] is not None
        start, end = drawing[-1]
        assert end >= 8 * (bar.size.height - 1), ("the thumb is not at the bottom", start, end)
