"""What the TUI keeps for its user between runs: the theme, remapped keys (both in the per-user
settings file, workbench.configs.user_settings) and screenshots (under the state directory,
named after the screen and the time, instead of Textual's ~/Downloads, which a headless host
lacks)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.app import App

from workbench.atomic_file import replace_file
from workbench.configs.user_settings import (
    get_own,
    key_bindings,
    refresh_seconds,
    write_user_settings,
)


def apply_saved(app: App[Any], saved_theme: str | None = None) -> None:
    """The user's saved theme (when Textual knows it), key bindings and the build screen's
    refresh (`refresh`, seconds between redraws of its panes), onto `app`."""
    theme = saved_theme if saved_theme is not None else get_own("theme")
    if isinstance(theme, str) and theme in app.available_themes:
        app.theme = theme
    keys = key_bindings()
    if keys:
        app.set_keymap(keys)
    if hasattr(app, "panes_refresh_s"):
        app.panes_refresh_s = refresh_seconds()


def remember_theme(theme: str) -> None:
    """Save the chosen theme for the next run (nothing written when it is already saved)."""
    if get_own("theme") != theme:
        write_user_settings({"theme": theme})


def save_screenshot(
    app: App[Any], state_directory: Path, filename: str | None = None, path: str | None = None
) -> Path:
    """Write an SVG of the screen: to `path` (or the state directory's screenshots/), named
    `filename` or workbench-SCREEN-YYYYmmdd-HHMMSS.svg. Returns where it went."""
    folder = Path(path).expanduser() if path else state_directory / "screenshots"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    screen = type(app.screen).__name__.removesuffix("Screen").lower() or "screen"
    name = filename or f"workbench-{screen}-{time.strftime('%Y%m%d-%H%M%S')}.svg"
    target = folder / name
    replace_file(target, app.export_screenshot(), mode=0o600)
    return target
