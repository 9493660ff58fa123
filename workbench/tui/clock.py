"""The time the screens measure "ago" and "so far" against: the app's clock.

`make_app(clock=...)` freezes it for snapshots and screenshots, so a history with fixed times
looks the same on every run; otherwise it is the real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.app import App

Clock = Callable[[], float]


def now(app: App[object]) -> float:
    """The app's clock, else the real time."""
    clock = getattr(app, "clock", None)
    return clock() if callable(clock) else time.time()
