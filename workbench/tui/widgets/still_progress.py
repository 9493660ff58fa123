"""A progress bar that does not animate while the progress is unknown.

Textual's ProgressBar (textual/widgets/_progress_bar.py, 8.2.8) shows an unknown total as a
highlight sweeping across the bar, redrawn 15 times a second (`Bar.watch_percentage` sets
`auto_refresh = 1 / 15`). On the build screen that is a spinner: it says nothing the text
beside the bar does not ("building, step count not known yet"), and costs a frame every 67 ms,
bytes over SSH and CPU on the host being built on (issue 23). Here an unknown total is an empty
track, drawn once. ProgressBar also updates its ETA once a second (a timer calling `update()`
with nothing to change), which redrew the bar in a frame of its own although this bar shows no
ETA: here that call changes nothing and draws nothing, and without an ETA shown its timer is
made paused (it woke the app each second for nothing).
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from textual.app import ComposeResult
from textual.timer import Timer
from textual.widgets import ProgressBar
from textual.widgets._progress_bar import Bar


class StillBar(Bar):
    """Bar: an unknown percentage is an empty track, with no animation timer."""

    def watch_percentage(self, percentage: float | None) -> None:
        self.auto_refresh = None

    def render_indeterminate(self) -> Any:
        style = self.get_component_rich_style("bar--bar")  # as a determinate bar at 0
        return self.bar_renderable(
            highlight_range=(0, 0),
            highlight_style=Style.from_color(style.color),
            background_style=Style.from_color(style.bgcolor),
        )


class StillProgressBar(ProgressBar):
    """ProgressBar whose bar is a `StillBar`, with no ETA ticking."""

    def set_interval(
        self,
        interval: float,
        callback: Any = None,
        *,
        name: str | None = None,
        repeat: int = 0,
        pause: bool = False,
    ) -> Timer:
        """`Widget.set_interval`; ProgressBar's 1 s timer for its ETA (`update`) is made paused
        where no ETA is shown: nothing wakes each second to do nothing."""
        if callback == self.update and not self.show_eta:
            pause = True
        return super().set_interval(interval, callback, name=name, repeat=repeat, pause=pause)

    def update(self, **changes: Any) -> None:
        """`ProgressBar.update`; a call with nothing to change (its own 1 s ETA timer, or the
        total and progress it already has: a build screen's poll where no step ended) does
        nothing (ProgressBar's works out its ETA again, and a changed ETA redraws the bar)."""
        if not changes:
            return
        if "advance" not in changes and all(
            value == getattr(self, name) for name, value in changes.items()
        ):
            return
        super().update(**changes)

    def compose(self) -> ComposeResult:
        for child in super().compose():
            if type(child) is Bar:
                child = StillBar(id="bar", clock=self._clock, bar_renderable=self.BAR_RENDERABLE)
                child.data_bind(ProgressBar.percentage)
                if hasattr(ProgressBar, "gradient"):
                    child.data_bind(ProgressBar.gradient)
            yield child
