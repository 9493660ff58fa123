"""The build screen's modals: the launch's notices in full, and the question before a stop."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class NoticesScreen(ModalScreen[None]):
    """The launch's notices in full (other build processes with PID, user and file)."""

    BINDINGS = [Binding("escape,w,q", "close", "Close", id="notices.close")]
    DEFAULT_CSS = """
    NoticesScreen { align: center middle; }
    #notices-box {
        width: 90%; height: auto; max-height: 90%;
        border: round $warning; background: $panel; padding: 0 1;
    }
    """

    def __init__(self, notices: Sequence[str]) -> None:
        super().__init__()
        self.notices = notices

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notices-box") as box:
            box.border_title = "At launch"
            box.border_subtitle = "escape closes"
            yield Static(Text("\n".join(self.notices)))  # Text: process names are not markup

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmStop(ModalScreen[bool]):
    """Yes or no: stop this build and every process of it."""

    # Focused as the screen is shown, by Textual (not a query in on_mount: see ConfirmDiscard).
    AUTO_FOCUS = "#confirm-no"

    CSS_PATH = "../../styles/build.tcss"
    BINDINGS = [
        Binding("y", "answer(True)", "Yes, stop it", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(Text(self.question), id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button("Stop the build (y)", id="confirm-yes", variant="error")
                yield Button("Keep it running (n)", id="confirm-no", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
