"""Cost of the remote sampler on a build host, against the bare sampler in the same run.

A build host's sampler is `python -m workbench.monitor.stream` (workbench/remote/remote_sampler.py
runs it there over the host's one SSH connection). This measures, with N sleeping processes
running as the Nix build user nixbld1 (what `Sampler(daemon=True)` counts as a build's):

- baseline: `Sampler(daemon=True).sample()` in this process, CPU per sample (getrusage);
- stream: the stream's own process sampling as fast as it can (`--interval 0.001 --count S`),
  its CPU per sample from wait4's rusage, minus the same process's start-up alone
  (`--count 1`), and the bytes per JSON line it writes (what crosses the SSH channel);
- the zip shipped once per session to a host without an installed workbench.

Needs root (runuser -u nixbld1). Prints JSON.

    python benchmarks/remote_sampler_cost.py [--samples 200] [--processes 200]
"""

from __future__ import annotations

import argparse
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

from workbench.monitor.sampler import Sampler
from workbench.remote.remote_sampler import sampler_bundle

BUILD_USER = "nixbld1"


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _stream(count: int) -> tuple[float, int, int]:
    """(CPU seconds, bytes written, lines) of one stream run of `count` samples."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench.monitor.stream",
            *("--interval", "0.001", "--count", str(count)),
        ],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert process.stdout is not None
    data = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_utime + usage.ru_stime, len(data), data.count(b"\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 5 samples of 5 processes (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.samples, args.processes = 5, 5
    if os.geteuid() != 0:
        print(json.dumps({"error": "needs root to run processes as nixbld1"}))
        return 2
    group = subprocess.Popen(
        [
            "runuser",
            "-u",
            BUILD_USER,
            "--",
            "sh",
            "-c",
            f"for i in $(seq {args.processes}); do sleep 600 & done; wait",
        ],
        start_new_session=True,
    )
    try:
        time.sleep(1.0)
        with Sampler(daemon=True) as sampler:
            members = sampler.sample().build.processes
            before = _cpu_self()
            for _ in range(args.samples):
                sampler.sample()
            baseline_ms = (_cpu_self() - before) * 1000 / args.samples
        start_cpu, _, _ = _stream(1)
        cpu, written, lines = _stream(args.samples)
        stream_ms = (cpu - start_cpu) * 1000 / max(1, args.samples - 1)
        sample_lines = lines - 2  # the hello and psutil lines
    finally:
        os.killpg(group.pid, signal.SIGKILL)
        group.wait()
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
                "samples": args.samples,
                "build_processes_seen": members,
                "baseline_sampler_cpu_ms_per_sample": round(baseline_ms, 3),
                "stream_cpu_ms_per_sample": round(stream_ms, 3),
                "stream_start_cpu_ms": round(start_cpu * 1000, 1),
                "stream_bytes_per_sample": round(written / max(1, sample_lines), 1),
                "stream_over_baseline": round(stream_ms / baseline_ms, 2) if baseline_ms else None,
                "shipped_zip_bytes": len(sampler_bundle()),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
