"""The first screen: this host, the recommended variant and why, the matrix, and launching.

It is drawn before anything slow happens: detecting the host (`doctor`) and reading the last
builds from the history run in workers that wait for `drawn`, set once the first frame (with
the footer's keys) is on the terminal; placeholders stand in until they report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Static
from textual.worker import get_current_worker

from workbench.configs.matrix import Matrix
from workbench.configs.variants import expand
from workbench.errors import WorkbenchError
from workbench.planning.availability import of_variant, unavailable_reason
from workbench.tui import clock
from workbench.tui.columns import set_columns
from workbench.tui.table_names import ago, short_target, took
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.steady_table import SteadyTable

if TYPE_CHECKING:
    from workbench.configs.settings import BuildSettings
    from workbench.host.selection import MixedGpus
    from workbench.reading.doctor import DoctorReport

# Longest wait for the first frame before the workers start anyway.
FIRST_FRAME_WAIT_S = 5.0

# (label, key) of every column; below WIDE_COLUMNS cells the narrow set, in which the target's
# name is shortened and the CUDA, Python and SM columns (all in the name) give way.
COLUMNS = (
    ("", "mark"),
    ("", "selected"),
    ("target", "target"),
    ("CUDA", "cuda"),
    ("Py", "python"),
    ("SM / GPUs", "sm"),
    ("ISA", "isa"),
    ("last build", "last"),
)
NARROW_KEYS = ("mark", "selected", "target", "isa", "last")
LEGEND = "★ recommended · ✗ not buildable at the nixpkgs pin · ! caveat · ✓ marked (space)"
WIDE_COLUMNS = 120
SORT_KEYS = ("target", "CUDA", "SM / GPUs", "ISA", "last build")
_SORT_COLUMN = {"target": "target", "CUDA": "cuda", "SM / GPUs": "sm", "ISA": "isa"}
_SORT_COLUMN["last build"] = "last"


@dataclass(frozen=True)
class Row:
    """One line of the table: a variant of the matrix or a linkage flavour."""

    name: str
    cuda: str
    python: str
    sm: str
    isa: str
    caveat: str | None
    unavailable: str | None = None  # why the nixpkgs pin cannot build it (CUDA 12.4)
    instead: str | None = None  # what to build instead (configs/matrix.toml's `instead`)


def matrix_rows(matrix: Matrix) -> list[Row]:
    """Every variant, then the builder flake's linkage flavours."""
    rows = [
        Row(
            v.name,
            v.toolkit.version if v.toolkit else "cpu",
            v.python,
            f"{v.sm.name} {', '.join(v.sm.gpus[:2])}" if v.sm else "-",
            v.isa.name,
            v.caveat,
            unavailable_reason(v, matrix),
            of_variant(v, matrix).instead,
        )
        for v in expand(matrix)
    ]
    rows += [
        Row(
            f.name,
            "flake" if f.cuda else "cpu",
            "-",
            "flake's own",
            "-",
            f"experimental: {f.experimental_why}" if f.experimental else None,
        )
        for f in matrix.flavours
    ]
    return rows


def unavailable_note(row: Row) -> str:
    """The line under the table for a row the nixpkgs pin cannot build: why, and what instead."""
    instead = f"; build {row.instead} instead" if row.instead else ""
    return f"✗ not buildable at the nixpkgs pin: {row.unavailable}{instead}"


def last_build_text(
    state: str, ended: float | None, duration: float | None, now: float | None = None
) -> str:
    """ "ok 12m, 2h ago", "failed 45s, yesterday", "running"."""
    if ended is None:
        return state
    short = {"succeeded": "ok"}.get(state, state)
    elapsed = (time.time() if now is None else now) - ended
    return f"{short} {took(duration)}, {ago(max(0.0, elapsed))}"


def settings_in_force(matrix: Matrix, settings: BuildSettings, report: DoctorReport) -> str:
    """What settings.toml gives the next build: "6 × 8 nvcc threads (settings.toml)", or for
    "auto" the jobs it comes to on this host: "auto = 32 × 1 nvcc thread"."""
    from workbench.planning.tuning import choose_jobs, default_job_memory

    primary = report.selection.primary
    if primary is not None:
        cuda = primary.variant.toolkit is not None
    else:
        cuda = matrix.flavour(settings.linkage).cuda
    hardware = report.hardware
    # The planner every build takes its jobs from: a count from settings.toml as it is, "auto"
    # what it comes to on this host.
    choice = choose_jobs(
        settings,
        None,
        default_job_memory(settings, cuda),
        hardware.cpu.cores,
        hardware.memory.available,
        cuda,
    )
    threads = choice.nvcc_threads
    unit = "nvcc thread" if threads == 1 else "nvcc threads"
    if settings.ninja_jobs != "auto":
        return f"{choice.jobs} × {threads} {unit} ({choice.source.removesuffix(' (ninja_jobs)')})"
    return f"auto = {choice.jobs} × {threads} {unit}"


def mixed_recommendation(mixed: MixedGpus) -> str:
    """The recommendation line for GPUs of different architectures, most needed words first
    (at 80 columns it is cut after the command): no variant covers them all, the one build."""
    sms = "+".join(mixed.sm_names) or ",".join(mixed.architectures)
    if mixed.already_set:
        one_build = (
            f"cuda_architectures {','.join(mixed.configured)} is set, build {mixed.variant.name}"
        )
    else:
        one_build = f"{mixed.command}, then build {mixed.variant.name}"
    return f"★ No variant covers {sms}: {one_build}; or one per GPU: ★ rows"


def mixed_notification(mixed: MixedGpus) -> str:
    """The recommendation line in full (it is cut at 80 columns), as the doctor says it."""
    if mixed.already_set:
        one_build = f"cuda_architectures is {','.join(mixed.configured)} already: build "
    else:
        one_build = f"`{mixed.command}`, then build "
    return (
        f"{mixed.headline()}.\n"
        f"One build for all of them: {one_build}{mixed.variant.name}.\n"
        "Or one variant per GPU: the ★ rows (each row's note names its GPU)."
    )


def mixed_row_note(mixed: MixedGpus, name: str, flavour: str | None) -> str | None:
    """What a ★ row is for on a host with GPUs of different architectures (None: not one of
    the GPUs' variants, nor the linking flavour)."""
    everything = ",".join(mixed.architectures)
    if name == flavour:
        if mixed.configured and not mixed.already_set:
            return (
                f"★ recommended for linking: it builds cuda_architectures "
                f"{','.join(mixed.configured)}; `{mixed.command}` for every GPU here"
            )
        return f"★ recommended for linking: it builds for every GPU here ({everything})"
    gpus = ", ".join(sorted({gpu for gpu, variant in mixed.per_gpu if variant == name}))
    if not gpus:
        return None
    if name == mixed.variant.name:
        if mixed.already_set:
            return f"★ one build for every GPU here: cuda_architectures is {everything} already"
        return f"★ all GPUs in one build after `{mixed.command}`; as it is, for {gpus} only"
    return (
        f"★ for {gpus} alone (one variant per GPU); one build for every GPU: "
        f"{short_target(mixed.variant.name)} with cuda_architectures {everything}"
    )


class VariantsScreen(Screen[None]):
    """Variants and flavours, the recommended one marked; select and launch."""

    # The table from the start: with the filter focused first, its typing keys would hide the
    # screen's keys from the footer until focus moved (a frame or more later).
    AUTO_FOCUS = "#variants"
    # At 80 columns these give way before Settings and Patches (a newcomer looks for those): the
    # filter field says "/ filter" itself, a column header click sorts, the matrix is for fleets.
    FOOTER_GIVES_WAY_FIRST = ("cycle_sort", "focus_filter", "matrix")
    BINDINGS = [
        Binding(
            "slash",
            "focus_filter",
            "Filter",
            id="variants.filter",
            tooltip="Filter the variants by words of their name",
        ),
        Binding("escape", "clear_filter", "Clear filter", id="variants.clear", show=False),
        Binding(
            "space",
            "toggle_mark",
            "Mark",
            id="variants.mark",
            tooltip="Mark the highlighted variant to build several at once",
        ),
        Binding(
            "b",
            "build",
            "Build",
            id="variants.build",
            tooltip="Build the marked variants (or the highlighted one) with Nix",
        ),
        Binding(
            "o",
            "cycle_sort",
            "Sort",
            id="variants.sort",
            tooltip="Sort by the next column (target, CUDA, SM, ISA, last build)",
        ),
        Binding(
            "t",
            "sample_build",
            "Sample build",
            id="variants.sample",
            tooltip="Build the bundled C++ sample project: see builds work without Nix",
        ),
    ]

    def __init__(
        self,
        matrix: Matrix,
        config_directory: Path,
        doctor: Callable[[Matrix, BuildSettings], DoctorReport],
        state_directory: Path | None = None,
    ) -> None:
        super().__init__()
        self.matrix = matrix
        self.config_directory = config_directory
        self.state_directory = state_directory
        self.doctor = doctor
        self.rows = matrix_rows(matrix)
        self.recommended: set[str] = set()
        # GPUs of different architectures: what each ★ row is for, and the linking flavour.
        self.mixed: MixedGpus | None = None
        self.linking_flavour: str | None = None
        self.marked: set[str] = set()
        self.last_builds: dict[str, str] = {}
        self.sort_index = -1
        self.narrow: bool | None = None  # which set of columns the table has
        self.in_force = ""  # the jobs and nvcc threads settings.toml gives builds
        # Set once the first frame is drawn; the slow lookups wait for it.
        self.drawn = threading.Event()

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="host"):
            yield Static("Detecting GPUs, CPU and tools…", id="host-summary")
            yield Static("", id="nix-store")  # shown only where a nix-daemon serves the user
            yield Static("", id="recommendation")
            yield Static(
                "b build · space mark · p patches · t sample build · ? every key",
                id="newcomer",
            )
        yield Input(placeholder="/ filter: e.g. sm90 avx512", id="filter")
        yield SteadyTable(id="variants", cursor_type="row", zebra_stripes=True)
        yield Static(Text(LEGEND), id="row-note")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#variants", DataTable)
        self._set_columns(self.app.size.width < WIDE_COLUMNS)
        table.focus()
        self.call_after_refresh(self._first_frame_drawn)
        self.detect()
        self.load_last_builds()

    def on_screen_resume(self) -> None:
        # Back from the settings screen: what it saved is what the next build runs with.
        if self.in_force:
            self.refresh_in_force()

    def _first_frame_drawn(self) -> None:
        # The footer shows its keys one refresh later, after recomposing: wait for that too.
        self.call_after_refresh(self.drawn.set)

    def on_unmount(self) -> None:
        self.drawn.set()  # no worker may wait on a screen that is gone

    def _wait_until_drawn(self) -> bool:
        """In a worker: wait for the first frame; False if the worker was cancelled meanwhile."""
        self.drawn.wait(FIRST_FRAME_WAIT_S)
        return not get_current_worker().is_cancelled

    def on_resize(self) -> None:
        narrow = self.size.width < WIDE_COLUMNS
        if narrow != self.narrow:
            self._set_columns(narrow)

    def _set_columns(self, narrow: bool) -> None:
        """The wide or the narrow set of columns (see COLUMNS), then the rows again."""
        self.narrow = narrow
        highlighted = self._highlighted()
        set_columns(self.query_one("#variants", DataTable), COLUMNS, NARROW_KEYS, narrow)
        self._fill()
        if highlighted is not None:
            self._move_to(highlighted)

    def _fill(self) -> None:
        table = self.query_one("#variants", DataTable)
        words = self.query_one("#filter", Input).value.lower().split()
        highlighted = self._highlighted()
        table.clear()
        rows = [row for row in self.rows if all(word in row.name for word in words)]
        if self.sort_index >= 0:
            key = _SORT_COLUMN[SORT_KEYS[self.sort_index]]
            rows.sort(key=lambda row: self._cell_map(row)[key])
        for row in rows:
            table.add_row(*self._cells(row), key=row.name)
        if highlighted is not None and highlighted in table.rows:
            table.move_cursor(row=table.get_row_index(highlighted))

    def _cell_map(self, row: Row) -> dict[str, str]:
        mark = (
            "★"
            if row.name in self.recommended
            else "✗"
            if row.unavailable
            else "!"
            if row.caveat
            else ""
        )
        return {
            "mark": mark,
            "selected": "✓" if row.name in self.marked else "",
            "target": short_target(row.name) if self.narrow else row.name,
            "cuda": row.cuda,
            "python": row.python,
            "sm": row.sm.split(" ")[0] if self.narrow else row.sm,
            "isa": row.isa,
            "last": self.last_builds.get(row.name, ""),
        }

    def _cells(self, row: Row) -> tuple[str, ...]:
        cells = self._cell_map(row)
        table = self.query_one("#variants", DataTable)
        return tuple(cells[str(key.value)] for key in table.columns)

    def _highlighted(self) -> str | None:
        table = self.query_one("#variants", DataTable)
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return key.value

    @work(thread=True, exclusive=True, group="detect")
    def detect(self) -> None:
        """This host's GPUs, CPU, memory and tools, and the variant it needs (`doctor`)."""
        if not self._wait_until_drawn():
            return
        from workbench.configs.settings import load_settings

        settings = load_settings(self.config_directory, self.matrix)
        report = self.doctor(self.matrix, settings)
        in_force = settings_in_force(self.matrix, settings, report)
        self.app.call_from_thread(self.show_report, report, in_force)

    @work(thread=True, exclusive=True, group="in-force")
    def refresh_in_force(self) -> None:
        """The jobs line again from settings.toml as it is now (after the settings screen
        saved), with the host report already made."""
        report = getattr(self.app, "report", None)
        if report is None:
            return
        from workbench.configs.settings import load_settings

        try:
            settings = load_settings(self.config_directory, self.matrix)
        except WorkbenchError:
            return  # the settings screen refuses to save an invalid file; nothing to show
        in_force = settings_in_force(self.matrix, settings, report)
        if in_force != self.in_force:
            self.app.call_from_thread(self.show_report, report, in_force)

    @work(thread=True, exclusive=True, group="last-builds")
    def load_last_builds(self) -> None:
        """The newest build of each target, from the history (if there is one)."""
        if self.state_directory is None or not self._wait_until_drawn():
            return
        from workbench.history.store import History, database_path

        if not database_path(self.state_directory).exists():
            return
        from workbench.artefacts.sizes import from_json, human_bytes

        latest: dict[str, str] = {}
        at = clock.now(self.app)
        with History(self.state_directory) as history:
            for record in history.builds(limit=500):  # newest first
                if record.name in latest:
                    continue
                text = last_build_text(record.state, record.ended, record.duration_s, at)
                # A variant's size is what per-architecture builds exist to shrink: shown.
                produced = from_json(history.artefacts(record.id))
                if produced is not None and produced.closure_size is not None:
                    text += f", {human_bytes(produced.closure_size)}"
                latest[record.name] = text
        self.app.call_from_thread(self._show_last_builds, latest)

    def _show_last_builds(self, latest: dict[str, str]) -> None:
        self.last_builds = latest
        self._fill()

    def show_report(self, report: DoctorReport, in_force: str = "") -> None:
        self.app.report = report  # type: ignore[attr-defined]
        self.in_force = in_force
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
        # One line each (cut, not wrapped, when narrow): what is missing goes on the shorter one.
        advice = report.parallelism
        lines = [
            gpu_line + (f" · missing: {', '.join(missing)}" if missing else ""),
            f"CPU  {hardware.cpu.cores} cores · {best_isa} · "
            f"{hardware.memory.available / 1024**3:.0f} GiB free · {hardware.cpu.model}",
            # What a build will run with next to what this host would take: they may differ.
            f"Jobs {in_force or '?'} · recommended {advice.jobs} × {advice.nvcc_threads} "
            f"({advice.limited_by})",
        ]
        self.query_one("#host-summary", Static).update(Text("\n".join(lines)))
        daemon = report.nix_store.status_line() if report.nix_store is not None else None
        if daemon:
            nix_store = self.query_one("#nix-store", Static)
            nix_store.update(Text(daemon))
            nix_store.display = True  # the table, a line shorter, keeps its cursor in view
        newcomer = self.query_one("#newcomer", Static)
        if "nix" in missing or not gpu.found:
            what = "No Nix here" if "nix" in missing else "No NVIDIA GPU here"
            newcomer.update(f"{what}: t builds the bundled C++ sample project · ? every key")
        primary = report.selection.primary
        recommendation = self.query_one("#recommendation", Static)
        if primary is None:
            recommendation.update(
                Text("No variant runs on this host: " + "; ".join(report.selection.notes))
            )
            return
        from workbench.host.linking import recommend_flavour

        self.recommended = {item.variant.name for item in report.selection.recommended}
        # The flavour to link with (cuda-hybrid with a GPU) is starred too.
        self.linking_flavour = recommend_flavour(
            self.matrix, bool(report.hardware.gpu.gpus)
        ).flavour.name
        self.recommended.add(self.linking_flavour)
        self.mixed = mixed = report.selection.mixed
        first = primary.variant.name
        if mixed is None:
            # The reasons quote what nvidia-smi said: data, never markup.
            recommendation.update(Text(f"★ {first}  ({'; '.join(primary.reasons[:2])})"))
        else:
            # One line, cut rather than wrapped: the whole advice is in the notification, and
            # each ★ row's note says which GPU it is for.
            recommendation.styles.text_wrap = "nowrap"
            recommendation.styles.text_overflow = "ellipsis"
            recommendation.update(Text(mixed_recommendation(mixed)))
            self.notify(
                mixed_notification(mixed),
                title="GPUs of different architectures",
                timeout=20,
                markup=False,  # GPU names are nvidia-smi's text
            )
            first = mixed.variant.name
        self._fill()
        # After the layout that the new summary lines cause, so the row lands where it is drawn.
        self.call_after_refresh(self._move_to, first)

    def _move_to(self, name: str) -> None:
        table = self.query_one("#variants", DataTable)
        if name in table.rows:
            table.move_cursor(row=table.get_row_index(name), animate=False)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.query_one("#variants", DataTable).focus()

    def action_toggle_mark(self) -> None:
        name = self._highlighted()
        if name is None:
            return
        self.marked ^= {name}
        table = self.query_one("#variants", DataTable)
        table.update_cell(name, "selected", "✓" if name in self.marked else "")

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORT_KEYS)
        self.notify(f"sorted by {SORT_KEYS[self.sort_index]}")
        self._fill()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """What the highlighted row's mark means: its reason, or the legend of the marks."""
        row = next((row for row in self.rows if row.name == event.row_key.value), None)
        note = LEGEND
        if row is not None:
            mixed_note = (
                mixed_row_note(self.mixed, row.name, self.linking_flavour)
                if self.mixed is not None and row.name in self.recommended
                else None
            )
            if mixed_note is not None:
                note = mixed_note
            elif row.name in self.recommended:
                note = "★ recommended for this host"
            elif row.unavailable:
                note = unavailable_note(row)
            elif row.caveat:
                note = f"! {row.caveat}"
        # A Text, never markup: the reasons quote config values.
        self.query_one("#row-note", Static).update(Text(note))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        label = str(event.label)
        if label in SORT_KEYS:
            self.sort_index = SORT_KEYS.index(label)
            self._fill()

    def action_build(self) -> None:
        names = [row.name for row in self.rows if row.name in self.marked]
        if not names and (highlighted := self._highlighted()):
            names = [highlighted]
        if names:
            self.preview(names)

    @work(thread=True, exclusive=True, group="launch")
    def preview(self, names: list[str]) -> None:
        """Plan the build off the event loop, show it and ask (`launching.ask_and_build`)."""
        from workbench.tui.launching import ask_and_build

        ask_and_build(self, self.config_directory, names)

    def action_sample_build(self) -> None:
        from workbench.samples import sample_project
        from workbench.tui.screens.variants.confirm_clean import ConfirmCleanRebuild

        state = self.app.state_directory  # type: ignore[attr-defined]
        if sample_project.is_built(state / sample_project.NAME):
            # A second `t` would only say "ninja: no work to do": offer to build it again.
            self.app.push_screen(ConfirmCleanRebuild(), self._sample_answered)
            return
        self.launch_sample()

    def _sample_answered(self, answer: str | None) -> None:
        if answer in ("clean", "as-is"):
            self.launch_sample(clean=answer == "clean")

    @work(thread=True, exclusive=True, group="launch")
    def launch_sample(self, clean: bool = False) -> None:
        """Hand the sample build to a supervisor (off the event loop), then show it: it runs
        in seconds and needs no Nix, so it is not asked about first."""
        from workbench.supervision import control
        from workbench.tui.launching import hand_over

        state = self.app.state_directory  # type: ignore[attr-defined]
        hand_over(self, lambda: control.start_sample(state, clean=clean))
