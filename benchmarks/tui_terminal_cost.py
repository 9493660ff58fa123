"""What watching a build costs over SSH: terminal bytes, CPU and key latency, beside htop.

Prints JSON. Run: python benchmarks/tui_terminal_cost.py [--seconds 20] [--jobs N] [--quick]
[--versus DIR [--apart]]  (DIR: another checkout, e.g. `git worktree add /tmp/base COMMIT`: its
TUI and this one watch the same quiet build beside htop in the same window, key presses taken in
turn; then each one's busy log; both results and the after/before ratios are printed. `--apart`:
each tree measured whole, one after the other, as before)

Everything runs in real pseudo-terminals of the same size (160x48, TERM=xterm-256color), and
what each program writes to its terminal is counted, as an SSH session would carry it.

1. Quiet build. A real build (the bundled sample project's heavy C++ units, configured with
   CMake, built by ninja -jJOBS under `workbench run -d`), sized so that it prints about three
   lines a second and outlasts the measurement. While it runs, the workbench TUI (which opens
   the running build's screen by itself) and htop (`top` where htop is absent) run side by
   side; after a warm-up both are measured over the same window: bytes written to the terminal
   and CPU time (utime + stime of the process and its threads, /proc/PID/stat). Targets: TUI
   bytes at most 2x htop's; TUI CPU at most 2% of a core (on the 16-core H100 host).
2. Busy log. `workbench run -d` of a program printing 1,000 lines a second; the TUI shows its
   build screen with the log pane in front (`p`), following. Target: at most 30 KB/s.
3. Key latency. On the quiet build's screen, `a` switches between the build tools and every
   process, and says so in a toast: press it, read the terminal until the toast's text shows,
   repeat. Reported: median and 95th percentile. Targets: p95 at most 100 ms on
   an idle host, 250 ms on a 2-core host beside a -j2 build.

The baseline of (1) is htop in the same run; (2) and (3) have absolute targets.
`--keep DIR` keeps each program's raw terminal output (to see where the bytes go).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import platform
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
from types import EllipsisType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workbench.samples import sample_project  # noqa: E402

SIZE = (160, 48)
LINES_PER_SECOND_QUIET = 3.0
TARGET_BYTES_VS_HTOP = 2.0
TARGET_FOLLOW_BYTES_PER_S = 30_000
TARGET_CPU_PERCENT = 2.0
TARGET_KEY_P95_MS = 100.0
TICKS = os.sysconf("SC_CLK_TCK")


class Terminal:
    """A program in a pseudo-terminal of SIZE; everything it writes is kept with a clock."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        columns, rows = SIZE
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
        )
        os.close(slave)
        self.output = bytearray()
        self.chunks: list[tuple[float, int]] = []  # (monotonic time, bytes) of each read

    def pump(self, timeout: float) -> bool:
        """Read what there is (waiting up to `timeout`); False once the terminal closed."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 1 << 16)
        except OSError:
            return False
        if not chunk:
            return False
        self.output += chunk
        self.chunks.append((time.monotonic(), len(chunk)))
        return True

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (threads included)

    def bytes_between(self, start: float, end: float) -> int:
        return sum(size for when, size in self.chunks if start <= when < end)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        os.close(self.master)


def pump_all(terminals: list[Terminal], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        masters = {terminal.master: terminal for terminal in terminals}
        ready, _, _ = select.select(list(masters), [], [], left)
        for fd in ready:
            masters[fd].pump(0)


def wait_for(
    terminal: Terminal,
    pattern: bytes,
    seconds: float,
    since: int = 0,
    others: list[Terminal] | None = None,
) -> float:
    """Read until `pattern` is in the output after byte `since`; the time it showed. `others`:
    terminals read meanwhile too (a program whose terminal is not read blocks)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pattern in terminal.output[since:]:
            return time.monotonic()
        if terminal.process.poll() is not None and not terminal.pump(0):
            break
        if others:
            masters = {other.master: other for other in others}
            masters[terminal.master] = terminal
            ready, _, _ = select.select(list(masters), [], [], 0.05)
            for fd in ready:
                masters[fd].pump(0)
        elif not terminal.pump(0.05):
            break
    tail = bytes(terminal.output[-600:])
    raise RuntimeError(f"{pattern!r} never showed within {seconds} s; output ends {tail!r}")


def environment(home: Path, tree: Path | EllipsisType | None = ...) -> dict[str, str]:
    """The programs' environment; the workbench of `tree` (default: CHECKOUT) on PYTHONPATH."""
    checkout = CHECKOUT if tree is ... else tree
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "HOME": str(home)}
    for name in ("COLUMNS", "LINES", "TEXTUAL", "TEXTUAL_DRIVER", "NO_COLOR"):
        env.pop(name, None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    paths = [p for p in env.get("PYTHONPATH", "").split(":") if p and Path(p) != REPO]
    if checkout is not None:
        paths = [p for p in paths if Path(p) != checkout]
        env["PYTHONPATH"] = ":".join([str(checkout), *paths])
    return env


CHECKOUT: Path | None = None  # --checkout: another workbench's tree, run instead of this one


def workbench_argv(state: Path, tree: Path | EllipsisType | None = ...) -> list[str]:
    checkout = CHECKOUT if tree is ... else tree
    script = Path(sys.executable).parent / "workbench"
    if checkout is not None:
        command, configs = [sys.executable, "-m", "workbench"], checkout / "configs"
    else:
        command = [str(script)] if script.exists() else [sys.executable, "-m", "workbench"]
        configs = REPO / "configs"
    return [*command, "--config", str(configs), "--state-dir", str(state)]


def baseline_argv() -> tuple[str, list[str]]:
    if shutil.which("htop"):
        return "htop", ["htop"]
    return "top", ["top"]


# -- the quiet build --------------------------------------------------------------------------


def unit_seconds(work: Path, depth: int) -> float:
    """How long g++ takes for one heavy unit of the sample project at `depth`."""
    source = work / "calibrate"
    sample_project.write_project(source, units=1, heavy=(0,), depth=depth)
    began = time.monotonic()
    subprocess.run(
        ["g++", "-std=c++17", "-c", str(source / "heavy_0.cc"), "-o", str(source / "h.o")],
        check=True,
    )
    return time.monotonic() - began


def quiet_project(work: Path, jobs: int, seconds: float, calibrate: bool = True) -> Path:
    """A project whose -jJOBS build prints ~3 lines/s for at least `seconds`; its build dir.
    `calibrate=False`: units of depth 1, timed once (more lines/s; --quick)."""
    # One ninja line per unit: units finishing at 3 a second over `jobs` slots.
    wanted = jobs / LINES_PER_SECOND_QUIET
    depth = 6 if calibrate else 1
    took = unit_seconds(work, depth)
    # Compile time grows about linearly with the template chain's depth.
    for _ in range(3 if calibrate else 0):
        depth = max(6, min(400, round(depth * wanted / max(took, 0.05))))
        took = unit_seconds(work, depth)
        if 0.7 * wanted <= took <= 1.4 * wanted:
            break
    units = math.ceil(seconds * jobs / took * 1.3) + jobs
    source, build = work / "quiet" / "src", work / "quiet" / "build"
    sample_project.write_project(source, units=units, heavy=tuple(range(units)), depth=depth)
    subprocess.run(sample_project.configure_argv(source, build), check=True, capture_output=True)
    return build


def start_build(
    state: Path, env: dict[str, str], name: str, argv: list[str], cwd: Path | None = None
) -> None:
    done = subprocess.run(
        [*workbench_argv(state), "run", "-d", "--name", name, "--", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"workbench run -d failed: {done.stdout}{done.stderr}")


def stop_builds(state: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [*workbench_argv(state), "status", "--json"], env=env, capture_output=True, text=True
    )
    with contextlib.suppress(ValueError):
        for build in json.loads(done.stdout).get("running", []):
            if build.get("id") is not None:
                subprocess.run(
                    [*workbench_argv(state), "stop", str(build["id"])],
                    env=env,
                    input="y\n",
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )


def build_screen_shown(tui: Terminal, seconds: float) -> None:
    wait_for(tui, b"Build tools", seconds)


def measure_quiet(
    work: Path,
    state: Path,
    env: dict[str, str],
    jobs: int,
    warmup: float,
    seconds: float,
    keep: Path | None,
    presses: int,
    calibrate: bool = True,
) -> dict[str, Any]:
    build = quiet_project(work, jobs, warmup + seconds + presses * 0.6 + 15, calibrate)
    start_build(state, env, "quiet", ["ninja", "-C", str(build), f"-j{jobs}"], cwd=work)
    name, argv = baseline_argv()
    tui = Terminal(workbench_argv(state), env, work)
    baseline = Terminal(argv, env, work)
    result: dict[str, Any] = {}
    try:
        build_screen_shown(tui, 60)
        pump_all([tui, baseline], warmup)
        began = time.monotonic()
        cpu_tui, cpu_baseline = tui.cpu_seconds(), baseline.cpu_seconds()
        pump_all([tui, baseline], seconds)
        ended = time.monotonic()
        cpu_tui = tui.cpu_seconds() - cpu_tui
        if baseline.process.poll() is not None:
            raise RuntimeError(f"{name} exited: {bytes(baseline.output[-400:])!r}")
        cpu_baseline = baseline.cpu_seconds() - cpu_baseline
        window = ended - began
        tui_bytes = tui.bytes_between(began, ended)
        base_bytes = baseline.bytes_between(began, ended)
        per_second = [tui.bytes_between(began + s, began + s + 1) for s in range(int(window))]
        result = {
            "what": f"a real -j{jobs} build of heavy C++ units, ~{LINES_PER_SECOND_QUIET:g} "
            "log lines/s; the TUI on its build screen (processes pane) beside "
            f"`{' '.join(argv)}`, both {SIZE[0]}x{SIZE[1]}, same window",
            "window_s": round(window, 2),
            "tui_bytes_per_s": round(tui_bytes / window, 1),
            "tui_bytes_each_second": per_second,
            "baseline": name,
            "baseline_bytes_per_s": round(base_bytes / window, 1),
            "bytes_vs_baseline": round(tui_bytes / max(base_bytes, 1), 2),
            "tui_cpu_s": round(cpu_tui, 3),
            "tui_cpu_percent_of_a_core": round(100 * cpu_tui / window, 2),
            "baseline_cpu_s": round(cpu_baseline, 3),
            "baseline_cpu_percent_of_a_core": round(100 * cpu_baseline / window, 2),
        }
        if presses:
            result["keys"] = key_latency(tui, presses)
        result["build_still_running"] = build_running(state, env)
        if keep is not None:
            (keep / "quiet-tui.out").write_bytes(bytes(tui.output))
            (keep / f"quiet-{name}.out").write_bytes(bytes(baseline.output))
    finally:
        tui.close()
        baseline.close()
        stop_builds(state, env)
    return result


def measure_quiet_together(
    work: Path,
    state: Path,
    trees: list[Path | None],
    jobs: int,
    warmup: float,
    seconds: float,
    keep: Path | None,
    presses: int,
    calibrate: bool = True,
) -> list[dict[str, Any]]:
    """`measure_quiet` for several workbench trees at once: one TUI of each beside htop, on
    the same build, over the same window (a loaded host's load changes from one minute to the
    next: measured apart, its noise is most of a ratio); key presses taken in turn, one TUI
    after the other. One result per tree, shaped as `measure_quiet`'s."""
    build = quiet_project(work, jobs, warmup + seconds + presses * len(trees) * 0.6 + 15, calibrate)
    env = environment(work / "home", None)
    start_build(state, env, "quiet", ["ninja", "-C", str(build), f"-j{jobs}"], cwd=work)
    name, argv = baseline_argv()
    tuis = [
        Terminal(workbench_argv(state, tree), environment(work / "home", tree), work)
        for tree in trees
    ]
    baseline = Terminal(argv, env, work)
    every = [*tuis, baseline]
    results: list[dict[str, Any]] = []
    try:
        for tui in tuis:
            wait_for(tui, b"Build tools", 60, others=every)
        pump_all(every, warmup)
        began = time.monotonic()
        cpu = [terminal.cpu_seconds() for terminal in every]
        pump_all(every, seconds)
        ended = time.monotonic()
        cpu = [terminal.cpu_seconds() - before for terminal, before in zip(every, cpu, strict=True)]
        if baseline.process.poll() is not None:
            raise RuntimeError(f"{name} exited: {bytes(baseline.output[-400:])!r}")
        window = ended - began
        base_bytes = baseline.bytes_between(began, ended)
        for tui, tui_cpu in zip(tuis, cpu, strict=False):
            tui_bytes = tui.bytes_between(began, ended)
            results.append(
                {
                    "what": f"a real -j{jobs} build of heavy C++ units, "
                    f"~{LINES_PER_SECOND_QUIET:g} log lines/s; the TUI on its build screen "
                    "(processes pane) beside "
                    f"`{' '.join(argv)}` and the other trees' TUIs "
                    f"({', '.join(str(t or REPO) for t in trees)}), all {SIZE[0]}x{SIZE[1]}, "
                    "same window",
                    "same_window": True,
                    "window_s": round(window, 2),
                    "tui_bytes_per_s": round(tui_bytes / window, 1),
                    "tui_bytes_each_second": [
                        tui.bytes_between(began + s, began + s + 1) for s in range(int(window))
                    ],
                    "baseline": name,
                    "baseline_bytes_per_s": round(base_bytes / window, 1),
                    "bytes_vs_baseline": round(tui_bytes / max(base_bytes, 1), 2),
                    "tui_cpu_s": round(tui_cpu, 3),
                    "tui_cpu_percent_of_a_core": round(100 * tui_cpu / window, 2),
                    "baseline_cpu_s": round(cpu[-1], 3),
                    "baseline_cpu_percent_of_a_core": round(100 * cpu[-1] / window, 2),
                }
            )
        if presses:
            for result, keys in zip(results, keys_in_turn(tuis, every, presses), strict=True):
                result["keys"] = keys
        running = build_running(state, env)
        for index, result in enumerate(results):
            result["build_still_running"] = running
            if keep is not None:
                (keep / f"quiet-tui-{index}.out").write_bytes(bytes(tuis[index].output))
        if keep is not None:
            (keep / f"quiet-{name}.out").write_bytes(bytes(baseline.output))
    finally:
        for terminal in every:
            terminal.close()
        stop_builds(state, env)
    return results


def keys_in_turn(tuis: list[Terminal], every: list[Terminal], presses: int) -> list[dict[str, Any]]:
    """`key_latency` for several TUIs, their presses in turn, each TUI pressed first every other
    round (every terminal read meanwhile)."""
    times: list[list[float]] = [[] for _ in tuis]
    for press in range(presses):
        # Each TUI first in turn: the one pressed second may wait on the first one's frame.
        order = list(enumerate(tuis))
        for index, tui in order if press % 2 == 0 else reversed(order):
            pump_all(every, 0.3)
            since = len(tui.output)
            pressed = time.monotonic()
            tui.write(b"a")
            shown = wait_for(tui, TOASTS[press % 2], 10, since, others=every)
            times[index].append((shown - pressed) * 1000)
    return [latency_summary(each) for each in times]


def build_running(state: Path, env: dict[str, str]) -> bool:
    done = subprocess.run(
        [*workbench_argv(state), "status", "--json"], env=env, capture_output=True, text=True
    )
    with contextlib.suppress(ValueError):
        return bool(json.loads(done.stdout).get("running"))
    return False


TOASTS = (b"Every process of the build", b"Compilers, linkers and builders")


def key_latency(tui: Terminal, presses: int) -> dict[str, Any]:
    """Press `a` and read until its toast is on the terminal; `presses` times."""
    times: list[float] = []
    for press in range(presses):
        pump_all([tui], 0.3)  # let the screen settle between presses (a person's pace)
        since = len(tui.output)
        pressed = time.monotonic()
        tui.write(b"a")
        times.append((wait_for(tui, TOASTS[press % 2], 10, since) - pressed) * 1000)
    return latency_summary(times)


def latency_summary(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    presses = len(ordered)
    return {
        "key": "a (build tools <-> every process): from the key's byte written to the pty to "
        "its toast's text read back",
        "presses": presses,
        "median_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)], 1),
        "max_ms": round(ordered[-1], 1),
        "target_p95_ms": TARGET_KEY_P95_MS,
    }


# -- the busy log -----------------------------------------------------------------------------

CHATTY = r"""
import sys, time
rate, seconds = int(sys.argv[1]), float(sys.argv[2])
began = time.monotonic(); n = 0
while (now := time.monotonic()) - began < seconds:
    due = int((now - began) * rate)
    while n < due:
        n += 1
        sys.stdout.write(f"[{n % 900 + 1}/900] Building CXX object src/unit_{n}.cc.o (line {n})\n")
    sys.stdout.flush()
    time.sleep(0.01)
"""


def measure_follow(
    work: Path,
    state: Path,
    env: dict[str, str],
    rate: int,
    warmup: float,
    seconds: float,
    keep: Path | None,
) -> dict[str, Any]:
    script = work / "chatty.py"
    script.write_text(CHATTY)
    start_build(
        state,
        env,
        "chatty",
        [sys.executable, str(script), str(rate), str(warmup + seconds + 30)],
        cwd=work,
    )
    tui = Terminal(workbench_argv(state), env, work)
    try:
        build_screen_shown(tui, 60)
        tui.write(b"p")  # the log pane in front
        pump_all([tui], warmup)
        began = time.monotonic()
        cpu = tui.cpu_seconds()
        pump_all([tui], seconds)
        ended = time.monotonic()
        cpu = tui.cpu_seconds() - cpu
        window = ended - began
        written = tui.bytes_between(began, ended)
        if keep is not None:
            (keep / "follow-tui.out").write_bytes(bytes(tui.output))
        return {
            "what": f"`workbench run` of a program printing {rate} lines/s; the build screen "
            "with the log pane in front, following",
            "window_s": round(window, 2),
            "tui_bytes_per_s": round(written / window, 1),
            "target_bytes_per_s": TARGET_FOLLOW_BYTES_PER_S,
            "tui_cpu_percent_of_a_core": round(100 * cpu / window, 2),
        }
    finally:
        tui.close()
        stop_builds(state, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="each measured window")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="the quiet build's")
    parser.add_argument("--rate", type=int, default=1000, help="the busy log's lines/s")
    parser.add_argument("--presses", type=int, default=40, help="key presses timed")
    parser.add_argument("--keep", type=Path, help="keep each terminal's raw output here")
    parser.add_argument(
        "--checkout",
        type=Path,
        metavar="DIR",
        help="run this tree's workbench instead (e.g. `git archive` of the commit before a change)",
    )
    parser.add_argument(
        "--versus",
        type=Path,
        metavar="DIR",
        help="measure this tree's workbench too (e.g. a `git worktree add` of the commit before "
        "a change), first, in the same run: both results and their ratios are printed",
    )
    parser.add_argument(
        "--apart",
        action="store_true",
        help="with --versus: measure the two trees one after the other (each its own build and "
        "windows) instead of side by side on one build in the same window",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 1 s windows after 0.5 s, 3 presses, the quiet build's units "
        "timed once (not calibrated to 3 lines/s)",
    )
    args = parser.parse_args()
    global CHECKOUT
    if args.quick:
        args.seconds, args.warmup, args.presses, args.jobs = 1.0, 0.5, 3, min(args.jobs, 2)
    missing = sample_project.missing_tools()
    if missing:
        raise SystemExit(f"tui_terminal_cost: missing {', '.join(missing)}")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    if args.versus is None:
        CHECKOUT = args.checkout.resolve() if args.checkout else None
        print(json.dumps(measure_all(args, args.keep), indent=2))
        return
    this = args.checkout.resolve() if args.checkout else None
    if args.apart:
        CHECKOUT = args.versus.resolve()
        before = measure_all(args, args.keep / "before" if args.keep else None)
        CHECKOUT = this
        after = measure_all(args, args.keep / "after" if args.keep else None)
    else:
        before, after = measure_both(args, args.versus.resolve(), this, args.keep)
    print(json.dumps(versus(before, after), indent=2))


def versus(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Both runs and the after/before ratio of each figure (the host's noise cancels in part:
    the runs are minutes apart on the same host)."""
    figures = {
        "quiet_bytes_per_s": ("quiet", "tui_bytes_per_s"),
        "quiet_bytes_vs_baseline": ("quiet", "bytes_vs_baseline"),
        "quiet_cpu_percent_of_a_core": ("quiet", "tui_cpu_percent_of_a_core"),
        "follow_bytes_per_s": ("follow", "tui_bytes_per_s"),
        "follow_cpu_percent_of_a_core": ("follow", "tui_cpu_percent_of_a_core"),
    }
    ratios: dict[str, Any] = {}
    for name, (part, key) in figures.items():
        old, new = before[part].get(key), after[part].get(key)
        if old and new is not None:
            ratios[name] = {"before": old, "after": new, "after_over_before": round(new / old, 3)}
    for key in ("median_ms", "p95_ms"):
        old = (before["quiet"].get("keys") or {}).get(key)
        new = (after["quiet"].get("keys") or {}).get(key)
        if old and new is not None:
            ratios[f"key_{key}"] = {
                "before": old,
                "after": new,
                "after_over_before": round(new / old, 3),
            }
    return {"benchmark": "tui_terminal_cost", "versus": ratios, "before": before, "after": after}


def measure_both(
    args: argparse.Namespace, before_tree: Path, after_tree: Path | None, keep: Path | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """--versus: the quiet build's figures of both trees side by side in the same window (one
    build, one htop, the presses in turn), then each tree's busy log, one after the other."""
    global CHECKOUT
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tui-terminal-cost-"))
    try:
        (work / "home").mkdir()
        host = {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": os.getloadavg(),
        }
        quiet = measure_quiet_together(
            work,
            work / "state-quiet",
            [before_tree, after_tree],
            args.jobs,
            args.warmup,
            args.seconds,
            keep,
            args.presses,
            calibrate=not args.quick,
        )
        documents = []
        for index, tree in enumerate((before_tree, after_tree)):
            CHECKOUT = tree
            env = environment(work / "home")
            follow = measure_follow(
                work,
                work / f"state-follow-{index}",
                env,
                args.rate,
                args.warmup,
                args.seconds,
                keep / f"tree-{index}" if keep is not None else None,
            )
            documents.append(
                {
                    "benchmark": "tui_terminal_cost",
                    "size": list(SIZE),
                    "checkout": str(tree or REPO),
                    "host": host,
                    "quiet": quiet[index],
                    "follow": follow,
                    "targets": targets(quiet[index], follow),
                }
            )
        host["load_average_after"] = os.getloadavg()
        return documents[0], documents[1]
    finally:
        CHECKOUT = after_tree
        shutil.rmtree(work, ignore_errors=True)


def targets(quiet: dict[str, Any], follow: dict[str, Any]) -> dict[str, bool]:
    return {
        "quiet_bytes_at_most_2x_baseline": quiet["bytes_vs_baseline"] <= TARGET_BYTES_VS_HTOP,
        "quiet_cpu_at_most_2_percent": quiet["tui_cpu_percent_of_a_core"] <= TARGET_CPU_PERCENT,
        "follow_at_most_30_kb_per_s": follow["tui_bytes_per_s"] <= TARGET_FOLLOW_BYTES_PER_S,
        "key_p95_at_most_100_ms": (quiet.get("keys") or {}).get("p95_ms", math.inf)
        <= TARGET_KEY_P95_MS,
    }


def measure_all(args: argparse.Namespace, keep: Path | None) -> dict[str, Any]:
    """The quiet build, its keys and the busy log, with the workbench CHECKOUT names."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tui-terminal-cost-"))
    try:
        env = environment(work / "home")
        (work / "home").mkdir()
        result: dict[str, Any] = {
            "benchmark": "tui_terminal_cost",
            "size": list(SIZE),
            "checkout": str(CHECKOUT or REPO),
            "host": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "load_average_before": os.getloadavg(),
            },
        }
        result["quiet"] = measure_quiet(
            work,
            work / "state-quiet",
            env,
            args.jobs,
            args.warmup,
            args.seconds,
            keep,
            args.presses,
            calibrate=not args.quick,
        )
        result["follow"] = measure_follow(
            work, work / "state-follow", env, args.rate, args.warmup, args.seconds, keep
        )
        quiet, follow = result["quiet"], result["follow"]
        result["targets"] = targets(quiet, follow)
        result["host"]["load_average_after"] = os.getloadavg()
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
