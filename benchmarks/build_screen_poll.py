"""What the build screen's once-a-second poll costs the event loop (issue 23, item 3).

Prints JSON. Run: python benchmarks/build_screen_poll.py [--polls 12] [--versus DIR] [--quick]

A running build is recorded by hand in a private history (this process plays its supervisor,
16 compiler jobs, a 300-line log); its build screen runs headless at 160x48 (Textual's
`run_test`). Between polls the row changes as a real one does (progress, CPU, each job's time).
Measured on the event loop, per poll: the `Polled` handler's time, the layout passes of the
screen and their time, the compositor's refreshes (what is redrawn) and their time, and the
event loop's lateness (a 5 ms sleeper: how late a key press would be handled). Key latency
end to end, through a pty beside htop, is `tui_terminal_cost.py`'s.

`--versus DIR` runs the same probe on another tree (`git archive` of the commit before a
change) in the same run, as the baseline; each tree in a child process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
JOBS = 16


def _ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0, "total_ms": 0.0, "max_ms": 0.0, "median_ms": 0.0}
    return {
        "count": len(values),
        "total_ms": round(sum(values) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
        "median_ms": round(statistics.median(values) * 1000, 1),
    }


def probe(polls: int) -> dict[str, Any]:
    """Run in the tree under test (imports the workbench from sys.path)."""
    import psutil
    from textual.app import App
    from textual.screen import Screen

    from workbench.history.records import NewBuild
    from workbench.history.store import History
    from workbench.tui.screens.build.build_screen import BuildScreen

    state = Path(tempfile.mkdtemp(prefix="build-screen-poll-"))
    state.chmod(0o700)
    me = psutil.Process()
    with History(state) as history:
        record = history.create(
            NewBuild("probe", "run", ("ninja",), "/tmp", "/tmp", {}, "probe", False)
        )
        Path(record.log_path).parent.mkdir(parents=True, exist_ok=True)
        lines = (f"[{i}/900] Building CXX object unit_{i}.cc.o\n" for i in range(300))
        Path(record.log_path).write_text("".join(lines))
        history.set_supervisor(record.id, me.pid, me.create_time())
        history.mark_running(record.id, me.pid, os.getpgid(0), time.time())

    def update(n: int) -> None:
        jobs = [
            {
                "pid": me.pid if i == 0 else 4_000_000 + i,
                "tool": "cc1plus",
                "kind": "compiler",
                "file": f"/src/unit_{i}.cc",
                "cpu_percent": 99.0 - (n % 3),
                "rss": 10**8,
                "running_s": 60.0 + n + i,
            }
            for i in range(JOBS)
        ]
        live = {
            "t": time.time(),
            "cpu_percent": 50.0 + n % 7,
            "rss": 10**8 + n * 2**20,
            "memory_available": 10**10,
            "compile_jobs": JOBS,
            "jobs": jobs,
        }
        progress = {"step": {"tool": "ninja", "done": 3 + n, "total": 900}, "fraction": n / 900}
        with History(state) as history:
            history.update_live(record.id, 1 + n, progress, live)

    update(0)
    handled: list[float] = []
    layouts: list[float] = []
    frames: list[float] = []
    measuring = False

    def timed(into: list[float], original: Any) -> Any:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                if measuring:
                    into.append(time.perf_counter() - started)

        return wrapper

    BuildScreen.on_build_screen_polled = timed(handled, BuildScreen.on_build_screen_polled)
    Screen._refresh_layout = timed(layouts, Screen._refresh_layout)
    Screen._compositor_refresh = timed(frames, Screen._compositor_refresh)

    class Probe(App[None]):
        def on_mount(self) -> None:
            self.push_screen(BuildScreen(state, record.id))

    lateness: list[float] = []

    async def main() -> None:
        nonlocal measuring
        app = Probe()
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.monotonic() + 60
            while not (isinstance(app.screen, BuildScreen) and app.screen.polls > 0):
                if time.monotonic() > deadline:
                    raise SystemExit("build_screen_poll: the build screen never polled")
                await pilot.pause(0.05)
            screen = app.screen

            async def sleeper() -> None:
                while True:
                    started = time.perf_counter()
                    await asyncio.sleep(0.005)
                    lateness.append(time.perf_counter() - started - 0.005)

            task = asyncio.create_task(sleeper())
            measuring = True
            for n in range(1, polls + 1):
                await asyncio.to_thread(update, n)
                seen = screen.polls
                deadline = time.monotonic() + 30
                while screen.polls == seen:
                    if time.monotonic() > deadline:
                        raise SystemExit("build_screen_poll: a poll never came")
                    await asyncio.sleep(0.01)
                await pilot.pause(0.2)  # its frame drawn
            measuring = False
            task.cancel()

    asyncio.run(main())
    lateness.sort()
    return {
        "polls": polls,
        "polled_handler": _ms(handled),
        "layout_passes": _ms(layouts),
        "compositor_refreshes": _ms(frames),
        "event_loop_late_ms": {
            "max": round(lateness[-1] * 1000, 1) if lateness else None,
            "p99": round(lateness[int(len(lateness) * 0.99)] * 1000, 1) if lateness else None,
        },
    }


def run_tree(tree: Path, polls: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for name in ("COLUMNS", "LINES", "TEXTUAL", "TEXTUAL_DRIVER"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--polls", str(polls)],
        cwd=tempfile.gettempdir(),
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"build_screen_poll: {tree}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    result["tree"] = str(tree)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=12)
    parser.add_argument("--versus", type=Path, metavar="DIR", help="the baseline's tree")
    parser.add_argument("--quick", action="store_true", help="3 polls (checks the script)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.polls = 3
    if args.child:
        print(json.dumps(probe(args.polls)))
        return
    report: dict[str, Any] = {
        "benchmark": "build_screen_poll",
        "what": "the build screen's poll on the event loop, 160x48 headless, a running build "
        f"of {JOBS} jobs whose row changes every poll",
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": os.getloadavg(),
        },
        "this": run_tree(REPO, args.polls),
    }
    if args.versus is not None:
        report["versus"] = run_tree(args.versus.resolve(), args.polls)
    report["host"]["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
