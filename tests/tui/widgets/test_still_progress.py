"""The build screen's progress bar wakes nothing while nothing changes: no animation while its
total is unknown, and no 1 s ETA timer where it shows no ETA (issue 23: no timer may wake the
TUI with nothing to do)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.clock import Clock

from workbench.tui.widgets.still_progress import StillProgressBar


class Bars(App[None]):
    def compose(self) -> ComposeResult:
        yield StillProgressBar(total=None, show_eta=False, id="no-eta")
        yield StillProgressBar(total=None, show_eta=True, id="eta")


def _running_timers(bar: StillProgressBar) -> int:
    return sum(1 for timer in bar._timers if timer._active.is_set())


async def test_a_bar_without_an_eta_has_no_running_timer() -> None:
    app = Bars()
    async with app.run_test(size=(80, 6)) as pilot:
        await pilot.pause()
        without, with_eta = app.query_one("#no-eta", StillProgressBar), app.query_one("#eta")
        assert isinstance(with_eta, StillProgressBar)
        assert _running_timers(with_eta) == 1  # ProgressBar's own ETA timer, as Textual runs it
        assert _running_timers(without) == 0
        without.update(total=10, progress=5)  # it still shows what it is given
        await pilot.pause()
        assert without.percentage == 0.5 and _running_timers(without) == 0


class StepBar(App[None]):
    """A bar whose clock moves a second each time it is read (Textual's Clock, its time
    callable given: a poll a second, whatever the machine's load)."""

    def compose(self) -> ComposeResult:
        seconds = iter(range(10**6))
        clock = Clock(get_time=lambda: float(next(seconds)))
        yield StillProgressBar(total=None, show_eta=False, clock=clock, id="bar")


async def test_an_update_to_what_the_bar_shows_draws_nothing() -> None:
    """A build screen's poll where no step ended gives the bar what it shows: ProgressBar works
    out its ETA again from the time that passed, and a new ETA (shown nowhere here) redrew it
    each second."""
    app = StepBar()
    async with app.run_test(size=(80, 6)) as pilot:
        bar = app.query_one("#bar", StillProgressBar)
        for progress in (100, 200, 250):
            bar.update(total=1000, progress=progress)
        await pilot.pause()
        refreshed: list[object] = []
        original = bar.refresh

        def counted(*args: object, **kwargs: object) -> object:
            refreshed.append(args)
            return original(*args, **kwargs)  # type: ignore[arg-type]

        bar.refresh = counted  # type: ignore[method-assign]
        for _ in range(3):
            bar.update(total=1000, progress=250)
        await pilot.pause()
        assert refreshed == []
        bar.update(total=1000, progress=300)
        await pilot.pause()
        assert bar.percentage == 0.3
