"""A build started from the command line gets the build screen's line about the rest of the host
(what its supervisor measured: other processes' CPU, other build processes) and `w` lists it;
before, that line and `w` came only with builds started from the TUI."""

from __future__ import annotations

from pathlib import Path

from driving import open_screen, start, wait_until
from textual.widgets import Static

from workbench.tui.screens.build.build_modals import NoticesScreen


async def test_a_cli_build_shows_the_hosts_other_load(tui, bench, tmp_path: Path) -> None:
    build_id = start(bench, "--name", "sleeper", "--", "sleep", "60", cwd=tmp_path)
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        notice = screen.query_one("#build-notice", Static)
        await wait_until(
            pilot,
            "the line about the rest of the host",
            lambda: "other processes use" in str(notice.render()),
            60,
        )
        assert notice.display
        assert str(notice.render()).startswith("w: details")
        await pilot.press("w")
        await wait_until(pilot, "the notices", lambda: isinstance(app.screen, NoticesScreen))
        assert any("other processes use" in line for line in app.screen.notices)
        await pilot.press("escape")
    bench.run("stop", str(build_id), timeout=60)
