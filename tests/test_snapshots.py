"""How the screens look, at 80×24 and 160×48, on a recorded host (pytest-textual-snapshot).

Update after an intended change with `scripts/test.sh tests/test_snapshots.py --snapshot-update`
and look at the SVGs in tests/__snapshots__/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recorded_host import recorded_doctor

from workbench.debugging.model import capture_from_json
from workbench.tui.app import make_app
from workbench.tui.debug_screen import DebugScreen

REPO = Path(__file__).resolve().parent.parent
RECORDED = REPO / "tests" / "debugging" / "recorded"
SIZES = [(80, 24), (160, 48)]


def app_for(tmp_path: Path):
    return make_app(str(REPO / "configs"), str(tmp_path / "state"), doctor=recorded_doctor())


async def settled(pilot) -> None:
    """The first screen has shown the recorded host, and every worker and animation is done."""
    app = pilot.app
    for _ in range(200):
        if app.report is not None:
            break
        await pilot.pause(0.05)
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_variants_screen(snap_compare, tmp_path: Path, size) -> None:
    assert snap_compare(app_for(tmp_path), terminal_size=size, run_before=settled)


@pytest.mark.parametrize("size", SIZES)
def test_settings_screen(snap_compare, tmp_path: Path, size) -> None:
    async def open_settings(pilot) -> None:
        await settled(pilot)
        await pilot.press("s")
        await settled(pilot)

    assert snap_compare(app_for(tmp_path), terminal_size=size, run_before=open_settings)


@pytest.mark.parametrize("size", SIZES)
def test_debug_screen(snap_compare, tmp_path: Path, size) -> None:
    captured = capture_from_json(json.loads((RECORDED / "bridge_o2.json").read_text()))

    async def open_debug(pilot) -> None:
        await settled(pilot)
        await pilot.app.push_screen(DebugScreen(capture=captured, source_roots=[RECORDED.parent]))
        await settled(pilot)

    assert snap_compare(app_for(tmp_path), terminal_size=size, run_before=open_debug)
