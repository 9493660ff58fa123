"""Benchmark: the workbench's capture of a 64-thread program against plain gdb batch mode.

Builds tests/debugging/fixtures/many_threads.cc with g++, starts it, then times, in
alternation so that machine noise hits both alike:
  - `capture(pid, samples=1)`: gdb through pygdbmi, attach, every thread's frames, detach;
  - `gdb -batch -nx -p PID -ex "thread apply all bt"` (what the seeds' debug-bt runs).
Prints JSON with the median of each, the ratio (target <= 1.2) and the raw timings.

    python benchmarks/gdb_capture.py [--threads 64] [--repetitions 9]
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workbench.debugging.capture.loop import capture  # noqa: E402
from workbench.debugging.capture.options import CaptureOptions  # noqa: E402

SOURCE = REPO / "tests" / "debugging" / "fixtures" / "many_threads.cc"


def build(directory: Path) -> Path:
    binary = directory / "many_threads"
    subprocess.run(["g++", "-O2", "-g", "-pthread", str(SOURCE), "-o", str(binary)], check=True)
    return binary


def time_workbench(pid: int, threads: int) -> float:
    begin = time.perf_counter()
    result = capture(pid, CaptureOptions(samples=1, observe=0.0))
    elapsed = time.perf_counter() - begin
    seen = len(result.samples[0].threads)
    if seen != threads + 1:
        raise SystemExit(f"workbench saw {seen} threads, expected {threads + 1}")
    return elapsed


def time_gdb_batch(pid: int, threads: int) -> float:
    gdb = shutil.which("gdb") or "gdb"
    begin = time.perf_counter()
    done = subprocess.run(
        [gdb, "-batch", "-nx", "-p", str(pid), "-ex", "thread apply all bt"],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - begin
    seen = done.stdout.count("\nThread ") + done.stdout.startswith("Thread ")
    if seen != threads + 1:
        raise SystemExit(f"gdb -batch showed {seen} threads, expected {threads + 1}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--repetitions", type=int, default=9)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 4 threads, one repetition (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.threads, args.repetitions = 4, 1
    with tempfile.TemporaryDirectory(prefix="wb-bench-") as temp:
        binary = build(Path(temp))
        program = subprocess.Popen(
            [str(binary), str(args.threads)],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert program.stdout is not None
            program.stdout.readline()  # "ready": every thread is started
            time_workbench(program.pid, args.threads)  # warm the page cache for both
            time_gdb_batch(program.pid, args.threads)
            workbench, batch = [], []
            for repetition in range(args.repetitions):
                # Alternate which goes first so drift in machine load does not favour one.
                pair = [time_workbench, time_gdb_batch]
                if repetition % 2:
                    pair.reverse()
                for timer in pair:
                    (workbench if timer is time_workbench else batch).append(
                        timer(program.pid, args.threads)
                    )
        finally:
            os.killpg(program.pid, signal.SIGKILL)
            program.wait()
    workbench_median = statistics.median(workbench)
    batch_median = statistics.median(batch)
    print(
        json.dumps(
            {
                "threads": args.threads + 1,
                "repetitions": args.repetitions,
                "workbench_capture_s": round(workbench_median, 4),
                "gdb_batch_bt_s": round(batch_median, 4),
                "ratio": round(workbench_median / batch_median, 3),
                "target_ratio": 1.2,
                "workbench_runs_s": [round(value, 4) for value in workbench],
                "gdb_batch_runs_s": [round(value, 4) for value in batch],
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
