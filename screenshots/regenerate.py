"""Regenerate the SVG screenshots in screenshots/ from the real app on a recorded host.

Two real builds of the bundled sample project are run first (through the CLI, as a user would),
then each screen is reached with the keys a user presses and captured once it has settled: its
workers done and its last frame, footer keys included, drawn.

Run: python screenshots/regenerate.py   (writes screenshots/*.svg; look at them afterwards)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from recorded_host import recorded_daemon, recorded_doctor  # noqa: E402
from textual.pilot import Pilot  # noqa: E402

from workbench.configs.paths import USER_CONFIG_ENV  # noqa: E402
from workbench.debugging.model import capture_from_json  # noqa: E402
from workbench.tui.app import WorkbenchApp, make_app  # noqa: E402
from workbench.tui.screens.build.build_screen import BuildScreen  # noqa: E402
from workbench.tui.screens.debug.debug_screen import DebugScreen  # noqa: E402
from workbench.tui.screens.history.history_screen import HistoryScreen, ReportScreen  # noqa: E402

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
    "help": ("question_mark",),
}


@contextlib.contextmanager
def private_state() -> Iterator[Path]:
    """This run's own state directory: made private (0700) under $TMPDIR, with a per-user
    config directory inside it ($WORKBENCH_USER_CONFIG_DIR, for this process and the CLIs it
    starts), removed afterwards. Two runs at once, or the user's own builds and settings, never
    mix with it. (Its name has a fixed length, so paths in the screenshots keep their width.)"""
    state = Path(tempfile.mkdtemp(prefix="workbench-screenshots-"))
    saved = os.environ.get(USER_CONFIG_ENV)
    config = state / "user-config"
    config.mkdir(mode=0o700)
    os.environ[USER_CONFIG_ENV] = str(config)
    try:
        yield state
    finally:
        if saved is None:
            os.environ.pop(USER_CONFIG_ENV, None)
        else:
            os.environ[USER_CONFIG_ENV] = saved
        shutil.rmtree(state, ignore_errors=True)


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
            # `-C build`, relative to the checkout: the command reads as a user would type it.
            subprocess.run(
                [
                    *(sys.executable, "-m", "workbench", "--state-dir", str(state)),
                    *("run", "--name", "sample-project", "--", "ninja", jobs, "-C", "build"),
                ],
                cwd=checkout,
                capture_output=True,
                text=True,
                check=True,
            )

    await asyncio.to_thread(build_twice)


def ready(app: WorkbenchApp) -> bool:
    """The current screen shows what its workers read: the host, the builds, the report."""
    screen = app.screen
    if isinstance(screen, HistoryScreen):
        return screen.loads > 0
    if isinstance(screen, BuildScreen):
        return screen.polls > 0
    return app.report is not None


async def settle(app: WorkbenchApp, pilot: Pilot) -> None:
    """Until the screen has its data, every worker is done and its last frame is drawn (the
    footer shows its keys a refresh after the screen appears)."""
    for _ in range(400):
        if ready(app):
            break
        await pilot.pause(0.05)
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.3)
    await app.workers.wait_for_complete()
    await pilot.pause()


async def capture(name: str, size: tuple[int, int], state: Path) -> Path:
    # The recorded host's user is served by a nix-daemon that does not trust them (the first
    # screen's Nix line), as on a shared build host.
    doctor = recorded_doctor(nix_store=recorded_daemon())
    app = make_app(str(REPO / "configs"), str(state), doctor=doctor)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        for key in SCREENS[name]:
            await pilot.press(key)
            await settle(app, pilot)
        if name in ("report", "compare"):  # made in a worker, shown when ready
            for _ in range(400):
                if isinstance(app.screen, ReportScreen):
                    break
                await pilot.pause(0.05)
            await settle(app, pilot)
        from textual.widgets import Input

        for field in app.screen.query(Input):
            field.cursor_blink = False  # a focused field's cursor drawn steadily, not half-way
        await pilot.pause()
        path = HERE / f"{name}-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title=f"workbench: {name}"))
    return path


async def capture_debug(size: tuple[int, int], state: Path) -> Path:
    """The debug screen on the recorded -O2 bridge loop of four threads (the main one joining
    them: one verdict per thread), with the fixture's source."""
    captured = capture_from_json(json.loads((RECORDED / "bridge_o2_threads.json").read_text()))
    app = make_app(str(REPO / "configs"), str(state), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await app.push_screen(DebugScreen(capture=captured, source_roots=[RECORDED.parent]))
        await settle(app, pilot)
        path = HERE / f"debug-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title="workbench: debug"))
    return path


async def capture_patches(size: tuple[int, int], state: Path) -> Path:
    """The patches screen over the tests' fixture series (a copy of configs/ beside a patches/
    folder holding it), checked against the fixture's source tree, the failing patch shown."""
    from patch_fixture import write_fixture_series, write_fixture_source
    from textual.widgets import Input

    from workbench.tui.screens.patches.patches_screen import PatchesScreen

    root = state / "patches-fixture"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "configs", root / "configs")
    (root / "patches").mkdir()
    write_fixture_source(root / "source", units=14)
    write_fixture_series(root / "configs", root / "source", broken_enabled=True)
    app = make_app(str(root / "configs"), str(state), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = PatchesScreen(app.matrix, root / "configs", state, "cpu")
        await app.push_screen(screen)
        await settle(app, pilot)
        screen.query_one("#patches-source", Input).value = str(root / "source")
        await pilot.press("c")
        for _ in range(400):
            if screen.checks:
                break
            await pilot.pause(0.05)
        await pilot.press("down", "down")
        app.clear_notifications()
        await settle(app, pilot)
        path = HERE / f"patches-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title="workbench: patches"))
    return path


async def capture_matrix(size: tuple[int, int], state: Path) -> Path:
    """The matrix screen mid-build, on the matrix build recorded from real Nix over the tests'
    loopback build host (tests/tui/fixed_matrix.py: two hosts, one gone, a target failed)."""
    from tui.fixed_history import frozen_clock
    from tui.fixed_matrix import write_matrix_build

    from workbench.tui.screens.matrix.matrix_screen import MatrixScreen

    matrix_state = state / "matrix"
    shutil.rmtree(matrix_state, ignore_errors=True)
    write_matrix_build(matrix_state, running=True)
    app = make_app(
        str(REPO / "configs"), str(matrix_state), doctor=recorded_doctor(), clock=frozen_clock
    )
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await pilot.press("m")
        for _ in range(400):
            if isinstance(app.screen, MatrixScreen) and app.screen.refreshes:
                break
            await pilot.pause(0.05)
        await settle(app, pilot)
        path = HERE / f"matrix-{size[0]}x{size[1]}.svg"
        path.write_text(app.export_screenshot(title="workbench: matrix"))
    return path


async def main() -> None:
    with private_state() as state:
        await prepare_builds(state)
        for name in SCREENS:
            for size in SIZES:
                print(await capture(name, size, state))
        for size in SIZES:
            print(await capture_debug(size, state))
            print(await capture_patches(size, state))
            print(await capture_matrix(size, state))


if __name__ == "__main__":
    asyncio.run(main())
