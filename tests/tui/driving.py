"""Driving the app in the TUI tests: waiting (bounded) for what a worker brings, reading rows."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from supervision.supervised import Bench, build_id_from
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable

from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.widgets.log_view import LogView


async def wait_until(
    pilot: Pilot, what: str, predicate: Callable[[], object], timeout: float = 60.0
) -> None:
    """Let the app run until `predicate()` holds (bounded)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.1)


async def widths_hold(pilot: Pilot, table: DataTable, timeout: float = 20.0) -> None:
    """Let the app run until the table's column widths (and its size) are the same at four looks
    0.05 s apart (bounded): a worker may fill a column and the table widen it a refresh later."""
    deadline = time.monotonic() + timeout
    looks: list[tuple[object, ...]] = []
    while len(looks) < 4 or len(set(looks[-4:])) != 1:
        if time.monotonic() > deadline:
            raise AssertionError(f"the column widths kept changing for {timeout:.0f} s")
        await pilot.pause(0.05)
        widths = tuple(column.get_render_width(table) for column in table.columns.values())
        looks.append((table.virtual_size, widths))


async def open_screen(app: App, pilot: Pilot, build_id: int) -> BuildScreen:
    """The build screen of `build_id` (the app may have reattached to it by itself)."""
    await pilot.pause()
    screen = app.screen
    if not (isinstance(screen, BuildScreen) and screen.build_id == build_id):
        app.open_build(build_id)  # type: ignore[attr-defined]
    await wait_until(
        pilot,
        "the build screen to load",
        lambda: isinstance(app.screen, BuildScreen) and app.screen.record is not None,
        20,
    )
    assert isinstance(app.screen, BuildScreen)
    return app.screen


def visible_log(log: LogView) -> list[str]:
    """The log's rows as drawn now."""
    return [log.render_line(y).text.rstrip() for y in range(log.scrollable_content_region.height)]


def start(bench: Bench, *args: str, cwd: Path) -> int:
    """`workbench run -d ...` through the real CLI; the build's id."""
    result = bench.run("run", "-d", *args, cwd=cwd, timeout=60)
    assert result.returncode == 0, result.stderr
    return build_id_from(result.stderr)


def start_naps(
    bench: Bench, tmp_path: Path, edges: int, seconds: float, name: str, jobs: int | None
) -> int:
    """A real ninja build of `edges` edges that each sleep `seconds`, in `tmp_path`/work,
    started as `start` does with -j `jobs` (None: ninja's default); the build's id."""
    work = tmp_path / "work"
    work.mkdir()
    lines = "".join(f"build e{n}: nap\n" for n in range(edges))
    (work / "build.ninja").write_text(f"rule nap\n  command = sleep {seconds} && : > $out\n{lines}")
    parallel = [] if jobs is None else [f"-j{jobs}"]
    return start(bench, "--name", name, "--", "ninja", "-C", str(work), *parallel, cwd=work)


async def screen_still(pilot: Pilot) -> None:
    """The screen as drawn holds still: the same screenshot at four looks 0.1 s apart (bounded).

    A message posted late on a loaded machine (a worker's result, a size learnt on the first
    draw, a border title from a status message) redraws after `settled` has returned; the
    snapshot would catch whichever frame came first. CI once caught the build screen that way."""
    looks: list[str] = []
    for _ in range(100):
        await pilot.wait_for_scheduled_animations()
        looks.append(pilot.app.export_screenshot())
        if len(looks) >= 4 and len(set(looks[-4:])) == 1:
            return
        await pilot.pause(0.1)
    raise AssertionError("the screen kept changing for 10 s")
