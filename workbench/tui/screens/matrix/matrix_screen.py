"""The matrix screen: the targets of a matrix build x state (done, building where, failed with
its first error line, waiting), each target's ONNX Runtime release, their sizes when done,
what each build host builds now and, while the build runs, what each remote host compiles (its
CPU and memory), sampled there by the workbench over one SSH connection a host
(`hosts.remote_sampler`).

Everything comes from `hosts.matrix_view` (read in a worker, never on the event loop): a
running build's internal-json log as it grows, an ended one's per-target history rows. Names,
hosts and error lines come from the build's log: they are shown as `Text`, never markup.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from workbench.configs.releases import suffix_of
from workbench.errors import WorkbenchError
from workbench.progress.visible import visible
from workbench.reading.follow import size
from workbench.remote.matrix_view import MatrixRow, MatrixView, MatrixWatch, host_lines
from workbench.remote.remote_sampler import FleetSampling
from workbench.tui import clock
from workbench.tui.columns import set_columns
from workbench.tui.table_names import short_target, took
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.steady_table import SteadyTable

REFRESH_S = 1.0
# (label, key); below WIDE_COLUMNS cells the closure size gives way to the first error.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("target", "target"),
    ("ORT", "ort"),
    ("state", "state"),
    ("host", "host"),
    ("time", "time"),
    ("size", "size"),
    ("closure", "closure"),
    ("first error", "error"),
)
NARROW_KEYS = ("target", "ort", "state", "host", "time", "size", "error")
WIDE_COLUMNS = 120
# The theme's own styles for a state (never a literal colour).
STATE_STYLE = {"done": "bold", "failed": "bold reverse", "building": "italic"}


def row_cells(row_state: str, host: str, tried_on: tuple[str, ...]) -> tuple[Text, Text]:
    """The state and host cells: a target Nix built elsewhere after a host failed says so."""
    where = host or "-"
    if tried_on:
        where += f" (after {', '.join(tried_on)})"
    return Text(row_state, style=STATE_STYLE.get(row_state, "")), Text(visible(where))


def narrow_target(row: MatrixRow) -> str:
    """The target's name at 80 columns: short, and without the release suffix its ORT cell
    says ("py313-cuda12_9-sm90-avx512" of 1.24.2, not "...-avx512-ort1_24_2")."""
    name = short_target(row.name)
    suffix = suffix_of(row.ort_version, "") if row.ort_version else ""
    return name.removesuffix(suffix) if suffix and name != suffix else name


def detail_text(row: MatrixRow | None) -> str:
    """One target in words: "NAME: failed on remote (after gone-host): error: ..."."""
    if row is None:
        return ""
    where = f" on {row.host}" if row.host else ""
    after = f" (after {', '.join(row.tried_on)})" if row.tried_on else ""
    error = f": {row.first_error}" if row.first_error else ""
    release = f" (ONNX Runtime {row.ort_version})" if row.ort_version else ""
    return f"{row.name}{release}: {row.state}{where}{after}{error}"


def hosts_text(view: MatrixView | None, sampled: dict[str, str], problem: str = "") -> str:
    """The hosts' lines, each followed by what its sampler says, indented under its name."""
    if view is None:
        return ""
    lines = []
    for host, line in zip(view.hosts, host_lines(view.hosts), strict=True):
        lines.append(line)
        if sampled.get(host.name):
            lines.append(f"{'':<15}{sampled[host.name]}")
    if problem:
        lines.append(problem)
    return "\n".join(visible(line) for line in lines)


def summary_text(view: MatrixView | None) -> str:
    """One line: which build, its state, and how many targets are in each state."""
    if view is None:
        return (
            "No matrix build in the history yet: `workbench build A B ...` or "
            "`workbench build --match WORDS` starts one."
        )
    counts = " · ".join(f"{number} {state}" for state, number in view.counts().items())
    return f"build #{view.build_id} ({view.build_name}): {view.build_state} · {counts}"


class MatrixScreen(Screen[None]):
    """A matrix build's targets x state and its hosts, live while it runs."""

    CSS_PATH = "../../styles/matrix.tcss"
    BINDINGS = [
        Binding(
            "enter",
            "open_build",
            "Open build",
            id="matrix.open",
            tooltip="The whole build: its log, progress and graphs",
            priority=True,  # before the table's own (hidden) Enter, so the footer shows it
        ),
        Binding("escape", "back", "Back", id="matrix.back", tooltip="Leave the matrix"),
    ]

    class Refreshed(Message):
        """The matrix read again (None: no matrix build in the history)."""

        def __init__(self, view: MatrixView | None) -> None:
            super().__init__()
            self.view = view

    def __init__(self, state_directory: Path, build_id: int | None = None) -> None:
        super().__init__()
        self.matrix_watch = MatrixWatch(Path(state_directory), build_id)
        self.view: MatrixView | None = None
        self.refreshes = 0
        self.narrow: bool | None = None
        self.sampling: FleetSampling | None = None
        self.sampling_problem = ""
        self._sampling_asked = False
        # The worker may start samplers while the screen unmounts: whoever comes second of the
        # two stops them (their SSH sessions must not outlive the screen).
        self._sampling_lock = threading.Lock()
        self._unmounted = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="matrix-summary")
        yield Static("", id="matrix-hosts")
        yield SteadyTable(id="matrix-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="matrix-detail")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = "matrix"
        self._set_columns(self.app.size.width < WIDE_COLUMNS)
        self.query_one("#matrix-table", DataTable).focus()
        self.reload()
        self.set_interval(REFRESH_S, self._refresh_if_running)

    def _refresh_if_running(self) -> None:
        if self.view is not None and self.view.active and self.is_current:
            self.reload()

    @work(thread=True, exclusive=True, group="matrix-load")
    def reload(self) -> None:
        """Read the build again (off the event loop: the log, the history, Nix for sizes)."""
        try:
            view = self.matrix_watch.view(now=clock.now(self.app))
        except WorkbenchError as exc:
            self.app.call_from_thread(
                self.notify, str(exc), severity="error", timeout=10, markup=False
            )
            return
        if view is not None and view.active and not self._sampling_asked:
            # Once, while it runs: a sampler on each remote host (threads of their own).
            self._sampling_asked = True
            config = getattr(self.app, "config_directory", None)
            if config is not None:
                found = self.matrix_watch.start_sampling(Path(config))
                with self._sampling_lock:
                    if isinstance(found, str):
                        self.sampling_problem = found
                    elif self._unmounted:
                        found.stop()  # the screen went while they started
                        return
                    else:
                        self.sampling = found
        elif self.sampling is not None and (view is None or not view.active):
            with self._sampling_lock:
                stopping, self.sampling = self.sampling, None
            if stopping is not None:
                stopping.stop()
        sampling, fleet = self.sampling, self.matrix_watch.fleet
        if sampling is not None and fleet is not None:
            # Every derivation Nix started on a host reaches its sampler: the compile of a
            # variant runs in its C++ dependency, not in the target's own derivation.
            sampling.learn(fleet)
        self.post_message(self.Refreshed(view))

    def on_unmount(self) -> None:
        with self._sampling_lock:
            self._unmounted = True
            sampling, self.sampling = self.sampling, None
        if sampling is not None:
            # Each session ends when its stdin closes; waited for off the event loop.
            threading.Thread(target=sampling.stop, daemon=True).start()

    def on_matrix_screen_refreshed(self, message: Refreshed) -> None:
        self.refreshes += 1
        self.view = message.view
        self._fill()

    def on_resize(self) -> None:
        narrow = self.size.width < WIDE_COLUMNS
        if narrow != self.narrow:
            self._set_columns(narrow)

    def _set_columns(self, narrow: bool) -> None:
        self.narrow = narrow
        set_columns(self.query_one("#matrix-table", DataTable), COLUMNS, NARROW_KEYS, narrow)
        self._fill()

    def _fill(self) -> None:
        view = self.view
        self.query_one("#matrix-summary", Static).update(Text(visible(summary_text(view))))
        sampled = self.sampling.lines() if self.sampling is not None else {}
        hosts = Text(hosts_text(view, sampled, self.sampling_problem))
        self.query_one("#matrix-hosts", Static).update(hosts)
        table = self.query_one("#matrix-table", DataTable)
        highlighted = table.cursor_row
        table.clear()
        if view is None:
            return
        for row in view.rows:
            state, host = row_cells(row.state, row.host, row.tried_on)
            every = {
                "target": Text(visible(narrow_target(row) if self.narrow else row.name)),
                "ort": Text(visible(row.ort_version or "-")),
                "state": state,
                "host": host,
                "time": Text(took(row.seconds)),
                "size": Text(size(row.nar_size)),
                "closure": Text(size(row.closure_size)),
                "error": Text(visible(row.first_error)),
            }
            table.add_row(*(every[str(key.value)] for key in table.columns), key=row.name)
        if table.row_count:
            table.move_cursor(row=min(highlighted, table.row_count - 1), animate=False)
        self._show_detail()

    @on(DataTable.RowHighlighted, "#matrix-table")
    def _show_detail(self) -> None:
        """The highlighted target in full: its whole name and first error line, which the
        table cuts at 80 columns."""
        table = self.query_one("#matrix-table", DataTable)
        rows = {row.name: row for row in self.view.rows} if self.view else {}
        if not table.row_count:
            self.query_one("#matrix-detail", Static).update("")
            return
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        row = rows.get(str(key.value))
        self.query_one("#matrix-detail", Static).update(Text(visible(detail_text(row))))

    def action_open_build(self) -> None:
        if self.view is not None:
            self.app.open_build(self.view.build_id)  # type: ignore[attr-defined]

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
