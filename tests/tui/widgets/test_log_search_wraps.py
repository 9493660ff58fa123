"""Searching the build's log goes round like less: `n` after the last match finds the first one
again (and says it wrapped), `N` before the first finds the last; before, it said "not found"."""

from __future__ import annotations

from pathlib import Path

from tui.driving import open_screen, start, wait_until
from tui.widgets.test_log_search_markup import title

from workbench.tui.widgets.log_view import LogView


async def test_n_after_the_last_match_wraps_to_the_first(tui, bench, tmp_path: Path) -> None:
    script = "echo 'needle one'; echo hay; echo 'needle two'; echo hay"
    build_id = start(bench, "--name", "hay", "--", "sh", "-c", script, cwd=tmp_path)
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        log = screen.query_one(LogView)
        await wait_until(pilot, "the whole log", lambda: log.line_count >= 4, 20)

        async def answer(*keys: str) -> int | None:
            before = log.match_line
            await pilot.press(*keys)
            await app.workers.wait_for_complete()
            await wait_until(
                pilot,
                f"an answer to {keys}",
                lambda: log.match_line != before or "not found" in title(log),
                10,
            )
            return log.match_line

        assert await answer("slash", *"needle", "enter") == 0
        assert await answer("n") == 2
        assert await answer("n") == 0, title(log)
        assert "wrapped" in title(log) and "not found" not in title(log)
        assert await answer("N") == 2
        assert "wrapped" in title(log)
