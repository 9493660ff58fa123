"""The build screen: one build live (or as it ended): progress, graphs, processes, the log.

A worker thread with its own `History` polls the build's row about once a second (the
supervisor rewrites progress and the live view as often) and posts what it found; the screen
only draws. Opening a build that already ran backfills the graphs from its stored samples once.
Stopping takes the same path as `workbench stop` (`supervision.control.stop`), in a worker;
leaving the screen (or quitting) never stops the build.

A build is flagged as stalled as `workbench.supervision.stall.StallWatch` decides (plain values,
tested without a screen); its words with no Textual in them are in `workbench.reading.build_text`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Header, Input, ProgressBar, Static

from workbench.errors import WorkbenchError
from workbench.history.records import BuildRecord, EdgeRow, JobRow, Sampled, cpu_measured
from workbench.history.store import History
from workbench.progress.live_view import LiveView
from workbench.progress.visible import visible
from workbench.reading.build_text import head_lines, memory, percent, progress_line, sizes_text
from workbench.reading.follow import contention_text, outcome_line
from workbench.supervision.stall import (
    POLL_INTERVAL_S,
    ProcessRow,
    Stall,
    StallWatch,
    last_progress_change,
    read_states,
    slowest_earlier_job,
    stall_threshold,
)
from workbench.tui.commands import ScreenCommands
from workbench.tui.cropped_compositor import CroppedCompositor
from workbench.tui.screens.build.build_modals import ConfirmStop, NoticesScreen
from workbench.tui.screens.build.build_tree import TreeReader
from workbench.tui.screens.build.host_line import host_forms
from workbench.tui.screens.build.timeline import Timeline, ended_timeline
from workbench.tui.widgets.key_footer import KeyFooter
from workbench.tui.widgets.log_view import LogView
from workbench.tui.widgets.parallelism_graph import ParallelismGraph
from workbench.tui.widgets.process_table import ProcessTable
from workbench.tui.widgets.still_progress import StillProgressBar
from workbench.tui.widgets.time_graph import TimeGraph

STOP_GRACE_S = 10.0  # what `workbench stop` waits before KILL by default
FINISHED_JOBS_SHOWN = 1000

# -- what the poller hands the screen -----------------------------------------------------------


@dataclass(frozen=True)
class Poll:
    """One look at the build: its row, its processes (or finished jobs), a stall if any."""

    record: BuildRecord
    processes: tuple[ProcessRow, ...]
    finished: bool
    stall: Stall | None = None
    artefacts: dict[str, Any] | None = None  # what a finished Nix/Flox build produced
    peak_rss: int | None = None  # a finished build's measured peak (history's figure)
    timeline: Timeline | None = None  # a finished build's graphs, on one grid of its time
    head: HeadView | None = None  # the record's lines, formatted in the worker
    exact_times: int = 0  # a finished build's jobs whose time is their edge's in .ninja_log


def with_exact_times(jobs: Sequence[JobRow], edges: Sequence[EdgeRow]) -> tuple[list[JobRow], int]:
    """A finished build's jobs, slowest first, each timed as `.ninja_log` times the edge that
    compiled its file (the edge of that source whose start is nearest the job's, within a
    second), and how many were. A sampled time runs from the job's start to the last 1 Hz
    sample that saw it: up to a second short, "0.0s" for a job seen once."""
    from workbench.analysis.edges import source_of

    # A compile's file is its source; a link's is what it writes (the edge's output).
    by_name: dict[str, list[tuple[str, EdgeRow]]] = {}
    for edge in edges:
        source = source_of(edge.outputs[0]) if edge.outputs else None
        for path in ([source] if source else []) + list(edge.outputs):
            by_name.setdefault(os.path.basename(path), []).append((path, edge))
    timed: list[JobRow] = []
    exact = 0
    for job in jobs:
        file = job.file or ""
        near = [
            edge
            for path, edge in by_name.get(os.path.basename(file), ())
            if file
            and (file == path or file.endswith(os.sep + path) or path.endswith(os.sep + file))
            and edge.started - 1.0 <= job.started <= edge.ended + 1.0
        ]
        if near:
            edge = min(near, key=lambda edge: abs(edge.started - job.started))
            job = dataclasses.replace(job, seconds=max(0.0, edge.ended - edge.started))
            exact += 1
        timed.append(job)
    timed.sort(key=lambda job: -job.seconds)
    return timed, exact


def finished_jobs_title(count: int, exact: int) -> str:
    """The job table's title for an ended build: whether its times are exact or sampled (its
    peak RSS is always the samples': a job shorter than the sampling interval may have been
    seen once, at its driver's start)."""
    if count and exact >= count:
        return "Jobs, times exact, RSS sampled, slowest first"  # times from .ninja_log
    if exact:
        return f"Sampled jobs, {exact} timed exactly, slowest first"
    return "Sampled jobs of this build, slowest first"


@dataclass(frozen=True)
class HeadView:
    """What the head of the screen shows of one look at the build, made in the poll's worker
    (the row's JSON parsed into its typed views, every line formatted) so that the event loop
    only compares and draws."""

    state: str
    active: bool
    title: Text
    detail: Text
    progress_wide: Text  # with what the ETA rests on
    progress_narrow: Text
    fraction: float | None
    first_error: str | None
    progress_key: tuple[Any, ...]  # what the stall watch compares between looks
    live: LiveView
    host: tuple[str, ...]  # the supervisor's line on the rest of this host, longest form first

    @classmethod
    def of(
        cls,
        record: BuildRecord,
        artefacts: dict[str, Any] | None = None,
        peak_rss: int | None = None,
    ) -> HeadView:
        """Format the record's head lines; build output as data (Text, never markup, no
        control character left to act)."""
        title, detail = head_lines(record)
        produced = sizes_text(artefacts)
        if produced:
            detail = f"{detail} · {produced}" if detail else produced
        progress = record.progress_view
        live = record.live_view
        return cls(
            state=record.state,
            active=record.active,
            title=Text(visible(title)),
            detail=Text(visible(detail)),
            progress_wide=Text(visible(progress_line(record, basis=True, peak_rss=peak_rss))),
            progress_narrow=Text(visible(progress_line(record, basis=False, peak_rss=peak_rss))),
            fraction=progress.fraction,
            first_error=progress.first_error,
            progress_key=progress.key(),
            live=live,
            host=host_forms(live) if record.active else (),
        )


_POLLING = threading.local()


def polling_history(state_directory: Path) -> History:
    """This worker thread's History of `state_directory`, opened on its first poll and kept
    open for the next ones (the poll's workers run on a pool's threads; an SQLite connection
    stays with the thread that opened it). Opening one each second ran the schema's check
    each time: a third of the poll's own CPU, py-spy."""
    histories: dict[Path, History] | None = getattr(_POLLING, "histories", None)
    if histories is None:
        histories = _POLLING.histories = {}
    history = histories.get(state_directory)
    if history is None or history.full:  # read-only after a full disk: try again
        for other in list(histories):  # one open History a thread, of the last one polled
            forget_polling_history(other)
        history = histories[state_directory] = History(state_directory)
    return history


def forget_polling_history(state_directory: Path) -> None:
    """Close this thread's History of `state_directory` (after an error: the next poll opens
    it again)."""
    histories: dict[Path, History] = getattr(_POLLING, "histories", {})
    history = histories.pop(state_directory, None)
    if history is not None:
        with contextlib.suppress(Exception):
            history.close()


def sampled_jobs(compile_jobs: int | None, link_jobs: int | None) -> float:
    """The build's jobs running at a sample (compile jobs count CUDA ones already)."""
    return float((compile_jobs or 0) + (link_jobs or 0))


# -- screens ---------------------------------------------------------------------------------------


def notice_line(notices: Sequence[str]) -> Text:
    """The launch's notices as one line: the first summary, the key for the rest first so that
    a narrow terminal cuts the summary, not the key."""
    summaries = [line for line in notices if not line.startswith(" ")]
    if not summaries:
        return Text("")
    more = f" (+{len(summaries) - 1})" if len(summaries) > 1 else ""
    return Text.assemble(("w", "bold"), f": details{more} · ", summaries[0])


class BuildScreen(Screen[None]):
    """Progress, CPU and memory graphs, the processes and the log of one build."""

    CSS_PATH = "../../styles/build.tcss"
    COMMANDS = {ScreenCommands}
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    # At 80 columns these give way before the build's own keys and History: the matrix is for
    # fleets, a click on a process column's header sorts too, and the notices' key is named on
    # the header's own line where there are any ("w: details"); `?` lists all three.
    FOOTER_GIVES_WAY_FIRST = ("matrix", "next_sort", "notices")
    BINDINGS = [
        Binding(
            "x",
            "stop_build",
            "Stop",
            id="build.stop",
            tooltip="Stop the build and every process of it (asks first), as `workbench stop`",
        ),
        Binding(
            "d",
            "debug",
            "Debug",
            id="build.debug",
            tooltip="Capture the highlighted (or stalled) process's stacks and diagnose a hang",
        ),
        Binding(
            "a",
            "all_processes",
            "All",
            id="build.all-processes",
            tooltip="Every process of the build (a test binary, a script), not only compilers, "
            "linkers and builders; d debugs any of them",
        ),
        Binding(
            "escape,l",
            "leave",
            "Leave",
            id="build.leave",
            tooltip="Back to the previous screen; the build keeps running",
        ),
        Binding(
            "p",
            "switch_pane",
            "Log",
            id="build.pane",
            tooltip="Switch between the process table and the log (move focus when both show)",
        ),
        Binding(
            "slash",
            "search",
            "Search",
            id="build.search",
            tooltip="Search the log; n and N go to the next and previous match",
        ),
        Binding("n", "next_match", "Next", id="build.next", show=False),
        Binding("N", "previous_match", "Previous", id="build.previous", show=False),
        Binding(
            "e",
            "first_error",
            "Error",
            id="build.first-error",
            tooltip="Jump to the build's first error (the one history shows), else to the first "
            "line that reads like an error",
        ),
        Binding(
            "w",
            "notices",
            "Notices",
            id="build.notices",
            tooltip="What the launch said about this host: other builds running, memory",
        ),
        Binding(
            "k",
            "smoke",
            "Smoke",
            id="build.smoke",
            tooltip="Run the built variant's smoke check (import onnxruntime, a tiny model on "
            "every provider), as `workbench smoke NAME`",
        ),
    ]

    class Loaded(Message):
        """The build's row and its stored samples, read once when the screen opens."""

        def __init__(
            self,
            record: BuildRecord,
            samples: list[Sampled],
            threshold_s: float,
            head: HeadView | None = None,
        ) -> None:
            super().__init__()
            self.record = record
            self.samples = samples
            self.threshold_s = threshold_s
            self.head = head if head is not None else HeadView.of(record)

    class Polled(Message):
        """One poll's result."""

        def __init__(self, poll: Poll) -> None:
            super().__init__()
            self.poll = poll

    class Failed(Message):
        """The build cannot be shown (no such build, an unreadable history)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class SmokeDone(Message):
        """The smoke run of the built variant ended: its one-line verdict."""

        def __init__(self, text: str, ok: bool) -> None:
            super().__init__()
            self.text = text
            self.ok = ok

    class Stopped(Message):
        """The stop asked for ended: what to tell the user."""

        def __init__(self, text: str, ok: bool) -> None:
            super().__init__()
            self.text = text
            self.ok = ok

    def __init__(self, state_directory: Path, build_id: int, notices: tuple[str, ...] = ()) -> None:
        super().__init__()
        # Each frame draws only the rows it changes (the title's clock: one line a second).
        self._compositor = CroppedCompositor()
        self.state_directory = Path(state_directory)
        self.build_id = build_id
        self.notices = notices
        self.show_all = False  # every process of the build, not only the build tools
        self.process_tree = TreeReader()
        self.record: BuildRecord | None = None
        self.stall: Stall | None = None
        self.stopping = False
        self.pane = "processes"  # which pane a short terminal shows
        self.artefacts: dict[str, Any] | None = None
        self.smoking = False
        self.polls = 0
        self.stall_watch: StallWatch | None = None
        self._polling = False
        self._timer: Timer | None = None
        self._host_shown = False
        self._shown: dict[str, Text] = {}  # what each line of the head shows now
        self._shown_title = ""  # the process table's border title, as last set
        self.peak_rss: int | None = None  # an ended build's measured peak, once polled
        # The panes (processes, graphs, log) are drawn every `refresh` seconds: what the polls
        # found meanwhile waits here (the latest poll, every live sample since the last draw).
        self._pending: Poll | None = None
        self._samples: list[tuple[float, LiveView]] = []  # (its time, the live view)
        self._polls_since_panes = 0
        self._panes_due = True  # the first poll's panes are drawn at once

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="build-head"):
            yield Static(f"#{self.build_id} …", id="build-title")
            yield Static("", id="build-detail")
        with Horizontal(id="build-progress-row"):
            yield StillProgressBar(total=None, show_eta=False, id="build-bar")
            yield Static("", id="build-progress-text")
        yield Static(notice_line(self.notices), id="build-notice")
        yield Static("", id="build-smoke", classes="-empty")
        yield Static("", id="build-stall")
        with Horizontal(id="build-graphs"):
            yield TimeGraph("CPU", percent, 100.0, scale_label="of all cores", id="build-cpu")
            # Its scale (RSS plus what is still available) comes with the first sample.
            yield TimeGraph(
                "Memory",
                memory,
                0.0,
                limit_fraction=0.9,
                autoscale=True,
                peak_columns=True,
                id="build-memory",
            )
            yield ParallelismGraph(id="build-edges")
        with Vertical(id="build-panes"):
            yield ProcessTable(id="build-processes")
            # Taken in with each poll (no timer of its own while the log is quiet).
            yield LogView(id="build-log", title="Log", driven=True)
        yield Input(placeholder="search the log (Enter finds, Esc closes)", id="build-search")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = f"build #{self.build_id}"
        self.query_one("#build-processes").border_title = "Processes"
        if not self.query_one(LogView).border_title:
            self.query_one(LogView).border_title = "Log"
        cpu_tip = "CPU the build's processes use, as a share of all cores, once a second"
        self.query_one("#build-cpu").tooltip = cpu_tip
        self.query_one("#build-memory").tooltip = (
            "Total RSS of the build's processes over the whole build, scaled to its own sampled "
            "peak (the peak history and report show); 'of' is that plus the memory still "
            "available (host or cgroup); near that it turns to warning colour"
        )
        self.query_one("#build-edges").tooltip = (
            "Edges (compile and link commands) running at each second; the dotted line is the "
            "job limit (-j): columns below it are job slots left idle. Live it counts the "
            "build's compile and link jobs once a second (sampled); once a ninja build ends, "
            "its exact edges from .ninja_log"
        )
        self.query_one("#build-notice").set_class(not self.notices, "-empty")
        self.add_class("-processes-pane")
        self.query_one("#build-processes", ProcessTable).focus()
        self.load_build()

    # -- polling (worker threads) ----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="build-load")
    def load_build(self) -> None:
        """Read the build's row, its stored samples and what earlier builds took, once."""
        try:
            with History(self.state_directory) as history:
                record = history.get(self.build_id)
                samples = history.samples(self.build_id)
                slowest = slowest_earlier_job(history, record)
        except WorkbenchError as exc:
            self.post_message(self.Failed(str(exc)))
            return
        self.post_message(
            self.Loaded(record, samples, stall_threshold(slowest), HeadView.of(record))
        )

    def _tick(self) -> None:
        if self._polling or self.record is None:
            return
        self._polling = True
        self.poll_build()

    @work(thread=True, exclusive=True, group="build-poll")
    def poll_build(self) -> None:
        """One look at the build (through this worker thread's own History, kept open between
        polls); posts a `Polled`."""
        from workbench.supervision import liveness

        try:
            history = polling_history(self.state_directory)
            record = liveness.check(history, [history.get(self.build_id)])[0]
            if not record.active:
                edges = history.edges(self.build_id)
                jobs, exact_times = with_exact_times(history.jobs(self.build_id), edges)
                rows = tuple(ProcessRow.from_job(job) for job in jobs[:FINISHED_JOBS_SHOWN])
                produced = history.artefacts(self.build_id)
                measured = history.measured(self.build_id, slowest=0)
                spans = [(edge.started, edge.ended) for edge in edges]
                timeline = ended_timeline(
                    record.started, record.ended, history.samples(self.build_id), spans
                )
                peak = measured.peak_rss if measured is not None else None
                self.post_message(
                    self.Polled(
                        Poll(
                            record,
                            rows,
                            True,
                            artefacts=produced,
                            timeline=timeline,
                            peak_rss=peak,
                            head=HeadView.of(record, produced, peak),
                            exact_times=exact_times,
                        )
                    )
                )
                return
        except WorkbenchError as exc:
            forget_polling_history(self.state_directory)
            self.post_message(self.Failed(str(exc)))
            return
        if self.show_all:
            # Adopted: the build is its keeper's child, not the new supervisor's.
            root = record.build_pid if record.adopted else None
            rows = self.process_tree.rows(record.supervisor_pid, root_pid=root)
            self.post_message(self.Polled(Poll(record, rows, False, head=HeadView.of(record))))
            return
        head = HeadView.of(record)
        live_jobs = head.live.jobs
        states = read_states(job.pid for job in live_jobs if job.pid is not None)
        rows = tuple(ProcessRow.from_view(job, states.get(job.pid or 0)) for job in live_jobs)
        self.post_message(self.Polled(Poll(record, rows, False, head=head)))

    # -- drawing (event loop) -------------------------------------------------------------------

    def on_build_screen_loaded(self, message: Loaded) -> None:
        record = message.record
        self.record = record
        self.stall_watch = StallWatch(
            message.threshold_s, last_progress_change(message.samples) if record.active else None
        )
        self.query_one(LogView).open(Path(record.log_path))
        self.query_one(ProcessTable).base = record.cwd
        cpu = self.query_one("#build-cpu", TimeGraph)
        rss = self.query_one("#build-memory", TimeGraph)
        edges = self.query_one(ParallelismGraph)
        edges.jobs = record.jobs
        # The whole build: the graphs fold it into their columns (O(1) per sample).
        measured = cpu_measured(message.samples)
        for sample, cpu_known in zip(message.samples, measured, strict=True):
            cpu.add(sample.cpu_percent if cpu_known else math.nan, t=sample.t)
            rss.add(sample.rss, float(sample.rss + sample.memory_available), t=sample.t)
            edges.show_sampled(sampled_jobs(sample.compile_jobs, sample.link_jobs), sample.t)
        for graph in (cpu, rss, edges):
            graph.live = record.active
        self._show_head(message.head)
        self._tick()
        self._timer = self.set_interval(POLL_INTERVAL_S, self._tick)

    def on_build_screen_polled(self, message: Polled) -> None:
        poll = message.poll
        self._polling = False
        self.polls += 1
        self.record = poll.record
        if poll.artefacts is not None:
            self.artefacts = poll.artefacts
        if poll.peak_rss is not None:
            self.peak_rss = poll.peak_rss
        head = poll.head if poll.head is not None else HeadView.of(poll.record)
        self._show_head(head, whole=False)  # the clock each second; the rest with the panes
        live = head.live
        if head.active and live.t is not None:
            # Every sample is kept (the graphs' columns are seconds), drawn with the panes.
            self._samples.append((live.t, live))
        stall = None
        if head.active and self.stall_watch is not None:
            stall = self.stall_watch.observe(time.time(), head.progress_key, poll.processes)
        if (stall is None) != (self.stall is None):
            self._panes_due = True  # a stall found or gone: its row is marked (or not) at once
        self._show_stall(stall)
        self._pending = poll
        self._polls_since_panes += 1
        if f"sorted by {self.query_one(ProcessTable).sort_label}" not in self._shown_title:
            self._panes_due = True  # sorted by a key (o, O): the title says so at once
        if (
            self._panes_due
            or poll.finished
            or poll.timeline is not None
            or self._polls_since_panes * POLL_INTERVAL_S >= self._panes_refresh_s() - 0.01
        ):
            self._show_panes()

    def _show_timeline(self, timeline: Timeline) -> None:
        """An ended build's graphs, all three on one grid: each spans the build's start (the
        left edge, "0s") to its end (the end label), so their time axes agree."""
        on = timeline.grid
        cpu = self.query_one("#build-cpu", TimeGraph)
        rss = self.query_one("#build-memory", TimeGraph)
        edges = self.query_one(ParallelismGraph)
        cpu.show_series(timeline.cpu, on.first_t, on.interval_s)
        rss.show_series(timeline.memory, on.first_t, on.interval_s, timeline.memory_scale)
        if timeline.exact:
            edges.show_exact(timeline.edges, on.first_t, on.interval_s)
        else:
            edges.show_series(timeline.edges, on.first_t, on.interval_s)
        for graph in (cpu, rss, edges):
            graph.frame = timeline.frame

    def _panes_refresh_s(self) -> float:
        """Seconds between redraws of the panes: the per-user `refresh` (htop's -d)."""
        return float(getattr(self.app, "panes_refresh_s", POLL_INTERVAL_S))

    def _show_panes(self) -> None:
        """Draw what the polls since the last redraw found: the head's lines but the title (what
        runs now, progress and ETA, the bar), the processes, every sample taken meanwhile into
        the graphs, the log's new lines. Each poll's title (its clock, the build's state) is
        drawn at once; the rest, most of a frame's lines (a live build changes nearly every row
        of them each second), every `refresh` seconds (the per-user setting, 2 by default), and
        with the next poll after a key that changes them."""
        poll = self._pending
        if poll is None:
            return
        self._pending = None
        self._panes_due = False
        self._polls_since_panes = 0
        stall = self.stall
        self._show_head(poll.head if poll.head is not None else HeadView.of(poll.record))
        # The log's new lines in the same frame as the rest of the panes (between polls the
        # view takes them in itself only when many wait).
        self.query_one(LogView).take_in_new_lines(now=True)
        samples, self._samples = self._samples, []
        if samples:
            cpu = self.query_one("#build-cpu", TimeGraph)
            rss = self.query_one("#build-memory", TimeGraph)
            edges = self.query_one(ParallelismGraph)
            graphs = (cpu, rss, edges)
            for graph in graphs:
                graph.holding = True
            try:
                for t, live in samples:
                    cpu.add(math.nan if live.cpu_percent is None else live.cpu_percent, t=t)
                    rss.add(float(live.rss), live.memory_scale, t=t)
                    edges.show_sampled(sampled_jobs(live.compile_jobs, live.link_jobs), t)
            finally:
                for graph in graphs:
                    graph.holding = False
                    graph.draw_changed()
        if poll.timeline is not None:
            self._show_timeline(poll.timeline)
        table = self.query_one(ProcessTable)
        if poll.finished and table.sort_key == "cpu":
            table.sort_key, table.descending = "time", True
        table.show(poll.processes, flagged=stall.pid if stall else None)
        what = (
            finished_jobs_title(len(poll.processes), poll.exact_times)
            if poll.finished
            else "All processes (a: build tools only)"
            if self.show_all
            else "Build tools (a: every process)"
        )
        title = f"{what} · {len(poll.processes)} · sorted by {table.sort_label}"
        every = self._panes_refresh_s()
        if not poll.finished and every > POLL_INTERVAL_S:
            title += f" · every {every:g}s"  # sampled each second, drawn this often
        self._set_border_title(table, title)
        if poll.finished:
            for graph in self.query(TimeGraph):
                graph.live = False
            if not poll.processes and self.pane == "processes":
                self.action_switch_pane()  # no job to list: the log says more
            if self._timer is not None:
                self._timer.stop()
            self.refresh_bindings()

    def on_build_screen_failed(self, message: Failed) -> None:
        self._polling = False
        self.query_one("#build-title", Static).update(Text(f"#{self.build_id}: {message.text}"))

    def _show_head(self, head: HeadView, whole: bool = True) -> None:
        """The head's lines: the title (its clock, the state) always; with `whole`, the rest
        (what runs now, progress and ETA, the bar, the host's other builds), which come with the
        panes' drawing (`_show_panes`) on a live build."""
        # Formatted in the worker; here each line is drawn only where its text changed, and
        # without a layout of the screen where its height cannot have changed.
        self.query_one(LogView).recorded_error = head.first_error
        self._set_text("#build-title", head.title)
        for state in ("running", "succeeded", "failed", "stopped"):
            self.set_class(head.state == state, f"-{state}")
        sub_title = f"build #{self.build_id} · {head.state}"
        if self.sub_title != sub_title:
            self.sub_title = sub_title
        if not whole:
            return
        self._set_text("#build-detail", head.detail)
        # What the ETA rests on only where the whole line fits on one row: cut, it read
        # "· ETA …"; the figures alone wrap onto a second row where they need one.
        progress = head.progress_narrow
        if self.has_class("-wide"):
            room = self.query_one("#build-progress-text", Static).content_region.width
            if head.progress_wide.cell_len <= room:
                progress = head.progress_wide
        self._set_text("#build-progress-text", progress)
        bar = self.query_one("#build-bar", ProgressBar)
        if head.fraction is not None:
            # In whole percent cut down, as the text beside it: the bar's label rounds (Textual's
            # PercentageStatus), so 299 of 300 edges in thousandths was "100%" beside "(99%)".
            bar.update(total=100, progress=math.floor(100 * head.fraction + 1e-9))
        elif not head.active:
            # An ended build with no progress lines: a full bar for success, an empty one else.
            bar.update(total=1000, progress=1000 if head.state == "succeeded" else 0)
        if not self.notices:
            # A build started from the CLI has no launch notices: its supervisor's view of the
            # other builds on this host takes their place (the line attach prints where it
            # fits, else the longest shorter form that does).
            host = self._host_line(head.host)
            self._set_text("#build-notice", host)
            self.query_one("#build-notice", Static).set_class(not host.plain, "-empty")
            if bool(host.plain) != self._host_shown:
                self._host_shown = bool(host.plain)
                self.refresh_bindings()  # w: the other builds, now there are some

    def _host_line(self, forms: Sequence[str]) -> Text:
        """The notice line of the first of `forms` whole at the line's width (the last, cut,
        where none is); an empty Text where there are none."""
        lines = [notice_line([form]) for form in forms]
        if not lines:
            return Text("")
        # Hidden until it has a line, the Static has no width yet: the screen's less its padding.
        room = self.query_one("#build-notice", Static).content_region.width or self.size.width - 2
        return next((line for line in lines if line.cell_len <= room), lines[-1])

    def _set_text(self, selector: str, text: Text) -> None:
        """Show `text` in a Static only if it differs from what it shows; lay the screen out
        again only where the line's height may change (it wraps, or did, at this width)."""
        before = self._shown.get(selector)
        if before is not None and before == text:
            return
        self._shown[selector] = text
        static = self.query_one(selector, Static)
        width = static.content_region.width
        one_line = before is not None and width > 0 and "\n" not in text.plain
        if one_line and before is not None and static.styles.text_wrap != "nowrap":
            one_line = before.cell_len <= width and text.cell_len <= width
        static.update(text, layout=not one_line)

    def _set_border_title(self, widget: ProcessTable, title: str) -> None:
        """A border title set repaints its whole widget, the same title too: set it only when
        it changes."""
        if self._shown_title != title:
            self._shown_title = title
            widget.border_title = title

    def _show_stall(self, stall: Stall | None) -> None:
        self.stall = stall
        banner = self.query_one("#build-stall", Static)
        banner.set_class(stall is not None, "-shown")
        if stall is None:
            return
        if self._can_debug():
            hint = f"Press d to capture its stacks (process {stall.pid} is marked ⚠ below)."
        else:
            hint = f"See its stacks: `workbench bt {stall.pid}`."
        banner.update(Text(visible(stall.describe(hint))))

    def on_data_table_header_selected(self) -> None:
        table = self.query_one(ProcessTable)
        title = str(table.border_title or "Processes").split(" · sorted by")[0]
        self._set_border_title(table, f"{title} · sorted by {table.sort_label}")

    # -- actions --------------------------------------------------------------------------------

    def _can_debug(self) -> bool:
        return hasattr(self.app, "open_debug")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # False hides a key that cannot apply here; None shows it disabled for now.
        if action == "stop_build":
            if self.record is not None and not self.record.active:
                return False
            return None if self.stopping else True
        if action == "all_processes":
            return self.record is None or self.record.active
        if action == "notices":
            return bool(self.notices or self._host_lines())
        if action == "smoke":
            if not self._can_smoke():
                return False
            return None if self.smoking else True
        if action == "debug":
            if not self._can_debug() or (self.record is not None and not self.record.active):
                return False
            return True if self._debug_pid() is not None else None
        return True

    def _can_smoke(self) -> bool:
        record = self.record
        return (
            record is not None
            and record.state == "succeeded"
            and record.variant is not None
            and record.backend in ("nix", "flox")
        )

    def action_smoke(self) -> None:
        if not self._can_smoke() or self.smoking:
            return
        self.smoking = True
        self._show_smoke("smoke: running… (import onnxruntime, the tiny model on each provider)")
        self.refresh_bindings()
        self.run_smoke()

    @work(thread=True, exclusive=True, group="build-smoke")
    def run_smoke(self) -> None:
        """`workbench smoke NAME` for the variant this build made, in a worker thread."""
        from workbench.artefacts.smoke_target import require_providers, resolve
        from workbench.debugging.smoke import smoke_python

        record = self.record
        assert record is not None and record.variant is not None
        try:
            with History(self.state_directory) as history:
                target = resolve(record.variant, Path(record.cwd), history)
            result = smoke_python(target.python)
        except (WorkbenchError, OSError) as exc:
            self.post_message(self.SmokeDone(f"smoke: could not run: {exc}", False))
            return
        cuda = "-cuda" in record.variant
        why = require_providers(result.check, cuda) if result.status == "passed" else None
        status = "failed" if why else result.status
        text = f"smoke {status.upper()}: {why or result.message} · {target.said}"
        self.post_message(self.SmokeDone(text, status == "passed"))

    def on_build_screen_smoke_done(self, message: SmokeDone) -> None:
        self.smoking = False
        self._show_smoke(message.text, ok=message.ok)
        self.notify(message.text, severity="information" if message.ok else "error", markup=False)
        self.refresh_bindings()

    def _show_smoke(self, text: str, ok: bool | None = None) -> None:
        line = self.query_one("#build-smoke", Static)
        line.update(Text(visible(text)))
        line.set_class(False, "-empty")
        line.set_class(ok is True, "-passed")
        line.set_class(ok is False, "-failed")

    def action_all_processes(self) -> None:
        """Switch between the build tools (the supervisor's view) and every process."""
        self.show_all = not self.show_all
        self.notify(
            "Every process of the build" if self.show_all else "Compilers, linkers and builders"
        )
        self._panes_due = True  # the next poll's processes are drawn at once
        # The toast says the key was taken; the look at the processes (a worker, then the
        # table refilled, the longest frame of the screen) comes after the frame that draws it
        # (the toast is mounted in one refresh and drawn in the next), not before it.
        self.call_after_refresh(self.call_after_refresh, self._tick)

    def action_notices(self) -> None:
        """Every line the launch said about the host (or, for a build started elsewhere, what
        its supervisor measured of the rest of the host), in a dialog."""
        self.app.push_screen(NoticesScreen(self.notices or tuple(self._host_lines())))

    def _host_lines(self) -> list[str]:
        """What the supervisor's census and contention say of the other builds on this host."""
        if self.record is None:
            return []
        live = self.record.live_view
        lines = [contention_text(live)]
        if live.other is not None and live.other.summary:
            lines.append(live.other.summary)
        return [visible(line) for line in lines if line]

    def action_leave(self) -> None:
        search = self.query_one("#build-search", Input)
        if search.has_class("-shown"):
            self._close_search()
            return
        # The build belongs to its supervisor: leaving only stops watching it.
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_switch_pane(self) -> None:
        table, log = self.query_one(ProcessTable), self.query_one(LogView)
        self.pane = "log" if self.pane == "processes" else "processes"
        self.set_class(self.pane == "log", "-log-pane")
        self.set_class(self.pane == "processes", "-processes-pane")
        (log if self.pane == "log" else table).focus()

    def _show_log(self) -> LogView:
        if self.pane != "log":
            self.action_switch_pane()
        return self.query_one(LogView)

    def action_search(self) -> None:
        self._show_log()
        search = self.query_one("#build-search", Input)
        search.add_class("-shown")
        search.focus()

    def _close_search(self) -> None:
        self.query_one("#build-search", Input).remove_class("-shown")
        self.query_one(LogView).focus()

    @on(Input.Submitted, "#build-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        self._close_search()
        if text:
            self.query_one(LogView).search(text)

    def action_next_match(self) -> None:
        log = self._show_log()
        if log.search_text:
            log.search(log.search_text)
        else:
            self.action_search()

    def action_previous_match(self) -> None:
        log = self._show_log()
        if log.search_text:
            log.search(log.search_text, backwards=True)

    def action_first_error(self) -> None:
        self._show_log().focus()
        self.query_one(LogView).first_error()

    def _debug_pid(self) -> int | None:
        pid = self.query_one(ProcessTable).selected_pid()
        if pid is None and self.stall is not None:
            pid = self.stall.pid
        return pid

    def action_debug(self) -> None:
        pid = self._debug_pid()
        if pid is None or not self._can_debug():
            self.notify("No running process selected to debug", severity="warning")
            return
        self.app.open_debug(pid)  # type: ignore[attr-defined]

    def action_stop_build(self) -> None:
        record = self.record
        if record is None or not record.active or self.stopping:
            return
        question = (
            f"Stop build #{record.id} ({visible(record.name)})?\n\n"
            f"TERM to its process group and every process of its tree, KILL after "
            f"{STOP_GRACE_S:g} s: the same as `workbench stop {record.id}`."
        )
        self.app.push_screen(ConfirmStop(question), self._confirmed)

    def _confirmed(self, yes: bool | None) -> None:
        if not yes:
            return
        self.stopping = True
        self.refresh_bindings()
        self.notify(f"Stopping build #{self.build_id}…")
        self.stop_build()

    @work(thread=True, exclusive=True, group="build-stop")
    def stop_build(self) -> None:
        """`workbench stop ID`'s path: liveness check, then `control.stop`, off the event loop."""
        from workbench.supervision import control, liveness

        try:
            with History(self.state_directory) as history:
                record = liveness.check(history, [history.get(self.build_id)])[0]
                record, survivors = control.stop(history, record, STOP_GRACE_S)
        except WorkbenchError as exc:
            self.post_message(self.Stopped(str(exc), False))
            return
        if survivors:
            listing = ", ".join(f"{m.name} ({m.pid})" for m in survivors[:10])
            self.post_message(
                self.Stopped(f"{outcome_line(record)}; still running: {listing}", False)
            )
        else:
            self.post_message(
                self.Stopped(f"{outcome_line(record)}; no process of it is left", True)
            )

    def on_build_screen_stopped(self, message: Stopped) -> None:
        self.stopping = False
        self.notify(
            visible(message.text),
            severity="information" if message.ok else "error",
            timeout=10,
            markup=False,  # the stop's outcome carries the build's note: data, not markup
        )
        self.refresh_bindings()

    def palette_commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) for the command palette."""
        commands: list[tuple[str, str, Callable[[], object]]] = [
            ("Build: leave (keeps running)", "back to the previous screen", self.action_leave),
            ("Build: search the log", "find text in the log", self.action_search),
            ("Build: first error", "jump to the first error line", self.action_first_error),
            ("Build: processes or log", "switch the pane", self.action_switch_pane),
        ]
        if self.record is not None and self.record.active:
            commands.insert(
                0, ("Build: stop", "stop the build (asks first)", self.action_stop_build)
            )
        pid = self._debug_pid()
        if pid is not None and self._can_debug():
            commands.append(
                (f"Build: debug process {pid}", "capture its stacks", self.action_debug)
            )
        return commands
