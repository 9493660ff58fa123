"""Asked when `t` finds the sample project already built: build it again from clean (a build
worth watching), or run ninja as it is (it will say it has nothing to do)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmCleanRebuild(ModalScreen[str]):
    """y: from clean; n: as it is; escape: nothing."""

    BINDINGS = [
        Binding("y", "answer('clean')", "Rebuild from clean", id="sample.clean"),
        Binding("n", "answer('as-is')", "Build as is", id="sample.as-is"),
        Binding("escape", "answer('cancel')", "Cancel", id="sample.cancel"),
    ]
    DEFAULT_CSS = """
    ConfirmCleanRebuild { align: center middle; }
    #sample-question { width: 64; max-width: 90%; height: auto; padding: 1 2;
                       background: $panel; border: thick $primary; }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="sample-question"):
            yield Static(
                "The sample project is already built: a build now would have nothing to do.\n\n"
                "y  rebuild it from clean (ninja -t clean, then the whole build)\n"
                "n  build it as it is\n"
                "escape  cancel"
            )

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer)
