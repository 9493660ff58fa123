"""Cost of the remote sampler on a build host, against the bare sampler in the same run.

A build host's sampler is `python -m workbench.monitor.stream` (workbench/remote/remote_sampler.py
runs it there over the host's one SSH connection). This measures, with N sleeping processes
running as a Nix build user (what `Sampler(daemon=True)` counts as a build's), the user held
as Nix holds its builders' (tests/nix_testing.held_build_user: the flock in
/nix/var/nix/userpool; a Nix build that took the user would kill every process of it):

- baseline: `Sampler(daemon=True).sample()` in this process, CPU per sample (getrusage);
- with_others: the same with M more sleepers started by root during the sampling: processes
  not of the build that the sampler watches, since a root process forked during a build may
  yet switch to a build user (runuser's child) and exec a builder;
- stream: the stream's own process sampling as fast as it can (`--interval 0.001 --count S`),
  its CPU per sample from wait4's rusage, minus the same process's start-up alone
  (`--count 1`), and the bytes per JSON line it writes (what crosses the SSH channel);
- the zip shipped once per session to a host without an installed workbench.

`--versus DIR` (another checkout or extract, e.g. of the commit before a sampler change) adds
the two trees' daemon samplers side by side in the same window: one worker process per tree,
each with its own `Sampler(daemon=True)` over the same processes, asked in turn for blocks of
samples (their thread CPU time each), first with the build alone, then with the others; the
medians and their ratio (this tree / DIR's) come out under "versus".

Needs root (runuser -u to a build user). Prints JSON.

    python benchmarks/remote_sampler_cost.py [--samples 200] [--processes 200] [--others 200]
        [--versus DIR [--blocks 30]]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from nix_testing import held_build_user  # noqa: E402

from workbench.monitor.sampler import Sampler  # noqa: E402
from workbench.remote.remote_sampler import sampler_bundle  # noqa: E402


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


def _sleepers(count: int, user: str) -> subprocess.Popen[bytes]:
    """`count` sleepers under one shell, as `user`."""
    script = f"for i in $(seq {count}); do sleep 600 & done; wait"
    return subprocess.Popen(
        ["runuser", "-u", user, "--", "sh", "-c", script], start_new_session=True
    )


def _others(count: int) -> subprocess.Popen[bytes]:
    """`count` root forks that do not exec (subshells, each waiting on a sleep it started), as
    a test suite or another user's work beside the build has: the daemon sampler watches such
    a process (a fork may switch to a build user, then exec a builder). Started once the
    sampler runs, as it watches only those that start during the build."""
    script = f"for i in $(seq {count}); do (sleep 600; :) & done; wait"
    group = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 60
    while len(psutil.Process(group.pid).children(recursive=True)) < 2 * count:
        if time.monotonic() > deadline:
            _stop(group)
            raise RuntimeError(f"{count} root forks and their sleepers did not start in 60 s")
        time.sleep(0.05)
    return group


def _stop(group: subprocess.Popen[bytes]) -> None:
    os.killpg(group.pid, signal.SIGKILL)
    group.wait()


def _sampled_until(sampler: Sampler, count: int) -> int:
    """Samples until `count` processes are the build's (a loaded machine starts them slowly)."""
    deadline = time.monotonic() + 60
    while (seen := sampler.sample().build.processes) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} build processes did not start within 60 s ({seen})")
        time.sleep(0.05)
    return seen


def _cpu_ms_per_sample(sampler: Sampler, samples: int) -> float:
    before = _cpu_self()
    for _ in range(samples):
        sampler.sample()
    return (_cpu_self() - before) * 1000 / samples


# One tree's daemon sampler, in a process of its own (run with the tree as its working
# directory, so that `workbench` is that tree's): reads a count per line, takes that many
# samples, answers with their thread CPU time per sample and what the last one saw.
_WORKER = """
import json, sys, time
from workbench.monitor.sampler import Sampler
sampler = Sampler(daemon=True)
for line in sys.stdin:
    count = int(line)
    started = time.thread_time()
    for _ in range(count):
        last = sampler.sample()
    spent = time.thread_time() - started
    print(json.dumps({"ms": spent * 1000 / count, "processes": last.build.processes}), flush=True)
"""


class _Worker:
    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER],
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(tree)},
        )

    def block(self, count: int) -> dict[str, float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{count}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the sampler worker of {self.tree} ended")
        answer: dict[str, float] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def _versus(args: argparse.Namespace, build: int) -> dict[str, object]:
    """This tree's daemon sampler against DIR's, interleaved block by block (see the top)."""
    this, other = _Worker(REPO), _Worker(args.versus.resolve())
    per_block = max(1, args.samples // args.blocks)
    others = None
    result: dict[str, object] = {"tree": str(args.versus), "blocks": args.blocks}
    try:
        for worker in (this, other):
            deadline = time.monotonic() + 60
            while worker.block(1)["processes"] < build:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{worker.tree}'s sampler never saw the build's {build}")
                time.sleep(0.05)
        for phase in ("build", "with_others"):
            if phase == "with_others":
                others = _others(args.others)
                this.block(1), other.block(1)  # each sees them once
            mine: list[float] = []
            theirs: list[float] = []
            for index in range(args.blocks):
                # Alternate which goes first: the second may find caches warmed by the first.
                pair = (this, other) if index % 2 == 0 else (other, this)
                for worker in pair:
                    (mine if worker is this else theirs).append(worker.block(per_block)["ms"])
            a, b = statistics.median(mine), statistics.median(theirs)
            result[phase] = {
                "this_ms_per_sample": round(a, 4),
                "versus_ms_per_sample": round(b, 4),
                "this_over_versus": round(a / b, 3) if b else None,
            }
    finally:
        if others is not None:
            _stop(others)
        this.close()
        other.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument("--others", type=int, default=200)
    parser.add_argument("--versus", type=Path, default=None)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 5 samples of 5 processes (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.samples, args.processes, args.others, args.blocks = 5, 5, 5, 2
    if os.geteuid() != 0:
        print(json.dumps({"error": "needs root to run processes as a Nix build user"}))
        return 2
    with held_build_user() as user:
        group = _sleepers(args.processes, user)
        others = None
        try:
            with Sampler(daemon=True) as sampler:
                # The sleepers and their shell.
                members = _sampled_until(sampler, args.processes + 1)
                baseline_ms = _cpu_ms_per_sample(sampler, args.samples)
                others = _others(args.others)
                sampler.sample()  # sees them, not the build's
                others_ms = _cpu_ms_per_sample(sampler, args.samples)
                watched = len(sampler._watched)
            _stop(others)
            others = None
            versus = None if args.versus is None else _versus(args, args.processes + 1)
            start_cpu, _, _ = _stream(1)
            cpu, written, lines = _stream(args.samples)
            stream_ms = (cpu - start_cpu) * 1000 / max(1, args.samples - 1)
            sample_lines = lines - 2  # the hello and psutil lines
        finally:
            if others is not None:
                _stop(others)
            _stop(group)
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
                "samples": args.samples,
                "build_user": user,
                "build_processes_seen": members,
                "baseline_sampler_cpu_ms_per_sample": round(baseline_ms, 3),
                "others": args.others,
                "others_watched": watched,
                "with_others_sampler_cpu_ms_per_sample": round(others_ms, 3),
                "stream_cpu_ms_per_sample": round(stream_ms, 3),
                "stream_start_cpu_ms": round(start_cpu * 1000, 1),
                "stream_bytes_per_sample": round(written / max(1, sample_lines), 1),
                "stream_over_baseline": round(stream_ms / baseline_ms, 2) if baseline_ms else None,
                "shipped_zip_bytes": len(sampler_bundle()),
                **({} if versus is None else {"versus": versus}),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
