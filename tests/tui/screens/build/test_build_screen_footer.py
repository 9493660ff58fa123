"""The build screen's footer at 80 and 160 columns (issue 14: "80×24 is a first-class size:
never a key the screen needs cut"), driven with Pilot over a real supervised build.

At 80 columns not every key fits: the build's own keys, History, Help and Quit stay; the
matrix (for fleets) and the process table's Sort (a header click sorts too) give way first,
through the screen's FOOTER_GIVES_WAY_FIRST. At 160 columns every key shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from textual.widgets._footer import FooterKey
from tui.driving import open_screen, screen_still, start, wait_until
from tui.fixed_history import frozen_clock, write_history

from workbench.tui.app import WorkbenchApp, make_app

SIZES = [(80, 24), (160, 48)]
# What the build screen is for, and the way to every other key and out: at any width.
RUNNING_BUILD_KEYS = {"stop_build", "debug", "all_processes", "leave", "switch_pane"}
ANY_BUILD_KEYS = {"leave", "switch_pane", "search", "first_error", "history", "help", "quit"}


def footer_actions(app: WorkbenchApp, width: int) -> list[str]:
    """The actions of the keys the footer shows, each key wholly on the terminal."""
    keys = list(app.screen.query(FooterKey))
    for key in keys:
        assert key.region.right <= width, f"{key.key_display} {key.description} is cut off"
    return [key.action for key in keys]


@pytest.mark.parametrize("size", SIZES)
async def test_a_running_builds_keys_stay_in_the_footer(
    tui, bench, tmp_path: Path, size: tuple[int, int]
) -> None:
    build_id = start(bench, "--name", "sleeper", "--", "sleep", "60", cwd=tmp_path)
    app = tui()
    async with app.run_test(size=size) as pilot:
        screen = await open_screen(app, pilot, build_id)
        await wait_until(pilot, "two polls of the running build", lambda: screen.polls > 1, 20)
        await pilot.pause()
        shown = footer_actions(app, size[0])
        assert set(shown) >= RUNNING_BUILD_KEYS | ANY_BUILD_KEYS, shown
        if size[0] >= 120:
            assert {"next_sort", "settings", "matrix"} <= set(shown), shown
        else:
            # The ones that gave way: the matrix first, then Sort, then Settings.
            assert not {"matrix", "next_sort", "settings"} & set(shown), shown
        kept = [action for action in shown if action != "command_palette"]
        assert kept[-2:] == ["quit", "help"]  # at the right, where they are looked for


@pytest.mark.parametrize("size", SIZES)
async def test_a_finished_builds_footer_keeps_settings_and_sort_at_80_columns(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    # The -j1 sample build of the fixed history (tests/tui/fixed_history.py): no Stop, Debug
    # or All for an ended build, so only the matrix gives way.
    state = tmp_path / "state"
    write_history(state)
    configs = Path(__file__).resolve().parents[4] / "configs"
    app = make_app(str(configs), str(state), doctor=recorded_doctor(), clock=frozen_clock)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("h")
        await wait_until(pilot, "the history", lambda: getattr(app.screen, "loads", 0) > 0)
        await pilot.press("down", "enter")
        await wait_until(pilot, "the build", lambda: getattr(app.screen, "polls", 0) > 0)
        await screen_still(pilot)  # the footer recomposes a refresh after the bindings change
        shown = set(footer_actions(app, size[0]))
        assert ANY_BUILD_KEYS | {"next_sort", "settings"} <= shown, shown
        assert not (RUNNING_BUILD_KEYS - {"leave", "switch_pane"}) & shown, shown
        assert ("matrix" in shown) == (size[0] >= 120), shown
