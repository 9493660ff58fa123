"""A newcomer's first minute: the sample project built from the variants screen, watched live."""

from __future__ import annotations

from driving import wait_until
from monitor.cxx_project import needs_cxx_tools

from workbench.history.store import History
from workbench.tui.screens.build.build_screen import BuildScreen


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


@needs_cxx_tools
async def test_a_second_t_offers_a_clean_rebuild_that_builds_everything(tui, bench) -> None:
    from workbench.tui.screens.variants.confirm_clean import ConfirmCleanRebuild

    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        for round_ in range(2):
            await pilot.press("t")
            if round_:
                await wait_until(
                    pilot, "the question", lambda: isinstance(app.screen, ConfirmCleanRebuild)
                )
                await pilot.press("y")
            await wait_until(
                pilot,
                f"build {round_ + 1} on the build screen",
                lambda r=round_: (
                    isinstance(app.screen, BuildScreen)
                    and app.screen.record is not None
                    and app.screen.record.id == r + 1
                ),
            )
            screen = app.screen
            await wait_until(
                pilot,
                "the build to end",
                lambda s=screen: not s.record.active,
                timeout=180,
            )
            assert screen.record.state == "succeeded", screen.record.note
            await pilot.press("escape")
            await pilot.pause()
    with History(bench.state) as history:
        first, second = sorted(history.builds(), key=lambda r: r.id)
    assert "--clean" in second.argv and "--clean" not in first.argv
    one, two = first.progress_view.step, second.progress_view.step
    assert one is not None and two is not None
    # Built again from clean: every edge ran, not "ninja: no work to do".
    assert two.total >= one.total - 2 and two.done == two.total > 0
