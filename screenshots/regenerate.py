"""Regenerate the SVG screenshots in screenshots/ from the real app on a recorded host.

Run: python screenshots/regenerate.py   (writes screenshots/*.svg; look at them afterwards)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
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
SCREENS: dict[str, tuple[str, ...]] = {
    "variants": (),
    "settings": ("s",),
    "history": ("h",),
    "build": ("h", "enter"),
    "report": ("h", "r"),
    "compare": ("h", "space", "down", "space", "c"),
}
# A fixed place for the screenshots' real builds, so their command lines read the same each time.
STATE = Path(tempfile.gettempdir()) / "workbench-screenshots"


async def prepare_builds(state: Path) -> None:
    """Two real builds of the sample project (-j2, then -j1 from clean) through the CLI."""
    from monitor.cxx_project import configure, write_project

    def build_twice() -> None:
        checkout = state / "sample-checkout"
        source, build = checkout / "src", checkout / "build"
        write_project(source)
        (checkout / ".git").mkdir(parents=True, exist_ok=True)
        configure(source, build, "Ninja", build_type="")
        for jobs in ("-j2", "-j1"):
            subprocess.run(
                ["ninja", "-C", str(build), "-t", "clean"], check=True, capture_output=True
            )
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "workbench",
                    "--state-dir",
                    str(state),
                    "run",
                    "--name",
                    "sample-project",
                    "--",
                    "ninja",
                    jobs,
                    "-C",
                    str(build),
                ],
                cwd=checkout,
                capture_output=True,
                text=True,
                check=True,
            )

    await asyncio.to_thread(build_twice)


async def capture(name: str, size: tuple[int, int], state: Path) -> Path:
    app = make_app(str(REPO / "configs"), str(state), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        for key in SCREENS[name]:
            await pilot.press(key)
            await app.workers.wait_for_complete()
            await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
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
    shutil.rmtree(STATE, ignore_errors=True)
    await prepare_builds(STATE)
    for state in (str(STATE),):
        for name in SCREENS:
            for size in SIZES:
                print(await capture(name, size, Path(state)))
        for size in SIZES:
            print(await capture_debug(size, Path(state)))


if __name__ == "__main__":
    asyncio.run(main())
