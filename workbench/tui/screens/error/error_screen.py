"""A user error (a malformed config file, an unreadable history) as one screen: what failed,
where, and what to do; quitting from it exits with status 2, as the command line does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Header, Static

from workbench.errors import ConfigError
from workbench.tui.widgets.key_footer import KeyFooter

# "configs/settings.toml:18:16: malformed TOML: ..." or "/x/history.sqlite3: ..."
_WHERE = re.compile(r"^(?P<where>[^\s:]+\.(?:toml|sqlite3|json|patch)(?::\d+){0,2}): (?P<what>.*)$")


@dataclass(frozen=True)
class UserErrorText:
    """The three parts the screen shows."""

    what: str
    where: str
    todo: str


def explain(error: Exception, config_directory: Path, state_directory: Path) -> UserErrorText:
    """What failed, where, and what to do, from a WorkbenchError's message."""
    message = str(error)
    found = _WHERE.match(message)
    where, what = (found["where"], found["what"]) if found else ("", message)
    if isinstance(error, ConfigError):
        where = where or str(config_directory)
        todo = (
            f"Fix it in {where.split(':')[0]} (the line and column are named above), then start "
            "workbench again. `workbench config show` checks settings.toml from the command "
            "line; `workbench --config DIR` uses another config directory."
        )
    else:
        where = where or str(state_directory)
        todo = (
            f"The state directory is {state_directory}. Move an unreadable history.sqlite3 "
            "aside (running builds are not affected), or start with `workbench --state-dir DIR`."
        )
    return UserErrorText(what, where, todo)


class ErrorScreen(Screen[None]):
    """One user error; q leaves with exit status 2, escape goes back when there is a screen."""

    CSS_PATH = "../../styles/error.tcss"
    BINDINGS = [
        Binding("q", "app.quit", "Quit", id="error.quit", tooltip="Leave with exit status 2"),
        Binding("escape", "back", "Back", id="error.back", tooltip="Back to the previous screen"),
    ]

    def __init__(self, text: UserErrorText) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="error-box"):
            yield Static("workbench cannot go on", id="error-heading")
            # Text, not markup: the message quotes file contents.
            yield Static(Text.assemble(("What: ", "bold"), self.text.what), id="error-what")
            yield Static(Text.assemble(("Where: ", "bold"), self.text.where), id="error-where")
            yield Static(Text.assemble(("What to do: ", "bold"), self.text.todo), id="error-todo")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = "error"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return len(self.app.screen_stack) > 2  # something usable below (not just default)
        return True

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
