"""Start-up times, each beside a baseline measured in the same run. Prints JSON.

1. `workbench --version` (target: under 150 ms) and `workbench variants --names`, beside bare
   `python -c pass`: fresh processes, so the interpreter's own start-up is the baseline.
2. The first screen (target: drawn within 600 ms of the command). `workbench` (the TUI) is
   started in a real pseudo-terminal (80x24, TERM=xterm-256color) on the repository's configs and
   an empty state directory, and timed from spawn until its first frame's footer ("Quit") has
   been written to the terminal. Baselines, the same way in the same run: `python -c "import
   textual.app"` (importing Textual alone) and a bare Textual app (a header, a line of text and a
   footer with a Quit key) until its first frame: what any Textual app costs on this machine.

Python's bytecode cache is allowed in every measured process (PYTHONDONTWRITEBYTECODE, which the
development VM sets, is dropped from their environment), as an installed package or any second
run from a checkout has it; the first, unmeasured run of each command writes it.

Run: python benchmarks/startup.py [--runs N] [--pty-runs N]
"""

from __future__ import annotations

import argparse
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

REPO = Path(__file__).resolve().parent.parent
VERSION_TARGET_MS = 150.0
FIRST_SCREEN_TARGET_MS = 600.0
FOOTER_MARKER = b"Quit"
ALTERNATE_SCREEN = b"\x1b[?1049h"

# The floor: the least a Textual app with a header and a footer costs to draw its first frame.
BARE_TEXTUAL_APP = """
from textual.app import App
from textual.widgets import Footer, Header, Static

class Bare(App):
    BINDINGS = [("q", "quit", "Quit")]

    def compose(self):
        yield Header()
        yield Static("first screen")
        yield Footer()

Bare().run()
"""


def child_environment() -> dict[str, str]:
    """This environment, with Python's bytecode cache allowed."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed_runs(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    subprocess.run(argv, capture_output=True, check=True, env=env)  # warm the caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env)
        times.append((time.perf_counter() - start) * 1000)
    return times


def first_frame_ms(
    argv: list[str], cwd: Path, env: dict[str, str], size: tuple[int, int] = (80, 24)
) -> float:
    """Milliseconds from spawning `argv` in a fresh pty until its first frame's footer shows."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    for name in ("COLUMNS", "LINES", "TEXTUAL", "TEXTUAL_DRIVER"):
        env.pop(name, None)
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, cwd=cwd
    )
    os.close(slave)
    seen = b""
    elapsed = None
    try:
        deadline = started + 15
        while time.perf_counter() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            # The alternate screen is entered first; the footer is drawn in the first frame.
            if ALTERNATE_SCREEN in seen and FOOTER_MARKER in seen.split(ALTERNATE_SCREEN, 1)[1]:
                elapsed = (time.perf_counter() - started) * 1000
                break
    finally:
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
        raise RuntimeError(f"{argv[0]}: no first frame within 15 s; output ends {seen[-400:]!r}")
    return elapsed


def first_frame_runs(argv: list[str], runs: int, cwd: Path, env: dict[str, str]) -> list[float]:
    first_frame_ms(argv, cwd, env)  # warm the page cache (and write the bytecode cache)
    return [first_frame_ms(argv, cwd, env) for _ in range(runs)]


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(ordered[max(0, int(len(ordered) * 0.9) - 1)], 1),
        "min_ms": round(ordered[0], 1),
        "max_ms": round(ordered[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30, help="runs of each command-line timing")
    parser.add_argument("--pty-runs", type=int, default=9, help="runs of each first-screen timing")
    parser.add_argument("--no-pty", action="store_true", help="skip the first-screen timings")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 3 runs, one first screen (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.pty_runs = 3, 1
    env = child_environment()
    script = Path(sys.executable).parent / "workbench"
    command = [str(script)] if script.exists() else [shutil.which("workbench") or "workbench"]
    baseline = timed_runs([sys.executable, "-c", "pass"], args.runs, env)
    version = timed_runs([*command, "--version"], args.runs, env)
    variants = timed_runs([*command, "variants", "--names"], max(5, args.runs // 3), env)
    result: dict[str, object] = {
        "benchmark": "startup",
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "python_c_pass": summary(baseline),
        "workbench_version": summary(version),
        "workbench_variants_names": summary(variants),
        "version_over_bare_python_ms": round(
            statistics.median(version) - statistics.median(baseline), 1
        ),
        "target_ms": VERSION_TARGET_MS,
        "meets_target": statistics.median(version) < VERSION_TARGET_MS,
    }
    if not args.no_pty:
        state = Path(tempfile.mkdtemp(prefix="startup-bench-"))
        try:
            textual_import = timed_runs(
                [sys.executable, "-c", "import textual.app"], max(5, args.pty_runs), env
            )
            bare = first_frame_runs(
                [sys.executable, "-c", BARE_TEXTUAL_APP], args.pty_runs, REPO, env
            )
            tui = first_frame_runs(
                [*command, "--config", str(REPO / "configs"), "--state-dir", str(state)],
                args.pty_runs,
                REPO,
                env,
            )
        finally:
            shutil.rmtree(state, ignore_errors=True)
        result["first_screen"] = {
            "method": (
                "spawn in a pty (80x24) until the first frame's footer is on the terminal; "
                "`workbench --config configs --state-dir EMPTY`"
            ),
            "runs": args.pty_runs,
            "import_textual_app": summary(textual_import),
            "bare_textual_app": summary(bare),
            "workbench": summary(tui),
            "workbench_over_bare_textual_ms": round(
                statistics.median(tui) - statistics.median(bare), 1
            ),
            "target_ms": FIRST_SCREEN_TARGET_MS,
            "meets_target": statistics.median(tui) < FIRST_SCREEN_TARGET_MS,
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
