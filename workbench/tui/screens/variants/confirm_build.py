"""`b`: before a build that may take hours starts, the exact command, its jobs and memory
estimate, and a question. What is shown is the plan that starts (`BuildPlan.build`)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from workbench.planning.plan import BuildPlan


class ConfirmBuild(ModalScreen[bool]):
    """Start this build? y starts it, n or escape does not."""

    BINDINGS = [
        Binding("y", "answer(True)", "Start", id="confirm-build.yes"),
        Binding("n,escape", "answer(False)", "Cancel", id="confirm-build.no"),
    ]
    DEFAULT_CSS = """
    ConfirmBuild { align: center middle; }
    #confirm-build-dialog {
        width: 100; max-width: 96%; height: auto; max-height: 95%;
        border: thick $primary; background: $panel; padding: 0 1;
    }
    #confirm-build-command { color: $text; text-style: bold; margin: 1 0; }
    #confirm-build-details { color: $text-muted; }
    #confirm-build-plan { color: $text; margin-top: 1; }
    #confirm-build-warnings { color: $warning; }
    #confirm-build-buttons { height: auto; margin-top: 1; }
    #confirm-build-buttons Button { margin-right: 1; }
    """

    def __init__(self, preview: BuildPlan) -> None:
        super().__init__()
        self.preview = preview

    @property
    def can_start(self) -> bool:
        """A target this host cannot build, or no nix: nothing to start."""
        return not self.preview.problems and self.preview.missing_tool is None

    def compose(self) -> ComposeResult:
        command, where, jobs, memory, *warnings = self.preview.lines()
        with Vertical(id="confirm-build-dialog") as dialog:
            dialog.border_title = f"Build {self.preview.build.name}?"
            # Text, never markup: a command line can hold brackets.
            yield Static(Text(command), id="confirm-build-command")
            yield Static(Text("\n".join((where, jobs, memory))), id="confirm-build-details")
            # Nix's plan: store paths and error text are data, never markup.
            plan = Static(Text("\n".join(self.preview.plan_lines())), id="confirm-build-plan")
            plan.display = bool(self.preview.plan_lines())
            yield plan
            said = Static(Text("\n".join(warnings)), id="confirm-build-warnings")
            said.display = bool(warnings)
            yield said
            with Horizontal(id="confirm-build-buttons"):
                yield Button(
                    "Start (y)",
                    id="confirm-build-yes",
                    variant="primary",
                    disabled=not self.can_start,
                )
                yield Button("Cancel (n)", id="confirm-build-no")

    def on_mount(self) -> None:
        # The screen's Mount can come after it was answered (`n` pressed at once on a loaded
        # host: the dialog dismissed, its buttons gone): a query of what is no longer there
        # raised NoMatches and took the app down. What is there is focused; nothing else.
        wanted = "confirm-build-yes" if self.can_start else "confirm-build-no"
        for button in self.query(Button):
            if button.id == wanted:
                button.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-build-yes" and self.can_start)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes and self.can_start)
