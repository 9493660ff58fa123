"""The workbench app: `make_app` builds it for the CLI and for the tests."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from workbench.matrix import Matrix, load_matrix
from workbench.paths import config_dir, state_dir
from workbench.tui.variants_screen import VariantsScreen


class WorkbenchApp(App[None]):
    """ONNX Runtime build workbench."""

    TITLE = "workbench"
    CSS_PATH = "workbench.tcss"
    BINDINGS = [
        Binding(
            "q", "quit", "Quit", id="quit", tooltip="Leave the workbench (builds keep running)"
        ),
    ]

    def __init__(
        self,
        config_directory: Path,
        state_directory: Path,
        matrix: Matrix,
        nvidia_smi: str = "nvidia-smi",
    ) -> None:
        super().__init__()
        self.config_directory = config_directory
        self.state_directory = state_directory
        self.matrix = matrix
        self.nvidia_smi = nvidia_smi

    def on_mount(self) -> None:
        self.sub_title = f"ONNX Runtime {self.matrix.ort_version} · {self.config_directory}"
        self.push_screen(VariantsScreen(self.matrix, self.config_directory, self.nvidia_smi))


def make_app(
    config: str | None = None, state: str | None = None, nvidia_smi: str = "nvidia-smi"
) -> WorkbenchApp:
    """The app for these config and state directories (the CLI's and the tests' factory)."""
    directory = config_dir(config)
    return WorkbenchApp(directory, state_dir(state), load_matrix(directory), nvidia_smi)


def run_app(config: str | None = None, state_dir: str | None = None) -> int:
    """Run the app in this terminal."""
    make_app(config, state_dir).run()
    return 0
