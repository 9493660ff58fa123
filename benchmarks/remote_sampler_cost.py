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
the two trees' daemon samplers side by side in the same window, on equal terms: each round
starts one fresh worker process per tree (which starts first alternates by round), each with
its own `Sampler(daemon=True)` over the same processes, pinned by default to one CPU for both
(they take turns, never run at once: the same core, clock and caches; `--pin apart|none`),
asked in turn for blocks of samples (which goes first alternates by block; their thread CPU
time each), first with the build alone, then with the others started beside it. Each round's
forks are killed and reaped by this process (their subreaper) before the next round starts:
an init that reaps orphans slowly (the VM's and the H100 host's take up to ~2 s) would leave
them as zombies, root forks "started during the build" that one tree's sampler may watch and
the other not. That is what made this harness read 1.35-1.72x on the H100 host for a sampler
that costs the same (last session): the forks killed just before the workers started were
still zombies, watched by the newer sampler, through the whole of that fast host's build
phase. The medians per round, their ratio (this tree / DIR's), the ratios' spread
(median, quartiles, min, max), and per round what each sampler watched and the CPUs its
blocks ran on come out under "versus"; "host" says what may differ between hosts (kernel,
schedstat, descriptor limit, init). `--versus .` compares this tree with itself (A/A).

Needs root (runuser -u to a build user). Prints JSON.

    python benchmarks/remote_sampler_cost.py [--samples 200] [--processes 200] [--others 200]
        [--versus DIR [--blocks 30] [--rounds 5] [--pin same|apart|none]]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
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
# directory, so that `workbench` is that tree's), pinned to the CPU set it is given (none: left
# to the scheduler): reads a count per line, takes that many samples, answers with their thread
# CPU time per sample, what the last one saw (the build's processes, the processes watched as
# ones that may still become builders), and the CPU the block ended on.
_WORKER = """
import json, os, sys, time
cpus = sys.argv[1]
if cpus != "none":
    os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})
from workbench.monitor.sampler import Sampler
sampler = Sampler(daemon=True, cpus=os.cpu_count())
def cpu():
    with open("/proc/thread-self/stat", "rb") as stat:
        return int(stat.read().rpartition(b")")[2].split()[36])
for line in sys.stdin:
    count = int(line)
    started = time.thread_time()
    for _ in range(count):
        last = sampler.sample()
    spent = time.thread_time() - started
    watched = len(getattr(sampler, "_watched", ()))
    print(json.dumps({"ms": spent * 1000 / count, "processes": last.build.processes,
                      "watched": watched, "cpu": cpu()}), flush=True)
"""


class _Worker:
    def __init__(self, tree: Path, pin: str) -> None:
        self.tree = tree
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER, pin],
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


def _reap(group: subprocess.Popen[bytes], pids: list[int]) -> int:
    """Kill `group` and wait until every process of it (`pids`, listed before) is gone: this
    process is their subreaper, so orphans come back to it and are reaped here, not left as
    zombies (root forks "started during the build") for the next round's samplers to see.
    Returns how many were still there after 60 s."""
    _stop(group)
    deadline = time.monotonic() + 60
    left = set(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not os.path.exists(f"/proc/{pid}"):
                left.discard(pid)
        if left:
            time.sleep(0.01)
    return len(left)


def _young_root_forks() -> int:
    """Root processes on the host that are forks not exec'd (kernel threads aside): what a
    daemon sampler watches when they started during the build."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            data = Path(f"/proc/{name}/stat").read_bytes()
            uid = os.stat(f"/proc/{name}").st_uid
        except OSError:
            continue
        flags = int(data.rpartition(b")")[2].split()[6])
        if uid == 0 and flags & 0x40 and not flags & 0x00200000:
            count += 1
    return count


def _subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (prctl PR_SET_CHILD_SUBREAPER)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _host() -> dict[str, object]:
    """What may make this host's sampler costs differ from another's."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        init = Path("/proc/1/comm").read_text().strip()
    except OSError:
        init = None
    return {
        "kernel": platform.release(),
        "schedstat": os.path.exists("/proc/self/schedstat"),
        "ns_last_pid": os.path.exists("/proc/sys/kernel/ns_last_pid"),
        "nofile_soft": soft,
        "init": init,
        "processes": sum(name.isdigit() for name in os.listdir("/proc")),
    }


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if len(ordered) > 1:
        quartiles = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        quartiles = ordered * 3
    return {
        "median": round(statistics.median(ordered), 4),
        "q1": round(quartiles[0], 4),
        "q3": round(quartiles[2], 4),
        "min": round(ordered[0], 4),
        "max": round(ordered[-1], 4),
    }


def _pin(choice: str) -> tuple[str, str]:
    """(this tree's worker's CPUs, the other's) for `--pin`: "same" puts both on one CPU (they
    take turns, never run at once: the same core, clock and caches for each), "apart" each on
    a CPU of its own, "none" leaves them to the scheduler."""
    allowed = sorted(os.sched_getaffinity(0))
    if choice == "none" or len(allowed) < 2:
        return "none", "none"
    if choice == "same":
        return str(allowed[-1]), str(allowed[-1])
    return str(allowed[-1]), str(allowed[-2])


def _versus(args: argparse.Namespace, build: int) -> dict[str, object]:
    """This tree's daemon sampler against DIR's, fairly (see the top): each round starts a
    fresh worker process per tree (which is started first alternates by round), takes blocks
    of samples from each in turn (which goes first alternates by block), first with the build
    alone, then with root forks started beside it, and kills and reaps those forks before the
    next round. Each round gives a ratio of the two medians; their spread is reported."""
    per_block = max(1, args.samples // args.blocks)
    this_cpus, other_cpus = _pin(args.pin)
    result: dict[str, object] = {
        "tree": str(args.versus),
        "rounds": args.rounds,
        "blocks_per_round": args.blocks,
        "samples_per_block": per_block,
        "pin": {"mode": args.pin, "this": this_cpus, "versus": other_cpus},
    }
    phases: dict[str, dict[str, list[float]]] = {
        phase: {"this": [], "versus": [], "ratio": []} for phase in ("build", "with_others")
    }
    rounds: list[dict[str, object]] = []
    for index in range(args.rounds):
        stragglers_before = _young_root_forks()
        trees = [(REPO, this_cpus, "this"), (args.versus.resolve(), other_cpus, "versus")]
        if index % 2:
            trees.reverse()  # the other tree's worker starts first in odd rounds
        workers = {name: _Worker(tree, cpus) for tree, cpus, name in trees}
        others = None
        others_pids: list[int] = []
        record: dict[str, object] = {"started_first": trees[0][2]}
        try:
            watched_at_start: dict[str, float] = {}
            for name, worker in workers.items():
                deadline = time.monotonic() + 60
                while (first := worker.block(1))["processes"] < build:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{worker.tree}'s sampler never saw the build's {build}")
                    time.sleep(0.05)
                watched_at_start[name] = first["watched"]
            record["watched_at_start"] = watched_at_start
            for phase in ("build", "with_others"):
                if phase == "with_others":
                    others = _others(args.others)
                    others_pids = [p.pid for p in psutil.Process(others.pid).children(True)]
                    for worker in workers.values():
                        worker.block(1)  # each sees them once
                ms: dict[str, list[float]] = {"this": [], "versus": []}
                cpus_seen: dict[str, set[int]] = {"this": set(), "versus": set()}
                watched: dict[str, float] = {}
                for block in range(args.blocks):
                    order = ["this", "versus"] if (block + index) % 2 == 0 else ["versus", "this"]
                    for name in order:
                        answer = workers[name].block(per_block)
                        ms[name].append(answer["ms"])
                        cpus_seen[name].add(int(answer["cpu"]))
                        watched[name] = answer["watched"]
                a, b = statistics.median(ms["this"]), statistics.median(ms["versus"])
                phases[phase]["this"].append(a)
                phases[phase]["versus"].append(b)
                phases[phase]["ratio"].append(a / b if b else float("nan"))
                record[phase] = {
                    "this_ms_per_sample": round(a, 4),
                    "versus_ms_per_sample": round(b, 4),
                    "this_over_versus": round(a / b, 3) if b else None,
                    "watched": watched,
                    "cpus_ran_on": {name: sorted(seen) for name, seen in cpus_seen.items()},
                }
        finally:
            if others is not None:
                record["others_left_after_60s"] = _reap(others, [others.pid, *others_pids])
            for worker in workers.values():
                worker.close()
        record["young_root_forks_before"] = stragglers_before
        rounds.append(record)
    for phase, values in phases.items():
        result[phase] = {
            "this_ms_per_sample": _spread(values["this"]),
            "versus_ms_per_sample": _spread(values["versus"]),
            "this_over_versus": _spread(values["ratio"]),
            "ratios_by_round": [round(value, 3) for value in values["ratio"]],
        }
    result["by_round"] = rounds
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument("--others", type=int, default=200)
    parser.add_argument("--versus", type=Path, default=None)
    parser.add_argument("--blocks", type=int, default=30, help="blocks a round, per tree")
    parser.add_argument("--rounds", type=int, default=5, help="fresh workers each round")
    parser.add_argument(
        "--pin",
        choices=("same", "apart", "none"),
        default="same",
        help="the two workers on one CPU (default), a CPU each, or left to the scheduler",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 5 samples of 5 processes (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.samples, args.processes, args.others, args.blocks, args.rounds = 5, 5, 5, 2, 2
    if os.geteuid() != 0:
        print(json.dumps({"error": "needs root to run processes as a Nix build user"}))
        return 2
    # Orphans of the killed forks come back to this process, which reaps them (`_reap`): where
    # init is slow to reap, or does not, they would linger as young root processes.
    _subreaper()
    with held_build_user() as user:
        group = _sleepers(args.processes, user)
        others = None
        try:
            with Sampler(daemon=True) as sampler:
                # The sleepers and their shell.
                members = _sampled_until(sampler, args.processes + 1)
                baseline_ms = _cpu_ms_per_sample(sampler, args.samples)
                others = _others(args.others)
                others_pids = [p.pid for p in psutil.Process(others.pid).children(True)]
                sampler.sample()  # sees them, not the build's
                others_ms = _cpu_ms_per_sample(sampler, args.samples)
                watched = len(sampler._watched)
            _reap(others, [others.pid, *others_pids])
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
                "host": _host(),
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
