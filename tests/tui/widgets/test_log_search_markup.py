"""A search typed into the build screen's log is text: the log's border title quotes it. Before,
the title was markup, and searching for `[/` (a closing tag matching nothing) crashed the TUI
with a MarkupError; `[@click=app.quit]` would have become an action."""

from __future__ import annotations

from pathlib import Path

from tui.driving import open_screen, start, wait_until

from workbench.tui.widgets.log_view import LogView


async def test_searching_for_markup_shows_it_as_typed(tui, bench, tmp_path: Path) -> None:
    build_id = start(bench, "--name", "says", "--", "sh", "-c", "echo 'a [/ b'", cwd=tmp_path)
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        log = screen.query_one(LogView)
        await wait_until(pilot, "the log", lambda: log.line_count > 0, 20)
        for typed, expected in (("[/", "at line 1"), ("[@click=app.quit]x[/]", "not found")):
            await pilot.press("slash", *typed, "enter")
            await app.workers.wait_for_complete()
            await wait_until(pilot, "the search's answer", lambda e=expected: e in title(log), 10)
            assert f"'{typed}'" in title(log)  # drawn as typed
            assert app.is_running


def title(log: LogView) -> str:
    """The border title as drawn: the Content Textual keeps (its getter gives console markup)."""
    drawn = log._border_title
    return drawn.plain if drawn is not None else ""
