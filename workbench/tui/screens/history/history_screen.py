"""The history screen: past builds with their measurements; a report; two builds compared.

The table is read in a worker (one History for that thread) and sorted on the event loop;
reports are `workbench report`'s Markdown (`reading.report`), shown with rich's Markdown in
a scrollable screen, so the TUI and the CLI never disagree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markdown import Markdown
from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from workbench.errors import WorkbenchError
from workbench.history.store import History, database_path
from workbench.progress.visible import visible, visible_lines
from workbench.reading.follow import duration, size
from workbench.tui import clock
from workbench.tui.columns import set_columns
from workbench.tui.table_names import short_target
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.steady_table import SteadyTable

HISTORY_LIMIT = 500
RELOAD_WHILE_RUNNING_S = 2.0


@dataclass(frozen=True)
class HistoryRow:
    """One past (or running) build as the table shows it."""

    id: int
    name: str
    variant: str | None
    state: str
    active: bool
    exit_status: int | None
    started: float | None
    duration_s: float | None
    jobs: int | None
    cpu_percent: float | None
    peak_rss: int | None
    note: str | None
    signal: int | None = None
    first_error: str | None = None  # Nix's `error:` line or the compiler's first error

    @property
    def failure(self) -> str:
        """Why a build that ended badly did: its first error, else its note; "" otherwise."""
        if self.state == "succeeded" or self.active:
            return ""
        if self.state == "failed":
            return self.first_error or self.note or ""
        return self.note or self.first_error or ""  # killed, stopped, lost: the note says how

    @property
    def outcome(self) -> str:
        """The state, with the exit status or signal of a build that did not succeed."""
        if self.state == "succeeded" or self.active:
            return self.state
        if self.signal is not None:
            return f"{self.state} (signal {self.signal})"
        if self.exit_status:
            return f"{self.state} (exit {self.exit_status})"
        return self.state

    @property
    def label(self) -> str:
        """The name, with the variant when it says more."""
        if self.variant and self.variant != self.name:
            return f"{self.name} ({self.variant})"
        return self.name


# (label, key): what was built and how it went first, the measurements next and the start date
# last, so that 80 columns show what matters most.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("", "mark"),
    ("id", "id"),
    ("build", "build"),
    ("state", "state"),
    ("time", "time"),
    ("peak RSS", "peak"),
    ("CPU", "cpu"),
    ("jobs", "jobs"),
    ("started", "started"),
)
# Below WIDE_COLUMNS cells the measurements the report has anyway give way (`r` shows them).
NARROW_KEYS = ("mark", "id", "build", "state", "time", "started")
WIDE_COLUMNS = 100
SORT_KEYS = ("id", "build", "state", "time", "peak", "cpu", "jobs", "started")
_TEXT_KEYS = {"build", "state"}
# The table leaves the common prefix of variant names out to keep 80 columns readable.
short_label = short_target


def sort_value(row: HistoryRow, key: str) -> Any:
    """What a column sorts by (missing numbers below every real one)."""
    values: dict[str, Any] = {
        "id": row.id,
        "build": row.label.lower(),
        "state": row.state,
        "started": row.started or 0.0,
        "time": row.duration_s if row.duration_s is not None else -1.0,
        "jobs": row.jobs or 0,
        "cpu": row.cpu_percent if row.cpu_percent is not None else -1.0,
        "peak": row.peak_rss if row.peak_rss is not None else -1,
    }
    return values[key]


def started_text(started: float | None, now: float) -> str:
    """When a build started, short enough for 80 columns: "14:05" today, "01-01 09:00" this
    year, the whole date before."""
    if not started:
        return "-"
    when, today = time.localtime(started), time.localtime(now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M", when)
    if when.tm_year == today.tm_year:
        return time.strftime("%m-%d %H:%M", when)
    return time.strftime("%Y-%m-%d %H:%M", when)


def cells(row: HistoryRow, marked: bool, now: float | None = None) -> tuple[str, ...]:
    """The table's cells for one build."""
    started = started_text(row.started, now or time.time())
    elapsed = row.duration_s
    if elapsed is None and row.active and row.started:
        elapsed = max(0.0, (now or time.time()) - row.started)
    return (
        "✓" if marked else "",
        str(row.id),
        # DataTable reads a str cell as markup: a build's name is data.
        escape(visible(short_label(row.label))),
        row.outcome,
        duration(elapsed),
        size(row.peak_rss) if row.peak_rss else "-",  # 0: no sample met the build
        f"{row.cpu_percent:.0f}%" if row.cpu_percent is not None else "-",
        str(row.jobs) if row.jobs else "-",
        started,
    )


def failure_line(row: HistoryRow | None) -> str:
    """The line under the table for the highlighted build: "#7 failed (exit 1): error: ..."."""
    if row is None or not row.failure:
        return ""
    return visible(f"#{row.id} {row.outcome}: {row.failure}")


def load_rows(state_directory: Path, limit: int = HISTORY_LIMIT) -> list[HistoryRow]:
    """The latest builds with their measurements (lost supervisors marked as `status` does)."""
    from workbench.supervision import liveness

    if not database_path(state_directory).exists():
        return []
    rows: list[HistoryRow] = []
    with History(state_directory) as history:
        for record in liveness.check(history, history.builds(limit=limit)):
            measured = history.measured(record.id, slowest=0)
            rows.append(
                HistoryRow(
                    id=record.id,
                    name=record.name,
                    variant=record.variant,
                    state=record.state,
                    active=record.active,
                    exit_status=record.exit_status,
                    signal=record.signal,
                    started=record.started,
                    duration_s=record.duration_s,
                    jobs=record.jobs,
                    cpu_percent=measured.cpu_utilisation if measured else None,
                    peak_rss=measured.peak_rss if measured else None,
                    note=record.note,
                    first_error=_first_error(record.progress_view.first_error),
                )
            )
    return rows


def _first_error(found: str | None) -> str | None:
    return found if found and found.strip() else None


def report_markdown(state_directory: Path, ids: list[int]) -> str:
    """`workbench report ID [ID2]`'s Markdown; a WorkbenchError for a build still running."""
    from workbench.reading import report

    with History(state_directory) as history:
        builds = [report.load(history, build_id) for build_id in ids]
    for facts in builds:
        if facts.record.active:
            raise WorkbenchError(
                f"build #{facts.record.id} is still {facts.record.state}; its measurements are "
                "recorded when it ends (Enter shows it live)"
            )
    return report.markdown(builds)


class ReportScreen(Screen[None]):
    """A report in Markdown, scrollable with the keyboard."""

    CSS_PATH = "../../styles/history.tcss"
    BINDINGS = [
        Binding("escape", "back", "Back", id="report.back", tooltip="Back to the history"),
    ]

    def __init__(self, title: str, markdown: str) -> None:
        super().__init__()
        self.title_text = title
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="report-scroll"):
            yield Static(Markdown(self.markdown), id="report-body")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = self.title_text
        self.query_one("#report-scroll").focus()

    def action_back(self) -> None:
        self.app.pop_screen()


class HistoryScreen(Screen[None]):
    """Past builds: open one, read its report, compare two."""

    CSS_PATH = "../../styles/history.tcss"
    BINDINGS = [
        Binding(
            "enter",
            "open_build",
            "Open",
            id="history.open",
            tooltip="Show the highlighted build: live if it runs, else as it ended",
            priority=True,  # before the table's own (hidden) Enter, so the footer shows it
        ),
        Binding(
            "r",
            "report",
            "Report",
            id="history.report",
            tooltip="What the highlighted build measured (`workbench report ID`)",
        ),
        Binding(
            "space",
            "toggle_mark",
            "Mark",
            id="history.mark",
            tooltip="Mark the highlighted build for a comparison (two at most)",
        ),
        Binding(
            "c",
            "compare",
            "Compare",
            id="history.compare",
            tooltip="The two marked builds side by side (`workbench report A B`)",
        ),
        Binding(
            "o",
            "next_sort",
            "Sort",
            id="history.sort",
            tooltip="Sort by the next column (id, build, state, time, RSS, CPU, jobs, started)",
        ),
        Binding(
            "O", "reverse_sort", "Reverse", id="history.reverse", show=False, tooltip="Reverse"
        ),
        Binding("escape", "back", "Back", id="history.back", tooltip="Leave the history"),
    ]

    class Loaded(Message):
        """The builds read from the history."""

        def __init__(self, rows: list[HistoryRow]) -> None:
            super().__init__()
            self.rows = rows

    class ReportReady(Message):
        """A report to show, or why there is none."""

        def __init__(self, title: str, markdown: str | None, error: str | None = None) -> None:
            super().__init__()
            self.title = title
            self.markdown = markdown
            self.error = error

    def __init__(self, state_directory: Path) -> None:
        super().__init__()
        self.state_directory = Path(state_directory)
        self.rows: list[HistoryRow] = []
        self.marked: list[int] = []  # in the order they were marked
        self.sort_key = "id"
        self.descending = True
        self.loads = 0
        self.narrow: bool | None = None  # which set of columns the table has

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="history-summary")
        yield SteadyTable(id="history-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="history-failure")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = "history"
        table = self.query_one("#history-table", DataTable)
        self._set_columns(self.app.size.width < WIDE_COLUMNS)
        table.focus()
        self.load()
        self.set_interval(RELOAD_WHILE_RUNNING_S, self._reload_if_running)

    def on_screen_resume(self) -> None:
        if self.loads:
            self.load()

    def _reload_if_running(self) -> None:
        if any(row.active for row in self.rows) and self.is_current:
            self.load()

    @work(thread=True, exclusive=True, group="history-load")
    def load(self) -> None:
        """Read the builds (off the event loop)."""
        try:
            rows = load_rows(self.state_directory)
        except WorkbenchError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        self.post_message(self.Loaded(rows))

    def on_history_screen_loaded(self, message: Loaded) -> None:
        self.loads += 1
        self.rows = message.rows
        known = {row.id for row in self.rows}
        self.marked = [build_id for build_id in self.marked if build_id in known]
        self._fill()

    def on_resize(self) -> None:
        narrow = self.size.width < WIDE_COLUMNS
        if narrow != self.narrow:
            self._set_columns(narrow)

    def _set_columns(self, narrow: bool) -> None:
        """The wide or the narrow set of columns, then the rows again."""
        self.narrow = narrow
        set_columns(self.query_one("#history-table", DataTable), COLUMNS, NARROW_KEYS, narrow)
        if self.rows:
            self._fill()

    def _fill(self) -> None:
        table = self.query_one("#history-table", DataTable)
        highlighted = self.highlighted_id()
        table.clear()
        at = clock.now(self.app)
        for row in sorted(
            self.rows, key=lambda r: sort_value(r, self.sort_key), reverse=self.descending
        ):
            keys = (key for _, key in COLUMNS)
            every = dict(zip(keys, cells(row, row.id in self.marked, at), strict=True))
            shown = [every[str(key.value)] for key in table.columns]
            table.add_row(*shown, key=str(row.id))
        if highlighted is not None and str(highlighted) in table.rows:
            table.move_cursor(row=table.get_row_index(str(highlighted)), animate=False)
        self._summarise()
        self._show_failure()

    def _summarise(self) -> None:
        if not self.rows:
            text = f"No builds yet in {database_path(self.state_directory)}."
        else:
            order = "↓" if self.descending else "↑"
            label = dict((key, label) for label, key in COLUMNS)[self.sort_key]
            text = f"{len(self.rows)} builds · sorted by {label} {order}"
            if self.marked:
                text += " · marked: " + ", ".join(f"#{build_id}" for build_id in self.marked)
                text += " (c compares)" if len(self.marked) == 2 else " (mark one more)"
        self.query_one("#history-summary", Static).update(text)

    @on(DataTable.RowHighlighted, "#history-table")
    def _show_failure(self) -> None:
        """Why the highlighted build failed, under the table (build output: Text, never markup)."""
        build_id = self.highlighted_id()
        row = next((row for row in self.rows if row.id == build_id), None)
        # Content built from a plain str is text, never markup; the CSS cuts it with an ellipsis.
        self.query_one("#history-failure", Static).update(Content(failure_line(row)))

    def highlighted_id(self) -> int | None:
        """The id of the highlighted build."""
        table = self.query_one("#history-table", DataTable)
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return int(key.value) if key.value and key.value.isdigit() else None

    # -- actions --------------------------------------------------------------------------------

    @on(DataTable.RowSelected, "#history-table")
    def _row_selected(self) -> None:
        self.action_open_build()

    def action_open_build(self) -> None:
        build_id = self.highlighted_id()
        if build_id is not None:
            self.app.open_build(build_id)  # type: ignore[attr-defined]

    def action_toggle_mark(self) -> None:
        build_id = self.highlighted_id()
        if build_id is None:
            return
        if build_id in self.marked:
            self.marked.remove(build_id)
        else:
            self.marked.append(build_id)
            if len(self.marked) > 2:  # the oldest mark gives way
                self.marked.pop(0)
        self._fill()

    def action_report(self) -> None:
        build_id = self.highlighted_id()
        if build_id is not None:
            self.make_report([build_id])

    def action_compare(self) -> None:
        ids = list(self.marked)
        highlighted = self.highlighted_id()
        if len(ids) == 1 and highlighted is not None and highlighted not in ids:
            ids.append(highlighted)
        if len(ids) != 2:
            self.notify(
                "Mark two builds with space (or one, and highlight the other), then press c",
                severity="warning",
            )
            return
        self.make_report(sorted(ids))

    @work(thread=True, exclusive=True, group="history-report")
    def make_report(self, ids: list[int]) -> None:
        """Build the report's Markdown off the event loop."""
        title = f"report #{ids[0]}" if len(ids) == 1 else f"#{ids[0]} against #{ids[1]}"
        try:
            markdown = report_markdown(self.state_directory, ids)
        except WorkbenchError as exc:
            self.post_message(self.ReportReady(title, None, str(exc)))
            return
        self.post_message(self.ReportReady(title, markdown))

    def on_history_screen_report_ready(self, message: ReportReady) -> None:
        if message.markdown is None:
            self.notify(message.error or "no report", severity="warning", timeout=8, markup=False)
            return
        self.app.push_screen(ReportScreen(message.title, visible_lines(message.markdown)))

    def action_next_sort(self) -> None:
        position = SORT_KEYS.index(self.sort_key)
        self._sort(SORT_KEYS[(position + 1) % len(SORT_KEYS)])

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self._fill()

    def _sort(self, key: str) -> None:
        self.sort_key = key
        self.descending = key not in _TEXT_KEYS
        self._fill()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key not in SORT_KEYS:
            return
        if key == self.sort_key:
            self.action_reverse_sort()
        else:
            self._sort(key)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
