"""`?` and F1: every key of the screen below, with what it does, generated from its bindings
(and the app's), so the help never disagrees with the keys."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

# Keys Textual adds to every app that are worth naming (the palette); the rest is noise here.
_EXTRA = (("ctrl+p", "Command palette: every action of this screen, searchable"),)


@dataclass(frozen=True)
class KeyHelp:
    """One key of the help: the key as shown, its name and what it does."""

    key: str
    name: str
    help: str
    enabled: bool


def key_help_bindings(screen: Screen) -> list[tuple[str, str, str, str, DOMNode]]:
    """(keys shown, name, what it does, action, node) of each action `screen` answers to now by
    a key: its own first, then the app's; keys of one action together ("escape l")."""
    app = screen.app
    active = list(screen.active_bindings.items())
    active.sort(key=lambda item: item[1].node is app)  # the screen's keys first
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


def key_help(screen: Screen) -> list[KeyHelp]:
    """The keys `screen` answers to now, with what each does, and the palette's."""
    enabled = {
        (found.binding.action, id(found.node)): found.enabled
        for found in screen.active_bindings.values()
    }
    rows = [
        KeyHelp(keys, name, text, enabled.get((action, id(node)), True))
        for keys, name, text, action, node in key_help_bindings(screen)
    ]
    return rows + [KeyHelp(key, "Palette", text, True) for key, text in _EXTRA]


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

    def __init__(self, below: Screen) -> None:
        super().__init__()
        self.title_text = f"Keys: {below.sub_title or type(below).__name__}"
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
