"""The first screen's Nix line: which store serves the user, trusted or not, and what that means
for builders, in a line of its own where a nix-daemon serves them; nothing at all (no line, the
table as tall as before) where Nix is single-user. The daemon's line is `check_daemon`'s record,
as `doctor --json` gives it (tests/remote/test_daemon_reality.py asks a real daemon)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from needed_tools import needs
from nix_testing import NIX_CONFIG
from recorded_host import recorded_daemon, recorded_doctor
from textual.widgets import DataTable, Static
from tui.driving import wait_until

from workbench.host.nix_daemon import DaemonReality, check_daemon
from workbench.tui.app import make_app

SIZE = (80, 24)


async def _first_screen(config: Path, state: Path, nix_store: DaemonReality | None):
    """(the Nix line's text or None when not shown, the table's height, the cursor's row in
    view) once the recorded host is shown."""
    app = make_app(str(config), str(state), doctor=recorded_doctor(nix_store=nix_store))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        note = app.screen.query_one("#row-note", Static)
        await wait_until(pilot, "the recommended row", lambda: "★" in str(note.render()), 30)
        await app.workers.wait_for_complete()
        await pilot.pause()
        line = app.screen.query_one("#nix-store", Static)
        table = app.screen.query_one("#variants", DataTable)
        shown = str(line.render()) if line.display else None
        cursor = table.cursor_row
        in_view = table.scroll_y <= cursor < table.scroll_y + table.scrollable_content_region.height
        return shown, table.size.height, in_view


@pytest.mark.slow
@needs("nix", debian="nix-bin")
async def test_single_user_nix_shows_nothing_and_a_daemon_its_own_line(
    config_copy: Path, tmp_path: Path
) -> None:
    # Single-user Nix, asked for real: this user's Nix opens a store of its own.
    store = tmp_path / "store"
    single = check_daemon({**os.environ, "NIX_CONFIG": f"{NIX_CONFIG}\nstore = local?root={store}"})
    assert single.ping.ok and not single.via_daemon, single.ping
    assert single.status_line() is None
    none_said = await _first_screen(config_copy, tmp_path / "a", None)
    single_user = await _first_screen(config_copy, tmp_path / "b", single)
    assert single_user == none_said and single_user[0] is None
    # An untrusting daemon: its line, the table a line shorter, the recommended row in view.
    shown, height, in_view = await _first_screen(config_copy, tmp_path / "c", recorded_daemon())
    assert shown is not None and shown.startswith(
        "Nix  daemon: alice NOT trusted → --builders ignored, all builds here"
    ), shown
    assert "\n" not in shown
    assert height == none_said[1] - 1 and in_view
