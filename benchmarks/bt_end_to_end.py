"""Benchmark: `workbench bt PID` end to end against plain gdb's batch backtrace, same run.

What a user waits for: from starting the command to the printed diagnosis. For 1, 8 and 64
threads of two real programs built here with g++ (-O2 -g):
  - "cycle": tests/debugging/fixtures' provider-bridge loop, every thread spinning in it
    (the hang the workbench exists for: threads always running, so every stop costs);
  - "waiting": tests/debugging/fixtures/many_threads.cc, every thread blocked a few frames deep;
each process is timed, in alternation so that machine noise hits both alike, with
  - `workbench bt PID` exactly as a user types it (the console script, default options: one
    stack sample after the program-counter sampling of every running thread), checked to print
    a diagnosis (for the cycle: "call cycle … HUNG");
  - `gdb -batch -p PID -ex 'thread apply all bt'`, checked to show every thread.
Prints JSON: per case the medians, their ratio (target <= 1.2), every run, and in how many
runs the diagnosis says a thread was single-stepped (`workbench_stepped_runs`, and which in
`workbench_runs_stepped`: the provider bridge's other side not read from the binary; each such
run pays 80 more gdb commands).

Both use the same debugger: `gdb`, else `cuda-gdb` (the lent GPU hosts have no plain gdb; it
debugs programs without GPU code too), named to the workbench with --gdb.

--versus DIR also times another checkout's `workbench bt` (a git worktree of the commit before a
change) in the same alternation: the same console script, run with PYTHONPATH=DIR and cwd=DIR so
that DIR's package is the one imported (the venv's editable install names this checkout, which
gets PYTHONPATH=REPO likewise). Each case then says the other checkout's median and ratio too.

Python's bytecode cache is allowed (PYTHONDONTWRITEBYTECODE is dropped from the environment,
as an installed package has its cache); the first, unmeasured run of each command warms it and
the page cache for both.

    python benchmarks/bt_end_to_end.py [--threads 1 8 64] [--repetitions 7] [--versus DIR]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "debugging" / "fixtures"
TARGET_RATIO = 1.2
PROGRAMS = {
    "cycle": ["bridge_provider.cc", "bridge_host.cc"],
    "waiting": ["many_threads.cc"],
}


def commit(checkout: Path) -> str | None:
    """The checkout's commit; None where it is no git checkout of its own (a copy inside
    another repository would otherwise name that repository's commit)."""
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--show-toplevel", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.split()
    if len(lines) != 2 or Path(lines[0]).resolve() != checkout.resolve():
        return None
    return lines[1]


def build(directory: Path) -> dict[str, Path]:
    binaries = {}
    for name, sources in PROGRAMS.items():
        binary = directory / name
        subprocess.run(
            ["g++", "-O2", "-g", "-pthread", f"-I{FIXTURES}"]
            + [str(FIXTURES / source) for source in sources]
            + ["-o", str(binary)],
            check=True,
        )
        binaries[name] = binary
    return binaries


def workbench_argv() -> list[str]:
    script = Path(sys.executable).parent / "workbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "workbench"]


def environment(checkout: Path) -> dict[str, str]:
    """The environment that imports `checkout`'s workbench package (checked in main)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


def imported_from(checkout: Path) -> Path:
    """Where `workbench` is imported from when run for `checkout` (must be inside it)."""
    done = subprocess.run(
        [sys.executable, "-c", "import workbench; print(workbench.__file__)"],
        capture_output=True,
        text=True,
        env=environment(checkout),
        cwd=checkout,
        check=True,
    )
    return Path(done.stdout.strip()).resolve()


STEPPED = "single-stepping the thread went round"


def time_workbench(
    pid: int, kind: str, checkout: Path, gdb: str, stepped: list[bool] | None = None
) -> float:
    """Seconds of one `workbench bt PID`; `stepped` gets whether its diagnosis says a thread
    was single-stepped (the bridge's other side not read from the binary: the slow way)."""
    env = environment(checkout)
    begin = time.perf_counter()
    done = subprocess.run(
        [*workbench_argv(), "bt", str(pid), "--gdb", gdb],
        capture_output=True,
        text=True,
        env=env,
        cwd=checkout,
        check=False,
    )
    elapsed = time.perf_counter() - begin
    if done.returncode != 0 or "Diagnosis:" not in done.stdout:
        raise SystemExit(
            f"workbench bt ({checkout}) failed ({done.returncode}): {done.stderr or done.stdout}"
        )
    if kind == "cycle" and "Diagnosis: call cycle (tail-calls) — HUNG" not in done.stdout:
        raise SystemExit(f"workbench bt did not find the cycle:\n{done.stdout[:2000]}")
    if stepped is not None:
        stepped.append(STEPPED in done.stdout)
    return elapsed


def time_gdb(pid: int, threads: int, gdb: str) -> float:
    begin = time.perf_counter()
    done = subprocess.run(
        [gdb, "-batch", "-p", str(pid), "-ex", "thread apply all bt"],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - begin
    seen = done.stdout.count("\nThread ") + done.stdout.startswith("Thread ")
    if seen != threads + 1:
        raise SystemExit(f"gdb -batch showed {seen} threads, expected {threads + 1}")
    return elapsed


def measure(
    binary: Path, kind: str, threads: int, repetitions: int, gdb: str, versus: Path | None
) -> dict[str, object]:
    program = subprocess.Popen(
        [str(binary), str(threads)], stdout=subprocess.PIPE, start_new_session=True
    )
    stepped: dict[str, list[bool]] = {"workbench": [], "versus": []}
    timers: dict[str, Callable[[], float]] = {
        "workbench": lambda: time_workbench(program.pid, kind, REPO, gdb, stepped["workbench"]),
        "gdb": lambda: time_gdb(program.pid, threads, gdb),
    }
    if versus is not None:
        timers["versus"] = lambda: time_workbench(program.pid, kind, versus, gdb, stepped["versus"])
    runs: dict[str, list[float]] = {name: [] for name in timers}
    order = list(timers)
    try:
        assert program.stdout is not None
        program.stdout.readline()  # "ready"
        time.sleep(0.5)  # every thread started and in its loop or wait
        for timer in timers.values():  # warm the caches, unmeasured
            timer()
        for flags in stepped.values():
            flags.clear()
        for repetition in range(repetitions):
            # Each command goes first, second (and third) in turn: noise hits all alike.
            shift = repetition % len(order)
            for name in order[shift:] + order[:shift]:
                runs[name].append(timers[name]())
    finally:
        os.killpg(program.pid, signal.SIGKILL)
        program.wait()
    medians = {name: statistics.median(values) for name, values in runs.items()}
    case: dict[str, object] = {
        "program": kind,
        "threads": threads + 1,
        "workbench_bt_s": round(medians["workbench"], 3),
        "gdb_batch_bt_s": round(medians["gdb"], 3),
        "ratio": round(medians["workbench"] / medians["gdb"], 3),
        "within_target": medians["workbench"] / medians["gdb"] <= TARGET_RATIO,
        "workbench_runs_s": [round(value, 3) for value in runs["workbench"]],
        "gdb_batch_runs_s": [round(value, 3) for value in runs["gdb"]],
        "workbench_stepped_runs": sum(stepped["workbench"]),
        "workbench_runs_stepped": stepped["workbench"],
    }
    if versus is not None:
        case["versus_bt_s"] = round(medians["versus"], 3)
        case["versus_ratio"] = round(medians["versus"] / medians["gdb"], 3)
        case["versus_runs_s"] = [round(value, 3) for value in runs["versus"]]
        case["versus_stepped_runs"] = sum(stepped["versus"])
        case["versus_runs_stepped"] = stepped["versus"]
    return case


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=list(PROGRAMS))
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--out", type=Path, help="also write the JSON to FILE")
    parser.add_argument(
        "--versus",
        type=Path,
        metavar="DIR",
        help="also time DIR's workbench bt (another checkout, e.g. a worktree of the commit "
        "before a change), in the same alternation",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 1 and 8 threads, one repetition (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.threads, args.repetitions = [1, 8], 1
    versus = args.versus.resolve() if args.versus else None
    for checkout in filter(None, [REPO, versus]):
        if not imported_from(checkout).is_relative_to(checkout):
            raise SystemExit(f"{checkout}: its workbench package is not the one imported")
    gdb = shutil.which("gdb") or shutil.which("cuda-gdb")
    if gdb is None or shutil.which("g++") is None:
        raise SystemExit("needs gdb (or cuda-gdb) and g++")
    version = subprocess.run([gdb, "--version"], capture_output=True, text=True, check=False)
    cases = []
    with tempfile.TemporaryDirectory(prefix="wb-bt-bench-") as temp:
        binaries = build(Path(temp))
        for kind in args.programs:
            for threads in args.threads:
                cases.append(measure(binaries[kind], kind, threads, args.repetitions, gdb, versus))
    text = json.dumps(
        {
            "benchmark": "bt_end_to_end",
            "command": f"workbench bt PID --gdb {gdb}",
            "baseline": f"{gdb} -batch -p PID -ex 'thread apply all bt'",
            "checkout": str(REPO),
            "commit": commit(REPO),
            "versus": str(versus) if versus else None,
            "versus_commit": commit(versus) if versus else None,
            "gdb_version": version.stdout.splitlines()[0] if version.stdout else None,
            "python": sys.version.split()[0],
            "target_ratio": TARGET_RATIO,
            "cpus": os.cpu_count(),
            "load_average_before": os.getloadavg(),
            "repetitions": args.repetitions,
            "cases": cases,
        },
        indent=2,
    )
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
