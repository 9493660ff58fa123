"""The build screen while its log grows by 50,000 lines a second; graph and table costs; start-up.

Prints JSON. Run: python benchmarks/tui_log_growth.py [--seconds 10] [--rate 50000] [--no-pty]

1. Log growth. A writer process plays a supervisor: it registers itself in a private history as
   the supervisor of a running build, appends lines to the build's log at `--rate` lines/s (a
   mix of Nix `@nix` builder lines and plain ninja/compiler lines, in 10 ms batches) and
   rewrites the live view once a second (24 processes, a sample), as the real one does. The app
   (`make_app` on a recorded host, headless `run_test(size=(160, 48))`) shows that build.
   Measured, per second, in the app's process:
   - frames: calls of `App._display` with an update, i.e. compositor updates the screen
     computed (headless, the terminal write is skipped; the rendering is done). Every frame in
     which the log scrolled also re-renders its visible lines (`log_repaints`: calls of
     `LogView.render_line(0)`).
   - event-loop lateness: a 50 ms interval timer records how late each tick ran.
   - RSS (psutil), and how far the view is behind the file (lines).
   Targets: at least 10 frames/s, and memory flat: RSS growth within what the line index must
   hold (8 bytes per line) plus a few MB.
2. Cost against history length. `TimeGraph.add()` and a frame of it (`render()`) with 100 and
   100,000 samples in its ring; the build screen's whole once-a-second update (graphs, process
   table of 24 rows, stall check) with its graphs holding 100 and 100,000 samples. O(1): the
   two columns should match.
3. First screen. `workbench` started in a real pseudo-terminal (80x24, TERM=xterm-256color)
   until the first frame (the footer's "Quit") is written to the terminal; target 600 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

FIRST_SCREEN_TARGET_MS = 600.0
FRAMES_TARGET = 10.0
SIZE = (160, 48)


# -- the writer (a child process) ------------------------------------------------------------------


def _lines(count: int, start: int) -> bytes:
    """`count` log lines: half Nix builder lines (ninja's status inside), half plain output."""
    out = []
    for n in range(start, start + count):
        if n % 2:
            text = f"[{n}/9999999] Building CUDA object onnxruntime/core/providers/cuda/op_{n}.cu.o"
            line = '@nix {"action":"result","fields":[' + json.dumps(text)
            out.append(line + '],"id":107563160961028,"type":101}')
        elif n % 10 == 4:
            out.append(f"src/op_{n}.cc:12:3: warning: unused variable 'status' [-Wunused]")
        else:
            out.append(f"[{n}/9999999] Building CXX object onnxruntime/core/graph/node_{n}.cc.o")
    return ("\n".join(out) + "\n").encode()


def writer(state: Path, build_id: int, rate: int, seconds: float) -> None:
    """Play the build's supervisor: grow the log at `rate` lines/s, update the live view."""
    import psutil

    from workbench.history.records import SUCCEEDED, Sampled
    from workbench.history.store import History

    me = psutil.Process()
    stopped: list[int] = []  # SIGTERM (--quick, once measured): end the loop, finish the build
    signal.signal(signal.SIGTERM, lambda number, _frame: stopped.append(number))
    with History(state) as history:
        history.set_supervisor(build_id, me.pid, me.create_time())
        history.mark_running(build_id, me.pid, os.getpgid(0), time.time())
        record = history.get(build_id)
        path = Path(record.log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        batch = max(1, rate // 100)
        written = 0
        started = time.monotonic()
        next_live = started
        with open(path, "ab", buffering=0) as log:
            # A Build activity's start: the view names the builder lines after it.
            log.write(
                b'@nix {"action":"start","fields":["/nix/store/'
                + b"a" * 32
                + b'-onnxruntime-1.23.2.drv","",1,1],"id":107563160961028,"level":3,'
                b'"text":"building onnxruntime","type":105}\n'
            )
            while not stopped and (now := time.monotonic()) - started < seconds:
                due = int((now - started) * rate)
                while written < due:
                    log.write(_lines(batch, written))
                    written += batch
                if now >= next_live:
                    next_live += 1.0
                    jobs = [
                        {
                            "pid": 100000 + n,
                            "tool": "cc1plus",
                            "kind": "compiler",
                            "file": f"/src/onnxruntime/core/op_{n}.cc",
                            "cpu_percent": 95.0 - n,
                            "rss": (300 + n) * 2**20,
                            "running_s": float(n),
                        }
                        for n in range(24)
                    ]
                    t = time.time()
                    live = {
                        "t": t,
                        "cpus": 16,
                        "cpu_percent": 80.0,
                        "cpu_cores": 12.8,
                        "rss": 8 * 2**30,
                        "memory_available": 100 * 2**30,
                        "eta_s": 600.0,
                        "eta_basis": "benchmark",
                        "jobs": jobs,
                    }
                    fraction = min(1.0, (now - started) / seconds)
                    progress = {
                        "step": {"tool": "ninja", "done": written, "total": 9999999},
                        "fraction": fraction,
                    }
                    sample = Sampled(t, 80.0, 12.8, 0.0, 8 * 2**30, 100 * 2**30, 40, 24, 0, 0, 0.1)
                    history.update_live(build_id, written, progress, live, sample)
                time.sleep(0.01)
        history.finish(build_id, SUCCEEDED, time.time(), seconds, 0, None, None, written, {})
    print(json.dumps({"lines_written": written}))


# -- 1. the build screen while the log grows -------------------------------------------------------


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


async def log_growth(rate: int, seconds: float, stop_writer: bool = False) -> dict[str, Any]:
    """`stop_writer`: end the writer (SIGTERM) once measured, rather than 6 s past it."""
    from recorded_host import recorded_doctor

    from workbench.history.records import NewBuild
    from workbench.history.store import History
    from workbench.tui.app import make_app
    from workbench.tui.screens.build.build_screen import BuildScreen
    from workbench.tui.widgets.log_view import LogView

    state = Path(tempfile.mkdtemp(prefix="tui-bench-"))
    try:
        with History(state) as history:
            record = history.create(
                NewBuild("bench", "run", ("writer",), "/tmp", "/tmp", {}, "bench", True)
            )
        child = subprocess.Popen(
            # It writes on past the measurement: its end is not part of what is measured.
            [
                *(sys.executable, __file__, "--writer", str(state), str(record.id)),
                *("--rate", str(rate), "--seconds", str(seconds + 6.0)),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        with History(state) as history:
            deadline = time.monotonic() + 20
            while history.get(record.id).state != "running":
                if time.monotonic() > deadline:
                    raise RuntimeError("the writer did not start")
                time.sleep(0.05)
        app = make_app(str(REPO / "configs"), str(state), doctor=recorded_doctor())
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            if not isinstance(app.screen, BuildScreen):
                app.open_build(record.id)
            while not (isinstance(app.screen, BuildScreen) and app.screen.record is not None):
                await pilot.pause(0.05)
            screen = app.screen
            log = screen.query_one(LogView)
            frames = 0
            repaints = 0
            display = app._display

            def counting_display(target: Any, renderable: Any) -> None:
                nonlocal frames
                if renderable is not None:
                    frames += 1
                display(target, renderable)

            render_line = log.render_line

            def counting_render_line(y: int) -> Any:
                nonlocal repaints
                if y == 0:
                    repaints += 1
                return render_line(y)

            app._display = counting_display  # type: ignore[method-assign]
            log.render_line = counting_render_line  # type: ignore[method-assign]
            lateness: list[float] = []
            last = [time.perf_counter()]

            def tick() -> None:
                now = time.perf_counter()
                lateness.append(max(0.0, now - last[0] - 0.05))
                last[0] = now

            screen.set_interval(0.05, tick)
            await pilot.pause(1.0)  # warm up: the backlog taken in, caches filled
            rss_start = _rss()
            lines_start = log.line_count
            per_second = []
            started = time.perf_counter()
            for _ in range(int(seconds)):
                frames_before, repaints_before = frames, repaints
                tick_start = time.perf_counter()
                await pilot.pause(1.0)
                elapsed = time.perf_counter() - tick_start
                size = os.stat(log.index.path).st_size if log.index else 0
                behind = size - (log.index.size if log.index else 0)
                per_second.append(
                    {
                        "frames": round((frames - frames_before) / elapsed, 1),
                        "log_repaints": round((repaints - repaints_before) / elapsed, 1),
                        "lines_shown": log.line_count,
                        "bytes_behind": behind,
                        "rss_mb": round(_rss() / 2**20, 1),
                    }
                )
            total = time.perf_counter() - started
            rss_end = _rss()
            lines_end = log.line_count
            polls = screen.polls
        if stop_writer:
            child.send_signal(signal.SIGTERM)  # ours; it ends its loop and finishes the build
        out, _ = child.communicate(timeout=30)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    lines_taken = lines_end - lines_start
    index_bytes = 8 * lines_taken
    growth = rss_end - rss_start
    frames_per_s = [second["frames"] for second in per_second]
    late = sorted(lateness)
    return {
        "method": (
            "frames = App._display calls with a compositor update (headless: rendered, not "
            "written); log_repaints = LogView.render_line(0) calls; lateness = how late a 50 ms "
            "timer ran"
        ),
        "rate_lines_per_s": rate,
        "seconds": round(total, 1),
        "writer": json.loads(out.strip().splitlines()[-1]) if out.strip() else None,
        "lines_taken_in": lines_taken,
        "lines_per_s_taken_in": round(lines_taken / total),
        "frames_per_s_mean": round(statistics.mean(frames_per_s), 1),
        "frames_per_s_min": min(frames_per_s),
        "log_repaints_per_s_mean": round(
            statistics.mean(second["log_repaints"] for second in per_second), 1
        ),
        "event_loop_lateness_ms": {
            "median": round(1000 * statistics.median(late), 1),
            "p99": round(1000 * late[int(len(late) * 0.99) - 1], 1),
            "max": round(1000 * late[-1], 1),
        },
        "history_polls": polls,
        "rss_start_mb": round(rss_start / 2**20, 1),
        "rss_end_mb": round(rss_end / 2**20, 1),
        "rss_growth_mb": round(growth / 2**20, 1),
        "line_index_growth_mb": round(index_bytes / 2**20, 1),
        "rss_growth_beyond_index_mb": round((growth - index_bytes) / 2**20, 1),
        "per_second": per_second,
        "meets_frames_target": min(frames_per_s) >= FRAMES_TARGET,
        "memory_flat": growth - index_bytes < 16 * 2**20,
    }


# -- 2. cost against history length ----------------------------------------------------------------


async def costs(
    lengths: tuple[int, int] = (100, 100_000),
    adds: int = 20_000,
    frames: int = 300,
    updates: int = 200,
) -> dict[str, Any]:
    from textual.app import App, ComposeResult

    from workbench.history.records import BuildRecord
    from workbench.progress.live_view import ProcessView
    from workbench.reading.build_text import memory, percent
    from workbench.supervision.stall import ProcessRow, StallWatch
    from workbench.tui.screens.build.build_screen import BuildScreen, Poll
    from workbench.tui.widgets.time_graph import TimeGraph

    class GraphApp(App[None]):
        def compose(self) -> ComposeResult:
            yield TimeGraph("CPU", percent, 100.0, capacity=200_000)

    result: dict[str, Any] = {"graph_add_us": {}, "graph_frame_us": {}, "screen_update_us": {}}
    app = GraphApp()
    async with app.run_test(size=(80, 10)) as pilot:
        graph = app.query_one(TimeGraph)
        await pilot.pause()
        for _ in range(100):  # warm up: the first frames pay for caches and styles
            graph.render()
        for length in lengths:
            graph.clear()  # the ring and the whole-build history both hold `length` samples
            for n in range(length):
                graph.add(float(n % 100))
            started = time.perf_counter()
            for n in range(adds):
                graph.add(float(n % 100))
            result["graph_add_us"][str(length)] = round(
                1e6 * (time.perf_counter() - started) / adds, 2
            )
            started = time.perf_counter()
            for _ in range(frames):
                graph.render()
            result["graph_frame_us"][str(length)] = round(
                1e6 * (time.perf_counter() - started) / frames, 1
            )

    class ScreenApp(App[None]):
        CSS_PATH = str(REPO / "workbench" / "tui" / "styles" / "workbench.tcss")

    state = Path(tempfile.mkdtemp(prefix="tui-bench-"))
    try:
        app2 = ScreenApp()
        async with app2.run_test(size=SIZE) as pilot:
            screen = BuildScreen(state, 1)  # no such build: only the drawing is timed here
            await app2.push_screen(screen)
            await pilot.pause()
            screen.stall_watch = StallWatch(600.0)
            jobs = [
                {
                    "pid": 10 + n,
                    "tool": "cc1plus",
                    "kind": "compiler",
                    "file": f"/src/op_{n}.cc",
                    "cpu_percent": 50.0 + n,
                    "rss": 2**28,
                    "running_s": float(n),
                }
                for n in range(24)
            ]
            rows = tuple(ProcessRow.from_view(ProcessView.from_json(job)) for job in jobs)
            base = _record(BuildRecord)
            for length in lengths:
                for graph in screen.query(TimeGraph):
                    graph.clear()
                    for n in range(length):
                        graph.add(float(n % 90))
                started = time.perf_counter()
                for n in range(updates):
                    live = {"t": 1000.0 + length + n, "cpu_percent": 50.0, "rss": 2**30}
                    live["memory_available"] = 2**34
                    live["jobs"] = jobs
                    record = _replace(base, live=live)
                    screen.on_build_screen_polled(BuildScreen.Polled(Poll(record, rows, False)))
                    await pilot.pause(0)
                elapsed = time.perf_counter() - started
                result["screen_update_us"][str(length)] = round(1e6 * elapsed / updates, 1)
                assert memory(2**30) == "1.0Gi"
    finally:
        shutil.rmtree(state, ignore_errors=True)
    short, long = (f"{length:,}" for length in lengths)
    result["method"] = (
        f"graph: {adds:,} add() calls and {frames:,} render() calls with the ring holding {short} "
        f"or {long} samples; screen update: {updates:,} calls of the build screen's "
        "once-a-second handler (both graphs, a 24-row process table, the stall check) and the "
        f"frame after it, with the graphs holding {short} or {long} samples"
    )
    return result


def _record(cls: Any) -> Any:
    from workbench.history.records import RUNNING

    fields = {name: None for name in cls.__dataclass_fields__}
    fields.update(
        id=1,
        name="bench",
        backend="run",
        argv=("ninja",),
        cwd="/tmp",
        checkout="/tmp",
        settings={},
        eta_key="bench",
        nix=False,
        forced=False,
        state=RUNNING,
        created=time.time(),
        started=time.time(),
        log_path="/nonexistent/build.log",
        lines=0,
        progress={"step": {"tool": "ninja", "done": 5, "total": 10}, "fraction": 0.5},
        live={},
    )
    return cls(**fields)


def _replace(record: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(record, **changes)


# -- 3. first screen in a real terminal ------------------------------------------------------------


def first_screen(runs: int) -> dict[str, Any]:
    script = Path(sys.executable).parent / "workbench"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "workbench"]
    times: list[float] = []
    state = Path(tempfile.mkdtemp(prefix="tui-bench-"))
    try:
        for _ in range(runs + 1):  # the first run warms the page cache and is dropped
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
            for name in ("COLUMNS", "LINES", "TEXTUAL", "TEXTUAL_DRIVER"):
                env.pop(name, None)
            started = time.perf_counter()
            process = subprocess.Popen(
                [*command, "--config", str(REPO / "configs"), "--state-dir", str(state)],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=env,
                start_new_session=True,
                cwd=REPO,
            )
            os.close(slave)
            seen = b""
            elapsed = None
            deadline = started + 15
            while time.perf_counter() < deadline:
                ready, _, _ = select.select([master], [], [], 0.05)
                if not ready:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
                # The alternate screen is entered first; the footer is in the first frame.
                if b"\x1b[?1049h" in seen and b"Quit" in seen.split(b"\x1b[?1049h", 1)[1]:
                    elapsed = (time.perf_counter() - started) * 1000
                    break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
            os.close(master)
            if elapsed is None:
                return {"error": "no first frame within 15 s", "output_tail": repr(seen[-400:])}
            times.append(elapsed)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    measured = sorted(times[1:])
    return {
        "method": (
            "`workbench --config configs --state-dir EMPTY` in a pty (80x24): from spawn to the "
            "first frame's footer on the terminal"
        ),
        "runs": runs,
        "median_ms": round(statistics.median(measured), 1),
        "max_ms": round(measured[-1], 1),
        "min_ms": round(measured[0], 1),
        "target_ms": FIRST_SCREEN_TARGET_MS,
        "meets_target": statistics.median(measured) < FIRST_SCREEN_TARGET_MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=50_000)
    parser.add_argument("--pty-runs", type=int, default=5)
    parser.add_argument("--no-pty", action="store_true", help="skip the first-screen timing")
    parser.add_argument("--writer", nargs=2, metavar=("STATE", "BUILD_ID"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 1 s at 2,000 lines/s (the writer stopped once measured); "
        "graphs of 100 and 1,000 samples, a tenth of the calls (screen updates: a twentieth); "
        "one first screen (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rate, args.pty_runs = 1.0, 2000, 1
    if args.writer:
        writer(Path(args.writer[0]), int(args.writer[1]), args.rate, args.seconds)
        return
    result: dict[str, Any] = {"benchmark": "tui_log_growth", "size": list(SIZE)}
    if args.quick:
        result["log_growth"] = asyncio.run(log_growth(args.rate, args.seconds, stop_writer=True))
        result["cost_vs_history"] = asyncio.run(costs((100, 1000), 2000, 30, 10))
    else:
        result["log_growth"] = asyncio.run(log_growth(args.rate, args.seconds))
        result["cost_vs_history"] = asyncio.run(costs())
    if not args.no_pty:
        result["first_screen"] = first_screen(args.pty_runs)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
