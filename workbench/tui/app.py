"""The workbench app: `make_app` builds it for the CLI and for the tests."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.binding import Binding

from workbench.doctor import DoctorReport, diagnose
from workbench.matrix import Matrix, load_matrix
from workbench.paths import config_dir, state_dir
from workbench.settings import BuildSettings
from workbench.tui.variants_screen import VariantsScreen

if TYPE_CHECKING:
    from workbench.debugging.model import Capture

Doctor = Callable[[Matrix, BuildSettings], DoctorReport]


class WorkbenchApp(App[None]):
    """ONNX Runtime build workbench."""

    TITLE = "workbench"
    CSS_PATH = "workbench.tcss"
    BINDINGS = [
        Binding(
            "q", "quit", "Quit", id="quit", tooltip="Leave the workbench (builds keep running)"
        ),
        Binding(
            "h",
            "history",
            "History",
            id="history",
            tooltip="Past builds: open one, its report, compare two",
        ),
        Binding(
            "s",
            "settings",
            "Settings",
            id="settings",
            tooltip="Edit ninja jobs, nvcc threads, CUDA architectures, linkage, ccache, patches",
        ),
    ]

    def __init__(
        self, config_directory: Path, state_directory: Path, matrix: Matrix, doctor: Doctor
    ) -> None:
        super().__init__()
        self.config_directory = config_directory
        self.state_directory = state_directory
        self.matrix = matrix
        self.doctor = doctor
        self.report: DoctorReport | None = None  # the last detection, shared by the screens

    async def on_mount(self) -> None:
        self.sub_title = f"ONNX Runtime {self.matrix.ort_version}"
        await self.push_screen(
            VariantsScreen(self.matrix, self.config_directory, self.doctor, self.state_directory)
        )
        self.reattach()

    def reattach(self) -> None:
        """A build already running (from the CLI, another terminal, or before) is shown live."""
        from workbench.supervision.history import History, database_path
        from workbench.supervision.liveness import check

        if not database_path(self.state_directory).exists():
            return
        with History(self.state_directory) as history:
            running = check(history, history.active())
        running = [record for record in running if record.active]
        if running:
            self.open_build(running[0].id)

    def open_debug(self, pid: int | None = None, capture: Capture | None = None) -> None:
        """Show the debug screen: capture PID live, or show a capture already taken."""
        from workbench.tui.debug_screen import DebugScreen

        self.push_screen(DebugScreen(pid=pid, capture=capture))

    def open_build(self, build_id: int) -> None:
        """Show build `build_id` live (or as it ended)."""
        from workbench.tui.build_screen import BuildScreen

        self.push_screen(BuildScreen(self.state_directory, build_id))

    def action_history(self) -> None:
        """Past builds with their measurements."""
        from workbench.tui.history_screen import HistoryScreen

        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen(self.state_directory))

    def action_settings(self) -> None:
        from workbench.tui.settings_screen import SettingsScreen

        if not isinstance(self.screen, SettingsScreen):
            self.push_screen(SettingsScreen(self.matrix, self.config_directory, self.report))


def make_app(
    config: str | None = None, state: str | None = None, doctor: Doctor | None = None
) -> WorkbenchApp:
    """The app for these config and state directories (the CLI's and the tests' factory).

    `doctor` detects the host; tests and screenshots pass one with recorded hardware.
    """
    directory = config_dir(config)
    return WorkbenchApp(
        directory,
        state_dir(state),
        load_matrix(directory),
        doctor or partial(diagnose, nvidia_smi="nvidia-smi"),
    )


def run_app(config: str | None = None, state_dir: str | None = None) -> int:
    """Run the app in this terminal."""
    make_app(config, state_dir).run()
    return 0
