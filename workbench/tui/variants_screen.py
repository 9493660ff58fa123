"""The first screen: this host, the recommended variant and why, and the whole matrix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from workbench.doctor import DoctorReport
from workbench.matrix import Matrix
from workbench.settings import BuildSettings, load_settings
from workbench.variants import Variant, expand


class VariantsScreen(Screen[None]):
    """Variants with the one recommended for this host marked."""

    BINDINGS = [
        Binding(
            "slash",
            "focus_filter",
            "Filter",
            id="variants.filter",
            tooltip="Filter the variants by words of their name",
        ),
        Binding("escape", "clear_filter", "Clear filter", id="variants.clear", show=False),
    ]

    def __init__(
        self,
        matrix: Matrix,
        config_directory: Path,
        doctor: Callable[[Matrix, BuildSettings], DoctorReport],
    ) -> None:
        super().__init__()
        self.matrix = matrix
        self.config_directory = config_directory
        self.doctor = doctor
        self.variants: list[Variant] = expand(matrix)
        self.recommended: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="host"):
            yield Static("Detecting GPUs, CPU and tools…", id="host-summary")
            yield Static("", id="recommendation")
        yield Input(placeholder="/ filter: e.g. sm90 avx512", id="filter")
        yield DataTable(id="variants", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#variants", DataTable)
        table.add_column("", key="mark", width=1)
        table.add_column("variant", key="name")
        table.add_column("CUDA", key="cuda")
        table.add_column("SM", key="sm")
        table.add_column("GPUs", key="gpus")
        self._fill()
        table.focus()
        self.detect()

    def _fill(self, words: list[str] | None = None) -> None:
        table = self.query_one("#variants", DataTable)
        table.clear()
        for variant in self.variants:
            if words and not all(word in variant.name for word in words):
                continue
            mark = "★" if variant.name in self.recommended else ("!" if variant.caveat else "")
            table.add_row(
                mark,
                variant.name,
                variant.toolkit.version if variant.toolkit else "cpu",
                variant.sm.name if variant.sm else "-",
                ", ".join(variant.sm.gpus[:2]) if variant.sm else "-",
                key=variant.name,
            )

    @work(thread=True, exclusive=True, group="detect")
    def detect(self) -> None:
        settings = load_settings(self.config_directory, self.matrix)
        report = self.doctor(self.matrix, settings)
        self.app.call_from_thread(self.show_report, report)

    def show_report(self, report: DoctorReport) -> None:
        self.app.report = report  # type: ignore[attr-defined]
        hardware = report.hardware
        gpu = hardware.gpu
        missing = [tool.name for tool in report.tools if not tool.found]
        names = sorted({device.name for device in gpu.gpus})
        gpu_line = (
            f"GPU  {len(gpu.gpus)}× {', '.join(names)} · driver {gpu.driver_version or '?'}"
            if gpu.found
            else f"GPU  {gpu.message}"
        )
        best_isa = hardware.cpu.isas[-1] if hardware.cpu.isas else "no matrix ISA"
        lines = [
            gpu_line,
            f"CPU  {hardware.cpu.model} · {hardware.cpu.cores} cores · {best_isa} · "
            f"{hardware.memory.available / 1024**3:.0f} GB free · "
            f"{report.parallelism.jobs} jobs × {report.parallelism.nvcc_threads} nvcc threads"
            + (f" · missing: {', '.join(missing)}" if missing else ""),
        ]
        self.query_one("#host-summary", Static).update("\n".join(lines))
        primary = report.selection.primary
        recommendation = self.query_one("#recommendation", Static)
        if primary is None:
            recommendation.update(
                "No variant runs on this host: " + "; ".join(report.selection.notes)
            )
            return
        self.recommended = {item.variant.name for item in report.selection.recommended}
        recommendation.update(f"★ {primary.variant.name}  ({'; '.join(primary.reasons[:2])})")
        self._fill(self._words())
        table = self.query_one("#variants", DataTable)
        if primary.variant.name in table.rows:
            table.move_cursor(row=table.get_row_index(primary.variant.name))

    def _words(self) -> list[str]:
        return self.query_one("#filter", Input).value.lower().split()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(self._words())

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.query_one("#variants", DataTable).focus()
