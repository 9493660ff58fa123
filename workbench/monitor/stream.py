"""`python -m workbench.monitor.stream`: the sampler on a build host, one JSON line a second.

Run on a remote build host by the workbench over its one SSH connection to that host
(`workbench.remote.remote_sampler`): it samples the processes of Nix builds there (the
nix-daemon's builders and what runs as a `nixbld*` user, `Sampler(daemon=True)`) and writes
to stdout, flushed, a first line `{"hello": ..., "via": ..., "pid": ...}` and then per sample

    {"t": 1700000000.0, "cpu_percent": 12.5, "cpus": 16, "memory_available": ...,
     "memory_total": ..., "jobs": [{"pid": 4242, "tool": "cc1plus", "file": "x.cc",
     "kind": "compiler", "cpu_percent": 99.0, "rss": 312000000, "derivation": "..."}]}

`jobs` holds one entry per compile or link job (its top process's file, the CPU and RSS of
the whole job: g++ with its cc1plus and as). It stops when its stdout is closed (the SSH
session ended) or, with `--stdin-eof`, when its stdin reaches end of file (the workbench
closed it); with `--stdin-eof`, each stdin line `{"derivations": [...]}` adds names to those
of `--derivation` (a dependency's builder, learnt from the build's log as Nix starts it there).
Needs the standard library only (no psutil where /proc/meminfo is readable).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from workbench.monitor.sampler import Sample, Sampler

PROTOCOL = 1


def jobs_of(sample: Sample) -> list[dict[str, Any]]:
    """One entry per compile or link job, busiest first: its file, CPU and RSS summed."""
    jobs: dict[int, dict[str, Any]] = {}
    for process in sample.processes:
        if not process.job:
            continue
        job = jobs.setdefault(
            process.job,
            {
                "pid": process.job,
                "tool": "",
                "file": None,
                "kind": process.job_kind,
                "cpu_percent": 0.0,
                "rss": 0,
                "derivation": process.derivation,
            },
        )
        job["cpu_percent"] += process.cpu_percent
        job["rss"] += process.rss
        # The process doing the work names it: cc1plus compiling x.cc rather than its g++.
        if process.file and (job["file"] is None or process.pid != process.job):
            job["file"], job["tool"] = process.file, process.tool
        elif not job["tool"]:
            job["tool"] = process.tool
    ordered = sorted(jobs.values(), key=lambda job: -job["cpu_percent"])
    for job in ordered:
        job["cpu_percent"] = round(job["cpu_percent"], 1)
    return ordered


def sample_line(sample: Sample) -> str:
    """The JSON line for one sample."""
    build = sample.build
    return json.dumps(
        {
            "t": round(build.t, 3),
            "cpu_percent": round(build.cpu_percent, 1),
            "cpus": build.cpus,
            "memory_available": build.memory_available,
            "memory_total": build.memory_total,
            "jobs": jobs_of(sample),
        },
        separators=(",", ":"),
    )


class LearntNames:
    """Derivation names the workbench sends on stdin as the build's log reveals them, one JSON
    line each `{"derivations": [NAME, ...]}` (a dependency's builder, "onnxruntime-cpp-1.23",
    is not one of the targets named on the command line); other lines are ignored."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: list[str] = []

    def read_line(self, line: bytes) -> None:
        try:
            data = json.loads(line)
        except ValueError:
            return
        names = data.get("derivations") if isinstance(data, dict) else None
        if isinstance(names, list):
            with self._lock:
                self._names += [name for name in names if isinstance(name, str) and name]

    def take(self) -> list[str]:
        with self._lock:
            names, self._names = self._names, []
        return names


def _end_at_stdin_eof(learnt: LearntNames) -> None:
    def watch() -> None:
        for line in sys.stdin.buffer:
            learnt.read_line(line)
        os._exit(0)  # the workbench closed our stdin: its session is over

    threading.Thread(target=watch, daemon=True).start()


def run(
    interval_s: float,
    via: str,
    count: int | None,
    stdin_eof: bool,
    derivations: tuple[str, ...] = (),
) -> int:
    """Sample every `interval_s` seconds (`count` times, or until stdout or stdin closes).

    `derivations`: only builders of these derivations (names, "onnxruntime-1.23.2") count;
    without names, every Nix build on the host does."""
    learnt = LearntNames()
    if stdin_eof:
        _end_at_stdin_eof(learnt)
    out = sys.stdout
    hello = {"hello": PROTOCOL, "via": via, "pid": os.getpid(), "python": sys.version.split()[0]}
    try:
        out.write(json.dumps(hello) + "\n")
        out.flush()
        with Sampler(daemon=True, derivations=derivations) as sampler:
            first = sample_line(sampler.sample())
            # Said once: whether psutil had to be imported (the shipped path works without).
            out.write(json.dumps({"psutil_imported": "psutil" in sys.modules}) + "\n")
            out.write(first + "\n")
            out.flush()
            done = 1
            next_at = time.monotonic()
            while count is None or done < count:
                next_at += interval_s
                time.sleep(max(0.0, next_at - time.monotonic()))
                sampler.add_derivations(learnt.take())
                out.write(sample_line(sampler.sample()) + "\n")
                out.flush()
                done += 1
    except BrokenPipeError:
        # The reader went away (the SSH session ended): nothing left to say it to.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: --interval SECONDS, --via NAME, --count N, --stdin-eof, --derivation NAME."""
    parser = argparse.ArgumentParser(prog="python -m workbench.monitor.stream")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--via", default="installed", help="how the code got here (reported)")
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--stdin-eof", action="store_true", help="stop when stdin closes")
    parser.add_argument(
        "--derivation",
        action="append",
        default=[],
        help="only builders of this derivation (repeat; default: every Nix build here)",
    )
    args = parser.parse_args(argv)
    if args.interval <= 0:
        parser.error("--interval must be above 0")
    return run(args.interval, args.via, args.count, args.stdin_eof, tuple(args.derivation))


if __name__ == "__main__":
    sys.exit(main())
