"""Handing a build to its supervisor from a screen's worker thread, then showing it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from textual.screen import Screen

    from workbench.supervision.control import Started


def hand_over(screen: Screen, start: Callable[[], Started]) -> None:
    """Call `start` (in a worker thread: it forks a supervisor), then, on the event loop, say
    why it could not start or its warnings, and open the build screen."""
    app = screen.app
    try:
        started = start()
    except WorkbenchError as exc:
        app.call_from_thread(screen.notify, str(exc), severity="error", timeout=12)
        return
    for warning in started.warnings:
        app.call_from_thread(screen.notify, warning, severity="warning", timeout=10)
    app.call_from_thread(app.open_build, started.record.id)  # type: ignore[attr-defined]
