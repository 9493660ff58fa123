"""A newcomer's first minute: the sample project built from the variants screen, watched live."""

from __future__ import annotations

from driving import wait_until
from monitor.cxx_project import needs_cxx_tools

from workbench.supervision.history import History
from workbench.tui.build_screen import BuildScreen


@needs_cxx_tools
async def test_sample_build_from_the_variants_screen_runs_to_the_end(tui, bench) -> None:
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("t")  # the bundled sample project, through the `run` backend
        await wait_until(pilot, "the build screen", lambda: isinstance(app.screen, BuildScreen))
        screen = app.screen
        assert isinstance(screen, BuildScreen)
        await wait_until(
            pilot,
            "the build to end",
            lambda: screen.record is not None and not screen.record.active,
            timeout=120,
        )
        assert screen.record.state == "succeeded", screen.record.note
        assert screen.record.name == "sample-project"
        progress = screen.record.progress
        assert progress.get("step", {}).get("done") == progress.get("step", {}).get("total")
    with History(bench.state) as history:
        (record,) = history.builds()
        assert record.argv[1:4] == ("-m", "workbench.samples.sample_project", "build")
