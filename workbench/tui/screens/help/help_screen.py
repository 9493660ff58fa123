"""`?` and F1: every key of the screen below, with what it does, generated from its bindings
(and the app's), so the help never disagrees with the keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static


@dataclass(frozen=True)
class KeyHelp:
    """One key of the help: the key as shown, its name and what it does."""

    key: str
    name: str
    help: str
    enabled: bool


def key_help_bindings(screen: Screen[Any]) -> list[tuple[str, str, str, str, DOMNode]]:
    """(keys shown, name, what it does, action, node) of each action `screen` answers to now by
    a key: its own first, then the app's; keys of one action together ("escape l")."""
    app = screen.app
    # Textual's own keys (tab, copy, ctrl+q) are listed only for an action of ours (quit).
    textual_own = {
        (key.strip(), b.action)
        for b in (*App.BINDINGS, *Screen.BINDINGS)
        if isinstance(b, Binding)
        for key in b.key.split(",")
    }
    ours = {
        found.binding.action
        for found in screen.active_bindings.values()
        if (found.binding.key, found.binding.action) not in textual_own
    }
    # The app's own actions count even where a text field hides their key (q in a form).
    ours |= {b.action for b in type(app).BINDINGS if isinstance(b, Binding)}
    active = [
        (key, found)
        for key, found in screen.active_bindings.items()
        if found.binding.action in ours
    ]
    # The screen's keys first; of one action, ours before Textual's (their tooltips say more).
    active.sort(
        key=lambda item: (
            item[1].node is app,
            (item[1].binding.key, item[1].binding.action) in textual_own,
        )
    )
    keys: dict[tuple[str, int], list[str]] = {}
    for key, found in active:
        keys.setdefault((found.binding.action, id(found.node)), []).append(key)
    rows: list[tuple[str, str, str, str, DOMNode]] = []
    done: set[tuple[str, int]] = set()
    for _key, found in active:
        binding: Binding = found.binding
        which = (binding.action, id(found.node))
        if binding.system or not binding.description or which in done:
            continue
        if not binding.show and found.node not in (screen, app):
            continue  # a widget's own editing keys (an Input's cursor moves): not the screen's
        done.add(which)
        shown = " ".join(app.get_key_display(Binding(k, binding.action)) for k in keys[which])
        tooltip = binding.tooltip or found.tooltip or binding.description
        rows.append((shown, binding.description, tooltip, binding.action, found.node))
    return rows


def key_help(screen: Screen[Any]) -> list[KeyHelp]:
    """The keys `screen` answers to now, with what each does, and the palette's."""
    enabled = {
        (found.binding.action, id(found.node)): found.enabled
        for found in screen.active_bindings.values()
    }
    rows = [
        KeyHelp(keys, name, text, enabled.get((action, id(node)), True))
        for keys, name, text, action, node in key_help_bindings(screen)
    ]
    return rows


class HelpScreen(ModalScreen[None]):
    """The keys of the screen below; any of escape, q, ? or F1 closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help-box {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: round $primary; background: $panel; padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close"),
    ]

    def __init__(self, below: Screen[Any]) -> None:
        super().__init__()
        name = below.sub_title or type(below).__name__.removesuffix("Screen").lower()
        self.title_text = f"Keys: {name}"
        self.rows = key_help(below)

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=False, padding=(0, 1))
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("name", no_wrap=True)
        table.add_column("what it does", ratio=1)
        for row in self.rows:
            style = "" if row.enabled else "dim"
            table.add_row(Text(row.key), Text(row.name), Text(row.help), style=style)
        with VerticalScroll(id="help-box") as box:
            box.border_title = self.title_text
            box.border_subtitle = "escape closes"
            yield Static(table)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
