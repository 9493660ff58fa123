"""Regenerate the SVG screenshots in screenshots/ from the real app on a recorded host.

Run: python screenshots/regenerate.py   (writes screenshots/*.svg; look at them afterwards)
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from recorded_host import recorded_doctor  # noqa: E402

from workbench.debugging.model import capture_from_json  # noqa: E402
from workbench.tui.app import make_app  # noqa: E402
from workbench.tui.debug_screen import DebugScreen  # noqa: E402

RECORDED = REPO / "tests" / "debugging" / "recorded"

SIZES = ((80, 24), (160, 48))


# screen name -> keys that reach it from the first screen
SCREENS: dict[str, tuple[str, ...]] = {"variants": (), "settings": ("s",)}


async def capture(name: str, size: tuple[int, int], state: Path) -> Path:
    app = make_app(str(REPO / "configs"), str(state), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press(*SCREENS[name])
        await pilot.pause()
        path = HERE / f"{name}-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title=f"workbench: {name}"))
    return path


async def capture_debug(size: tuple[int, int], state: Path) -> Path:
    """The debug screen on the recorded -O2 bridge loop, with the fixture's source."""
    captured = capture_from_json(json.loads((RECORDED / "bridge_o2.json").read_text()))
    app = make_app(str(REPO / "configs"), str(state), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await app.push_screen(DebugScreen(capture=captured, source_roots=[RECORDED.parent]))
        await app.workers.wait_for_complete()
        await pilot.pause()
        path = HERE / f"debug-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title="workbench: debug"))
    return path


async def main() -> None:
    with tempfile.TemporaryDirectory() as state:
        for name in SCREENS:
            for size in SIZES:
                print(await capture(name, size, Path(state)))
        for size in SIZES:
            print(await capture_debug(size, Path(state)))


if __name__ == "__main__":
    asyncio.run(main())
