"""In the history, Home and End move the highlight to the first and last build, and a build
that arrives while the screen is open leaves the highlight on the build it was on, so Enter
opens that build."""

from __future__ import annotations

from pathlib import Path

from driving import start, wait_until
from textual.widgets import DataTable

from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.screens.history.history_screen import HistoryScreen


async def test_home_end_and_a_new_build_keep_the_highlight_true(tui, bench, tmp_path) -> None:
    ids = []
    for n in range(3):  # one after another: a build of this tree still running refuses the next
        ids.append(start(bench, "--name", f"quick{n}", "--", "true", cwd=tmp_path))
        bench.wait_ended(ids[-1], 60)
    app = tui()
    async with app.run_test(size=(120, 36)) as pilot:
        await app.workers.wait_for_complete()
        app.action_history()  # type: ignore[attr-defined]
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await wait_until(pilot, "the history", lambda: screen.loads >= 1, 20)
        table = screen.query_one("#history-table", DataTable)
        assert screen.highlighted_id() == ids[-1]  # newest first
        await pilot.press("end")
        assert screen.highlighted_id() == ids[0]
        await pilot.press("home")
        assert screen.highlighted_id() == ids[-1]
        await pilot.press("down")
        assert screen.highlighted_id() == ids[1]
        loads = screen.loads
        # A new build arrives, running (it sleeps): the screen reloads while it runs.
        newcomer = start(bench, "--name", "newcomer", "--", "sleep", "30", cwd=Path(tmp_path))
        screen.load()
        await wait_until(pilot, "the new build listed", lambda: table.row_count == 4, 20)
        assert screen.loads > loads
        assert screen.highlighted_id() == ids[1], "the highlight moved with the new row"
        await pilot.press("enter")
        await wait_until(pilot, "the build screen", lambda: isinstance(app.screen, BuildScreen))
        assert app.screen.build_id == ids[1]
        bench.run("stop", str(newcomer), timeout=60)
