"""CPU cost of one `Sampler.sample()` against the number of processes in the build, beside top.

For N in 10, 100, 500 the benchmark starts N sleeping `sleep` processes under one `sh` (the
"build"), samples them, and measures the sampler's own CPU time (user + system, from
getrusage) per sample. In the same run it measures:

- psutil doing the same per-process reads with cached `Process` objects and `oneshot()`:
  the figure that made the sampler read /proc itself (see workbench/monitor/procfs.py);
- `top -b -n 2 -d 1` over the whole system, and `top -b -n 1`, from wait4's rusage. top can
  only be limited to 20 PIDs (`-p` says "pid limit (20) exceeded" beyond that), so it runs
  over all processes, as a person watching a build with top would. One refresh costs about
  (n 2) − (n 1); top's first pass reads every process too, to compute the first %CPU.

Prints JSON. Target: at 500 processes the sampler takes < 0.5% of one core at 1 Hz (< 5 ms per
sample) and less than top.

    python benchmarks/sampler_cost.py [--samples 40] [--counts 10,100,500]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from workbench.monitor import Sampler
from workbench.monitor.procfs import list_pids


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _start_sleepers(count: int) -> subprocess.Popen[bytes]:
    parent = subprocess.Popen(
        ["sh", "-c", f"for i in $(seq {count}); do sleep 600 & done; wait"],
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(psutil.Process(parent.pid).children()) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} sleepers did not start")
        time.sleep(0.05)
    return parent


def _stop(parent: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(parent.pid, signal.SIGKILL)
    parent.wait()


def _measure_sampler(root: int, samples: int) -> tuple[float, int]:
    with Sampler(root) as sampler:
        found = len(sampler.sample().processes)  # the first sample judges every PID once
        start = _cpu_self()
        for _ in range(samples):
            time.sleep(0.02)  # not back to back: let the processes' data go cold as at 1 Hz
            sampler.sample()
        return (_cpu_self() - start) * 1000 / samples, found


def _measure_psutil(root: int, samples: int) -> float:
    """psutil with cached Process objects and oneshot(): discovery plus CPU, RSS and parent."""
    cache: dict[tuple[int, float], psutil.Process] = {}
    parent = psutil.Process(root)

    def one_sample() -> None:
        for process in [parent, *parent.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                key = (process.pid, process.create_time())
                cached = cache.setdefault(key, process)
                with cached.oneshot():
                    cached.cpu_times()
                    cached.memory_info()
                    cached.ppid()

    one_sample()
    start = _cpu_self()
    for _ in range(samples):
        time.sleep(0.02)
        one_sample()
    return (_cpu_self() - start) * 1000 / samples


def _measure_top(refreshes: int) -> float:
    top = subprocess.Popen(
        ["top", "-b", "-n", str(refreshes), "-d", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, _status, usage = os.wait4(top.pid, 0)
    top.returncode = 0
    return (usage.ru_utime + usage.ru_stime) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--counts", default="10,100,500")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 5 samples of 10 processes (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.samples, args.counts = 5, "10"
    results = []
    for count in (int(text) for text in args.counts.split(",")):
        parent = _start_sleepers(count)
        try:
            sampler_ms, found = _measure_sampler(parent.pid, args.samples)
            psutil_ms = _measure_psutil(parent.pid, max(5, args.samples // 4))
            host = len(list_pids())
            top_two = _measure_top(2)
            top_one = _measure_top(1)
        finally:
            _stop(parent)
        results.append(
            {
                "processes": count,
                "processes_found": found,
                "processes_on_host": host,
                "sampler_ms_per_sample": round(sampler_ms, 3),
                "sampler_percent_of_one_core_at_1hz": round(sampler_ms / 10, 3),
                "psutil_ms_per_sample": round(psutil_ms, 3),
                "top_b_n2_d1_ms": round(top_two, 1),
                "top_b_n1_ms": round(top_one, 1),
                "top_ms_per_refresh": round(max(0.0, top_two - top_one), 1),
            }
        )
    at_500 = next((row for row in results if row["processes"] == 500), None)
    report = {
        "benchmark": "sampler_cost",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "kernel": platform.release(),
        },
        "method": "CPU time (user+sys) of this process per sample via getrusage; top via wait4",
        "top_scope": "whole system (top -p takes at most 20 PIDs)",
        "results": results,
    }
    if at_500 is not None:
        report["target_500"] = {
            "sampler_under_half_percent_of_a_core": at_500["sampler_percent_of_one_core_at_1hz"]
            < 0.5,
            "sampler_cheaper_than_top_per_refresh": at_500["sampler_ms_per_sample"]
            < at_500["top_ms_per_refresh"],
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
