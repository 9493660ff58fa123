"""The build screen on real builds started by the real CLI, driven with Pilot.

A fixture C++ build is watched to its end (progress, graphs, processes, the log's last line);
a longer build is stopped through the confirmation and leaves no process behind; a 200k-line
log scrolls and searches at once; a Nix log reads as text; the stall rule flags what it should.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import psutil
import pytest
from driving import (
    open_screen,
    screen_still,
    start,
    visible_log,
    wait_until,
)
from monitor.cxx_project import needs_cxx_tools
from recorded_builds import end, new_build, running_build
from supervision.supervised import Bench, token_processes
from textual.app import App, ComposeResult
from textual.widgets import ProgressBar, Static

from workbench.history.records import FAILED, STOPPED, SUCCEEDED
from workbench.history.store import History
from workbench.logs.readable import DerivationNames, readable_line
from workbench.progress import ProgressTracker
from workbench.progress.live_view import ProcessView
from workbench.supervision.stall import ProcessRow
from workbench.tui.screens.build.build_modals import ConfirmStop
from workbench.tui.widgets.log_view import LogView
from workbench.tui.widgets.parallelism_graph import ParallelismGraph
from workbench.tui.widgets.process_table import ProcessTable, sorted_rows
from workbench.tui.widgets.time_graph import TimeGraph

NIX_LOG = Path(__file__).resolve().parents[3] / "progress" / "fixtures" / "nix-build-fail.stderr"


@needs_cxx_tools
async def test_watches_a_real_build_to_its_end(
    bench: Bench, cxx_project: tuple[Path, Path], tui
) -> None:
    checkout, build = cxx_project
    build_id = start(bench, "--name", "fixture", "--", "ninja", "-C", str(build), cwd=checkout)
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        live_kinds: set[str] = set()

        def ended() -> bool:
            record = screen.record
            assert record is not None
            if record.active:
                live_kinds.update(row.kind for row in screen.query_one(ProcessTable).rows_shown)
            return record.state == SUCCEEDED and not screen._polling

        await wait_until(pilot, "the build to succeed", ended, 120)
        await pilot.pause(0.5)
        progress = str(screen.query_one("#build-progress-text", Static).render())
        assert "ninja 15/15 (100%)" in progress
        assert screen.query_one("#build-bar", ProgressBar).percentage == 1.0
        assert "succeeded" in str(screen.query_one("#build-title", Static).render())
        # The graphs got samples: live ones, or the stored ones if the build was that quick.
        assert len(screen.query_one("#build-cpu", TimeGraph).samples) >= 1
        assert len(screen.query_one("#build-memory", TimeGraph).samples) >= 1
        # Compile processes were seen live, or are listed as the finished build's jobs.
        table = screen.query_one(ProcessTable)
        assert "compiler" in live_kinds | {row.kind for row in table.rows_shown}
        assert any(row.file and row.file.endswith(".cc") for row in table.rows_shown)
        log = screen.query_one(LogView)
        await wait_until(pilot, "the last ninja line", lambda: log.line_count >= 16, 10)
        # Following the end, the view scrolls to the new lines on a later refresh: wait for it.
        link = "[15/15] Linking CXX executable fixture_main"
        await wait_until(pilot, "the link line drawn", lambda: link in visible_log(log), 10)


def _running_from_the_log(
    lines: list[str], origin: float, first_t: float, seconds: int
) -> list[float]:
    """Edges running per second, from .ninja_log's own lines, by counting the edges that hold
    each millisecond (a different way from the screen's exact integral)."""
    spans = []
    for line in lines:
        start_ms, end_ms, _, _, command_hash = line.split("\t")
        spans.append((origin + int(start_ms) / 1000, origin + int(end_ms) / 1000, command_hash))
    edges = {(a, b, h) for a, b, h in spans}  # one command with two outputs is one edge
    values = []
    for second in range(seconds):
        low = first_t - 1.0 + second
        held = sum(
            sum(1 for a, b, _ in edges if a <= low + (ms + 0.5) / 1000 < b) for ms in range(1000)
        )
        values.append(held / 1000)
    return values


@needs_cxx_tools
async def test_parallelism_graph_is_sampled_live_then_exact_from_the_ninja_log(
    bench: Bench, cxx_project: tuple[Path, Path], tui
) -> None:
    checkout, build = cxx_project
    build_id = start(bench, "--", "ninja", "-C", str(build), "-j4", cwd=checkout)
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        graph = screen.query_one("#build-edges", ParallelismGraph)
        live_values: list[float] = []

        def ended() -> bool:
            record = screen.record
            assert record is not None
            if record.active and graph.samples and not graph.exact:
                live_values.append(graph.samples[-1])
            return record.state == SUCCEEDED and not screen._polling and graph.exact

        await wait_until(pilot, "the build to succeed", ended, 120)
        await pilot.pause(0.3)
        assert graph.jobs == 4 and not graph.live
        # Live, the sampled jobs never exceed what ninja may run.
        assert all(0 <= value <= 4 for value in live_values)
        with History(bench.state) as history:
            stored = history.edges(build_id)
        log_lines = (build / ".ninja_log").read_text().splitlines()[1:]
        assert len(stored) == 15  # 14 compiles and the link (the fixture's manifest)
        # The history's epoch times are the log's milliseconds from one origin: find it.
        first = next(line for line in log_lines if line.split("\t")[3] == stored[0].outputs[0])
        origin = stored[0].started - int(first.split("\t")[0]) / 1000
        values = list(graph.samples)
        assert graph.last_t is not None
        first_t = graph.last_t - (len(values) - 1)
        expected = _running_from_the_log(log_lines, origin, first_t, len(values))
        assert values == pytest.approx(expected, abs=0.01)
        # Every edge second is in the graph: its sum is the log's total edge time.
        edge_seconds = sum(
            (int(line.split("\t")[1]) - int(line.split("\t")[0])) / 1000 for line in log_lines
        )
        assert sum(values) == pytest.approx(edge_seconds, abs=1e-6)
        assert max(values) <= 4
        # The limit is drawn (a dotted row named -j4) and the heading says the values are exact.
        await pilot.pause()
        drawn = graph.render().plain.splitlines()
        assert "exact" in drawn[0] and "of -j4" in drawn[0]
        limit_rows = [line for line in drawn if "-j4│" in line]
        assert len(limit_rows) == 1
        if min(values) < 4:  # some second ran fewer than 4 edges: the gap shows the line
            assert "┈" in limit_rows[0]


@needs_cxx_tools
async def test_stop_asks_first_then_leaves_no_process(
    bench: Bench, cxx_project: tuple[Path, Path], tui
) -> None:
    checkout, _ = cxx_project
    build_id = start(
        bench, "--name", "sleeper", "--", "sh", "-c", "sleep 300 & sleep 300; wait", cwd=checkout
    )
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        await wait_until(pilot, "a poll", lambda: screen.polls >= 1, 20)
        record = screen.record
        assert record is not None and record.active
        tree = [psutil.Process(record.build_pid)]
        tree += tree[0].children(recursive=True)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmStop)
        # Enter keeps it running: the safe answer has the focus (AUTO_FOCUS).
        await wait_until(
            pilot, "the focus on 'Keep it running'", lambda: _focused(app) == "confirm-no"
        )
        await pilot.press("n")  # changed our mind: nothing happens
        await pilot.pause(1.5)
        assert app.screen is screen
        assert bench.record(build_id).active
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await wait_until(
            pilot, "the build to stop", lambda: screen.record and screen.record.state == STOPPED, 60
        )
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "stopped" in str(screen.query_one("#build-title", Static).render())
        # No "Stop" key for a build that ended.
        assert screen.check_action("stop_build", ()) is False
    assert bench.record(build_id).state == STOPPED
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, alive
    deadline = time.monotonic() + 10
    while token_processes(bench.token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not token_processes(bench.token)


@needs_cxx_tools
async def test_leaving_keeps_the_build_running(
    bench: Bench, cxx_project: tuple[Path, Path], tui
) -> None:
    checkout, _ = cxx_project
    build_id = start(bench, "--name", "sleeper", "--", "sleep", "300", cwd=checkout)
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        await pilot.press("l")
        await pilot.pause()
        assert app.screen is not screen
    time.sleep(1.5)  # quitting the TUI must not stop it either
    assert bench.record(build_id).active


# -- logs ----------------------------------------------------------------------------------------


class LogApp(App[None]):
    def __init__(self, path: Path, driven: bool = False) -> None:
        super().__init__()
        self.path = path
        self.driven = driven

    def compose(self) -> ComposeResult:
        yield LogView(self.path, id="log", driven=self.driven)

    def on_mount(self) -> None:
        self.query_one(LogView).focus()


async def test_a_200k_line_log_scrolls_and_searches_at_once(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    lines = [f"[{n}/200000] Building CXX object src/file_{n}.cc.o" for n in range(1, 200_001)]
    lines[150_000] = "src/file_150001.cc:3:1: error: expected ';'"
    path.write_text("\n".join(lines) + "\n")
    app = LogApp(path)
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert log.line_count == 200_000
        assert visible_log(log)[-1].startswith("[200000/200000]")  # following: the end shows
        await pilot.press("home")
        await pilot.pause()
        assert log.scroll_offset.y == 0 and not log.follow
        assert visible_log(log)[0].startswith("[1/200000]")
        await pilot.press("pagedown")
        await pilot.pause()
        assert log.scroll_offset.y == log.scrollable_content_region.height
        assert visible_log(log)[0].startswith(f"[{log.scroll_offset.y + 1}/200000]")
        await pilot.press("end")
        await pilot.pause()
        assert log.follow and log.scroll_offset.y == log.max_scroll_y
        await pilot.press("home")
        # "At once" is the work the search and the redraw cost: this process's CPU time (all
        # its threads), which a loaded machine does not stretch as it stretches the wall clock
        # (0.08 s alone, 0.5 s beside eight busy loops on two cores). The wall clock only
        # guards against a search that waits.
        started, cpu_started = time.perf_counter(), time.process_time()
        log.search("file_199990.cc")
        await app.workers.wait_for_complete()
        await pilot.pause()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        assert log.match_line == 199_989
        assert any("file_199990.cc" in row for row in visible_log(log))
        assert cpu < 1.0 and elapsed < 5.0, (cpu, elapsed)
        await pilot.press("N")  # previous match: none before it
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert log.match_line == 199_989
        await pilot.press("e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert log.match_line == 150_000
        assert any("error: expected" in row for row in visible_log(log))


async def test_a_growing_log_is_followed_and_scrolling_up_stops_following(tmp_path: Path):
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(100)))
    app = LogApp(path)
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await pilot.pause()
        with path.open("a") as handle:
            handle.write("".join(f"line {n}\n" for n in range(100, 150)) + "partial")
        await wait_until(pilot, "the new lines", lambda: log.line_count == 151, 20)
        # Following, the view scrolls to them on a later refresh: wait for the end to be drawn.
        await wait_until(pilot, "the end drawn", lambda: visible_log(log)[-1] == "partial", 10)
        with path.open("a") as handle:
            handle.write(" line done\n")
        await wait_until(pilot, "the partial line", lambda: "partial line done" in visible_log(log))
        await pilot.press("pageup")
        await pilot.pause()
        assert not log.follow
        top = log.scroll_offset.y
        with path.open("a") as handle:
            handle.write("more\n")
        await wait_until(pilot, "the next line", lambda: log.line_count == 152, 20)
        await pilot.pause(0.2)
        assert log.scroll_offset.y == top  # not dragged back to the end


def _ticking(log: LogView) -> bool:
    """Whether the view's own 10 Hz take-in timer runs."""
    return log._ticker is not None and log._ticker._active.is_set()


async def test_a_driven_log_wakes_only_for_a_busy_log(tmp_path: Path) -> None:
    """The build screen's log (driven by its poll): no timer while the log is quiet (its lines
    come in with the poll's frame); a poll that finds a busy backlog starts the view's own
    10 Hz take-in, which takes the next lines in by itself and stops once the log is quiet."""
    path = tmp_path / "build.log"
    path.write_text("".join(f"line {n}\n" for n in range(100)))
    app = LogApp(path, driven=True)
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert log.line_count == 100 and not _ticking(log)
        with path.open("a") as handle:
            handle.write("quiet 1\nquiet 2\n")
        log.take_in_new_lines(now=True)  # the poll
        assert log.line_count == 102 and not _ticking(log)
        busy = "".join(f"busy line {n:05d} {'x' * 40}\n" for n in range(200))  # ~11 KB
        with path.open("a") as handle:
            handle.write(busy)
        log.take_in_new_lines(now=True)
        assert log.line_count == 302 and _ticking(log)
        # A log that stays busy (a writer appending ~11 KB every 50 ms, no poll meanwhile):
        # the view's own timer keeps taking its lines in, tick after tick, well past the
        # second of quiet ticks it waits before it stops (30 of the writer's appends).
        stop = threading.Event()

        def write() -> None:
            while not stop.wait(0.05):
                with path.open("a") as handle:
                    handle.write(busy)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            await wait_until(pilot, "many ticks' lines", lambda: log.line_count >= 302 + 6000, 30)
        finally:
            stop.set()
            writer.join()
        lines = sum(1 for _ in path.open())
        await wait_until(pilot, "the last lines", lambda: log.line_count == lines, 20)
        await wait_until(pilot, "the timer to stop", lambda: not _ticking(log), 20)


def test_nix_lines_read_as_text() -> None:
    names = DerivationNames()
    data = NIX_LOG.read_bytes()
    assert names.scan(data) == 3
    raw = NIX_LOG.read_text().splitlines()
    shown = [readable_line(line, names) for line in raw]
    texts = [text for text, _ in shown]
    assert "wb-fixture-c> [1/2] Building CXX object CMakeFiles/c.dir/c.cc.o" in texts
    assert ("wb-fixture-c> c.cc:1:1: error: expected unqualified-id", "error") in shown
    failure = next(item for item in shown if "failed with exit code 3" in item[0])
    assert failure[1] == "error" and "\x1b" not in failure[0]
    assert failure[0].startswith("error: builder for '/nix/store/")
    starts = [text for text, hint in shown if text.startswith("▶ building")]
    assert starts and all("/nix/store/" not in text for text in starts)
    bookkeeping = [hint for text, hint in shown if text.startswith(("▶", "■", "  progress"))]
    assert len(bookkeeping) > 20 and set(bookkeeping) == {"dim"}
    assert "  wb-fixture-a: configurePhase" in texts  # a phase, named after its derivation
    assert readable_line("plain \x1b[31mred\x1b[0m text") == ("plain red text", None)
    assert readable_line("@nix {not json") == ("@nix {not json", "dim")
    assert readable_line('@nix {"action":"result","fields":[3],"id":1,"type":101}')[1] == "dim"


async def test_a_nix_build_log_reads_as_text_on_the_build_screen(tui, bench: Bench) -> None:
    with History(bench.state) as history:
        plan = new_build(
            "wb-fixture",
            backend="nix",
            argv=("nix", "build", "-f", "three-derivations.nix"),
            eta_key="nix-fixture",
        )
        now = time.time()
        record = running_build(history, plan, started=now - 5)
        log_path = Path(record.log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_bytes(NIX_LOG.read_bytes())
        # The first error as the supervisor stores it: its tracker, fed the same log.
        tracker = ProgressTracker()
        tracker.feed_all(NIX_LOG.read_text().splitlines())
        first_error = tracker.snapshot().first_error
        assert first_error is not None and first_error.startswith("error: builder for '/nix/")
        progress = {"first_error": first_error}
        end(
            history,
            record.id,
            FAILED,
            ended=now,
            duration_s=5.0,
            exit_status=100,
            note="c failed",
            lines=40,
            progress=progress,
        )
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, record.id)
        log = screen.query_one(LogView)
        await wait_until(pilot, "the log", lambda: log.line_count > 0, 10)
        error = "wb-fixture-c> c.cc:1:1: error: expected unqualified-id"
        await wait_until(pilot, "the error line drawn", lambda: error in visible_log(log), 10)
        rows = visible_log(log)
        assert not any(row.startswith("@nix") for row in rows)
        # e: the line holding the stored first error (Nix's own error: line), not the first
        # line that merely reads like one (ninja's FAILED: comes earlier).
        await wait_until(pilot, "the stored error", lambda: log.recorded_error == first_error)
        await pilot.press("e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = log.readable(log.match_line or 0)
        assert first_error in shown and "failed with exit code 3" in shown, shown
        # A build with no stored error: the first line that reads like one.
        log.recorded_error = None
        await pilot.press("e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert log.readable(log.match_line or 0) == "wb-fixture-c> FAILED: CMakeFiles/c.dir/c.cc.o"
        await pilot.press("slash", *"unqualified", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "unqualified" in log.readable(log.match_line or 0)


# -- parts ---------------------------------------------------------------------------------------


def _row(pid: int, cpu: float, state: str = "R") -> ProcessRow:
    return ProcessRow(pid, "compiler", "cc1plus", f"/src/f{pid}.cc", cpu, 10**8, 5.0, state)


def test_process_rows_sort_by_any_column() -> None:
    rows = [_row(3, 10.0), _row(1, 90.0), _row(2, 50.0)]
    assert [row.pid for row in sorted_rows(rows, "cpu", True)] == [1, 2, 3]
    assert [row.pid for row in sorted_rows(rows, "pid", False)] == [1, 2, 3]
    assert [row.pid for row in sorted_rows(rows, "file", False)] == [1, 2, 3]
    live = ProcessRow.from_view(
        ProcessView.from_json(
            json.loads(
                '{"pid": 7, "tool": "cicc", "kind": "cuda", "file": "a.cu", "cpu_percent": 5,'
                ' "rss": 1, "running_s": 2.0, "driver": "nvcc"}'
            )
        )
    )
    assert (live.pid, live.kind, live.file, live.tool) == (7, "cuda", "a.cu", "cicc←nvcc")


class GraphApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TimeGraph("CPU", lambda v: f"{v:.0f}%", 100.0, id="graph")


async def test_time_graph_fills_gaps_and_draws_axes() -> None:
    app = GraphApp()
    async with app.run_test(size=(60, 8)) as pilot:
        graph = app.query_one(TimeGraph)
        assert graph.add(50.0, t=100.0)
        assert not graph.add(60.0, t=100.2)  # the same sample polled twice
        assert graph.add(70.0, t=103.0)  # two samples missed: held at the last value
        assert list(graph.samples) == [50.0, 50.0, 50.0, 70.0]
        await pilot.pause()
        text = str(graph.render())
        assert "now 70% of 100%" in text
        axis = text.splitlines()[-1]
        # The time axis starts at the first sample, a tick every 15 columns of 1 s.
        assert "100%│" in text and "0%│" in text and "└0s" in axis and "15s" in axis, axis


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_layout_fits_small_and_large_terminals(tui, bench: Bench, size) -> None:
    with History(bench.state) as history:
        record = history.create(new_build())
        Path(record.log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(record.log_path).write_text("[1/1] Linking fixture\n")
        end(history, record.id, duration_s=1.0)
    app = tui()
    async with app.run_test(size=size) as pilot:
        screen = await open_screen(app, pilot, record.id)
        # The first poll (a worker) finds no job and switches a short terminal to the log.
        await wait_until(pilot, "the first poll", lambda: screen.polls >= 1, 20)
        await screen_still(pilot)
        table, log = screen.query_one(ProcessTable), screen.query_one(LogView)
        if size == (80, 24):
            assert screen.has_class("-short")
            # One pane at a time; a finished build without jobs opens on its log.
            assert log.display and not table.display
            await pilot.press("p")
            await pilot.pause()
            assert table.display and not log.display and table.has_focus
            await pilot.press("p")
            await pilot.pause()
            assert log.display and not table.display and log.has_focus
        else:
            assert table.display and log.display
            assert log.size.height >= 15


async def test_a_stalled_build_is_flagged_and_d_debugs_its_process(
    tui, bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.supervision import stall

    monkeypatch.setattr(stall, "STALL_DEFAULT_S", 1.5)  # no earlier build: the default
    me = psutil.Process()
    with History(bench.state) as history:
        record = history.create(new_build(argv=("ninja",), eta_key="stall-test"))
        Path(record.log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(record.log_path).write_text("[3/12] Building CXX object heavy.cc.o\n")
        # This test process plays the supervisor (alive, as liveness checks) and the compiler.
        history.set_supervisor(record.id, me.pid, me.create_time())
        history.mark_running(record.id, me.pid, os.getpgid(0), time.time())
        job = {
            "pid": me.pid,
            "tool": "cc1plus",
            "kind": "compiler",
            "file": "/src/heavy.cc",
            "cpu_percent": 99.5,
            "rss": 10**8,
            "running_s": 600.0,
        }
        live = {"t": time.time(), "cpu_percent": 50.0, "rss": 10**8, "memory_available": 10**10}
        progress = {"step": {"tool": "ninja", "done": 3, "total": 12}, "fraction": 0.25}
        history.update_live(record.id, 1, progress, {**live, "jobs": [job]})
    app = tui()
    debugged: list[int | None] = []
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_debug = lambda pid=None, capture=None: debugged.append(pid)  # type: ignore[method-assign]
        screen = await open_screen(app, pilot, record.id)
        await wait_until(pilot, "the stall warning", lambda: screen.stall is not None, 15)
        await pilot.pause()
        banner = screen.query_one("#build-stall", Static)
        text = str(banner.render())
        assert banner.display and "Stalled?" in text
        assert f"cc1plus {me.pid} (heavy.cc)" in text and "Press d" in text
        assert str(screen.query_one(ProcessTable).get_row_at(0)[0]).startswith("⚠")
        await pilot.press("d")
        assert debugged == [me.pid]


def test_a_graph_covers_the_whole_build_with_a_time_axis() -> None:
    """A 50-minute series in a 60-column plot: the first minutes' spike still shows, the axis
    reaches back tens of minutes, and memory's columns keep each span's highest sample."""
    from workbench.tui.widgets.time_graph import SeriesHistory

    history = SeriesHistory(capacity=64)
    for second in range(3000):
        history.add(100.0 if 60 <= second < 70 else 1.0)
    assert len(history.counts) < 64 and history.total == 3000
    peaks, per_column = history.columns(60, peak=True)
    assert len(peaks) <= 60 and per_column * len(peaks) >= 3000
    assert max(peaks[:5]) == 100.0  # the spike near the start survives, as a peak
    means, _ = history.columns(60, peak=False)
    assert 1.0 < max(means[:5]) < 100.0  # as a mean, it is diluted, not lost


async def test_the_drawn_graph_reaches_back_to_the_builds_start() -> None:
    app = GraphApp()
    async with app.run_test(size=(67, 8)) as pilot:
        graph = app.query_one(TimeGraph)
        for second in range(3000):
            graph.add(90.0 if second < 120 else 10.0, t=1000.0 + second)
        await pilot.pause()
        drawn = graph.render().plain.splitlines()
        axis = drawn[-1]
        import re

        assert axis[7:9] == "0s", axis  # the left edge is the first sample
        minutes = [int(m) for m in re.findall(r"(\d+)m", axis)]
        assert minutes and max(minutes) >= 30, axis  # 3000 s in 60 columns: ticks of ~16 min
        plot = [line[7:] for line in drawn[1:-1]]
        # The first two minutes at 90% stand above the rest at the left edge (the build's
        # start); the rest, at 10%, stays in the bottom row.
        assert plot[1][:1].strip() and not plot[1][2:].strip(), plot
        assert plot[-1].rstrip().endswith("▆") or plot[-1].rstrip()[-1] in "▁▂▃▄▅▆▇█", plot


def _plot_columns(graph: TimeGraph) -> list[str]:
    """The drawn plot, column by column (top to bottom), without the value axis."""
    rows = [line[7:] for line in graph.render().plain.splitlines()[1:-1]]
    return ["".join(row[index] for row in rows) for index in range(len(rows[0]))]


async def test_a_live_graph_redraws_only_its_newest_column_until_it_is_full() -> None:
    """Issue 23: a new sample of a live graph changes the newest column only (nothing before
    it moves, so the terminal gets a few cells a second, not the whole graph); once the build
    outgrows the plot every column takes twice the span, the axis says so; an ended build's
    graph fills its width."""
    app = GraphApp()
    async with app.run_test(size=(67, 8)) as pilot:
        graph = app.query_one(TimeGraph)
        changed_columns: list[int] = []
        before = _plot_columns(graph)
        for second in range(200):
            graph.add(float(10 + (second * 37) % 90), t=1000.0 + second)
            after = _plot_columns(graph)
            changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
            if len(changed) > 1:
                changed_columns.append(second)
            before = after
        await pilot.pause()
        # 60 columns: the spans double at 61, 121 and 241 samples; only then does more than
        # the newest column change.
        assert changed_columns == [60, 120], changed_columns
        axis = graph.render().plain.splitlines()[-1]
        assert "└0s" in axis and "60s" in axis and "3m" in axis, axis  # 4 s a column
        drawn = [column for column in _plot_columns(graph) if column.strip()]
        assert len(drawn) == 50  # 200 samples, 4 a column: the plot is 5/6 full
        graph.live = False
        await pilot.pause()
        assert len([column for column in _plot_columns(graph) if column.strip()]) == 60
        assert "last" in graph.render().plain.splitlines()[0]


async def test_the_exact_edges_graph_covers_a_build_longer_than_its_ring() -> None:
    """An ended 3-hour build: its exact edges (one value a second) all go into the graph, the
    spike of its first minutes shows at the left and the axis reaches hours."""
    from workbench.tui.screens.build.timeline import ended_timeline

    spans = [(1000.0 + i, 1002.0 + i) for i in range(0, 60)]  # two edges at once, a minute
    spans += [(1060.0 + 30 * i, 1090.0 + 30 * i) for i in range(360)]  # then one, 3 hours
    exact = ended_timeline(1000.0, None, [], spans)
    assert exact is not None and exact.exact
    assert exact.grid.interval_s == 1.0 and len(exact.edges) == 10860

    class EdgesApp(App[None]):
        def compose(self) -> ComposeResult:
            yield ParallelismGraph(id="edges")

    app = EdgesApp()
    async with app.run_test(size=(67, 8)) as pilot:
        graph = app.query_one(ParallelismGraph)
        graph.jobs = 2
        graph.live = False
        graph.show_exact(exact.edges, exact.grid.first_t, exact.grid.interval_s)
        graph.frame = exact.frame
        await pilot.pause()
        drawn = graph.render().plain.splitlines()
        assert graph.history.total == 10860 and graph.exact
        assert "1 of -j2 · exact" in drawn[0]
        assert "2h" in drawn[-1] and "└0s" in drawn[-1], drawn[-1]
        # A day-long build keeps at most EXACT_VALUES values: wider intervals, said.
        day = ended_timeline(0.0, None, [], [(0.0, 200_000.0)], most=65536)
        assert day is not None and day.grid.interval_s == 4.0 and len(day.edges) == 50000


def test_the_exit_sample_is_no_cpu_measurement_of_the_last_second() -> None:
    """The supervisor's last sample comes once the build ended, with no process left: its 0%
    measured nothing. The ended CPU graph's last interval is the job's 48%, not the mean of
    48% and that 0% (24%, what the build screen's "last" said)."""
    from workbench.history.records import Sampled
    from workbench.tui.screens.build.timeline import ended_timeline

    def sample(t: float, cpu: float, processes: int) -> Sampled:
        rss = 100 << 20 if processes else 0
        return Sampled(t, cpu, cpu / 50, t - 1000.0, rss, 1 << 30, processes, processes, 0, 0, None)

    samples = [sample(1001.0, 48.0, 2), sample(1002.0, 48.0, 2), sample(1002.9, 48.0, 2)]
    exit_sample = sample(1003.2, 0.0, 0)
    timeline = ended_timeline(1000.0, 1003.1, [*samples, exit_sample], [])
    assert timeline is not None
    assert timeline.cpu[-1] == 48.0, timeline.cpu
    assert timeline.memory[-1] == 100 << 20, timeline.memory  # the peak: nothing left is 0
    # A last sample with processes still running is a measurement like any other.
    running = ended_timeline(1000.0, 1003.1, [*samples, sample(1003.2, 10.0, 1)], [])
    assert running is not None and running.cpu[-1] == 29.0, running.cpu
    # Nor is the sampler's first reading, with no interval behind it (no CPU time counted yet):
    # the first second is not drawn as 0%.
    first = Sampled(1000.4, 0.0, 0.0, 0.0, 80 << 20, 1 << 30, 2, 2, 0, 0, None)
    timeline = ended_timeline(1000.0, 1003.1, [first, *samples, exit_sample], [])
    assert timeline is not None and timeline.cpu[1:] == (48.0, 48.0, 48.0), timeline.cpu


async def test_a_new_sample_draws_only_the_graph_rows_it_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 23: a graph is drawn row by row (Textual's line API) and a sample redraws only the
    rows that differ (the heading's figure, the rows its column reaches), not the whole widget:
    its time axis and the rows above the new column are not drawn again."""
    app = GraphApp()
    async with app.run_test(size=(67, 8)) as pilot:
        graph = app.query_one(TimeGraph)
        for second in range(10):
            graph.add(30.0, t=1000.0 + second)
        await pilot.pause()
        refreshed: list[tuple[object, ...]] = []
        drawn: list[int] = []
        original_refresh, original_line = graph.refresh, graph.render_line
        monkeypatch.setattr(
            graph, "refresh", lambda *a, **k: (refreshed.append(a), original_refresh(*a, **k))[1]
        )
        monkeypatch.setattr(graph, "render_line", lambda y: (drawn.append(y), original_line(y))[1])
        graph.add(31.0, t=1010.0)  # a new column two rows high (30% of six rows and a bit)
        await pilot.pause()
        rows = {y for regions in refreshed for region in regions for y in region.line_range}
        assert all(regions for regions in refreshed), "a refresh of the whole graph"
        # The heading's figure and the plot rows the column is in; not the time axis.
        assert 0 in rows and 5 in rows and 6 in rows and 7 not in rows, refreshed
        assert set(drawn) == rows, drawn
        assert "now 31%" in graph.render().plain.splitlines()[0]
        refreshed.clear()
        drawn.clear()
        graph.add(95.0, t=1011.0)  # a tall column: every plot row, still not the time axis
        await pilot.pause()
        rows = {y for regions in refreshed for region in regions for y in region.line_range}
        assert all(regions for regions in refreshed), "a refresh of the whole graph"
        assert rows == {0, 1, 2, 3, 4, 5, 6}, refreshed
        column = _plot_columns(graph)[11]
        assert column.strip() and column[0] != " ", column


def _focused(app) -> str | None:
    """The id of the focused widget, if any."""
    return None if app.focused is None else app.focused.id
