"""The debug screen at 80×24 keeps its footer and its keys in view, whatever the capture shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from workbench.debugging.model import capture_from_json
from workbench.tui.app import make_app
from workbench.tui.debug_screen import DebugScreen

RECORDED = Path(__file__).resolve().parent.parent / "debugging" / "recorded"
CAPTURES = sorted(path.name for path in RECORDED.glob("*.json"))
PANES = ("#debug-error", "#debug-diagnosis", "#debug-threads", "#debug-frames", "#debug-source")


@pytest.mark.parametrize("size", [(80, 24), (80, 18)])
@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("failed", [False, True], ids=["", "with-error"])
async def test_the_footer_and_its_keys_stay_in_view(
    config_copy: Path, tmp_path: Path, name: str, failed: bool, size: tuple[int, int]
) -> None:
    captured = capture_from_json(json.loads((RECORDED / name).read_text()))
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        screen = DebugScreen(capture=captured, source_roots=[RECORDED.parent])
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        if failed:  # a re-sample that failed: its error above the capture it keeps
            screen._set_error(
                "Capture failed: no process 4242 (it has exited, or the PID is wrong) "
                "(the capture below is the previous one)"
            )
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        footer = screen.query_one(Footer)
        width, height = size
        assert footer.region.y == height - 1 and footer.region.height == 1
        keys = [key for key in footer.query(FooterKey) if key.region.width]
        shown = {key.description for key in keys if key.region.x < width}
        assert {"Pane", "Earlier", "Later", "Back"} <= shown
        for pane in PANES:
            region = screen.query_one(pane).region
            assert region.bottom <= footer.region.y, f"{pane} reaches into the footer: {region}"
        frames = screen.query_one("#debug-frames").region
        assert frames.height >= 3  # its title, its header and at least one frame
