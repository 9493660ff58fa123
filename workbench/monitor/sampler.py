"""Live measurement of a build's processes: call `Sampler.sample()` once a second.

Each sample finds the build's processes (see `discovery`), and returns per process its kind,
file, CPU % and RSS, and for the whole build the CPU used as a share of all cores, total RSS
against the memory available, and the compile jobs running at once.

CPU of processes too short-lived to be seen (most compiler passes of a small file) is still
counted: when a parent waits for a child, the kernel adds the child's CPU to the parent's
"children" times (`cutime`/`cstime` in /proc/PID/stat). Per interval the build's CPU is

    Σ Δ(own CPU) + Σ Δ(children CPU) − Σ (CPU already counted of members that ended)

over its processes; the last term stops a sampled child from being counted twice, once while it
ran and again inside its parent's children times. What is lost: the final second of a process
that is not reaped by a member (the launched root, a daemon's builder); `cpu_seconds` of the
summary takes the root's rusage from the supervisor to close that gap.

Cost: one listdir of /proc finds new PIDs (`procfs.PidScanner`); each process's /proc/PID/stat
and schedstat descriptors stay open and are re-read with one pread(); a process that did not
run since the last sample is not read further and keeps its `ProcessSample` object. At 500
processes a sample costs ~2.5 ms of CPU (benchmarks/sampler_cost.py). The sampler keeps two
descriptors per process and uses at most half the soft RLIMIT_NOFILE (the rest fall back to
opening the file each time); `procfs.raise_open_file_limit()` lifts Debian's default of 1024.

A process is judged when it is first seen, and again when what its verdict depends on changes:
one that is not the build's yet but may become a builder (with a nix-daemon: the daemon's
processes, a root fork that has not exec'd or a program that switches user, started during the
build; a build user's process of a derivation not known to be this build's) is watched, and
judged again once it execs (its name, or fork's PF_FORKNOEXEC flag, changes) or changes user.
A watched process that did not run since the last sample costs one schedstat pread. Other
processes are not read again, except the parent of a process just found to be the build's: a
root shell that ran programs, then exec'd `setpriv` to a build user and g++, is judged again
when its cc1plus appears, and heads that job.
"""

from __future__ import annotations

import enum
import os
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from workbench.monitor import procfs
from workbench.monitor.classification import ProcessKind, classify
from workbench.monitor.discovery import (
    NIX_DAEMON,
    BuildDerivations,
    attribute_builder,
    builder_name,
    is_nixbld_user,
)
from workbench.monitor.memory import MemoryProbe, MemoryState

_JOB_KINDS = (ProcessKind.COMPILER, ProcessKind.CUDA, ProcessKind.LINKER)
_COMPILE_KINDS = (ProcessKind.COMPILER, ProcessKind.CUDA)


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One process of the build at one sample (the seeds' `PID CPU% Runtime Memory File` row)."""

    pid: int
    ppid: int
    kind: str
    """A `ProcessKind` value: "nix", "driver", "compiler", "cuda", "linker", "python", "other"."""
    tool: str
    """The program: "cc1plus", "g++", "nvcc", "ninja", ..."""
    file: str | None
    """Compilers: the source file; linkers: the output; else None."""
    cpu_percent: float
    """CPU over the last interval in % of one core (like top; can exceed 100 with threads)."""
    rss: int
    """Resident memory, bytes."""
    started: float
    """Epoch seconds when the process started."""
    cpu_seconds: float
    """User + system CPU the process has used so far (its own, not its children's)."""
    state: str
    """The kernel's state letter: R running, S sleeping, D disk wait, Z zombie, ..."""
    threads: int
    job: int
    """PID of the compile or link job this process is part of (the g++/nvcc/ld at its top); 0
    for processes outside a job (ninja, make, nix, shells)."""
    job_kind: str | None
    """The kind of that job's top process: "compiler", "cuda" or "linker"; None outside a job."""
    derivation: str | None
    """The Nix derivation a daemon's builder works for, when known."""

    def running_s(self, now: float) -> float:
        """Seconds the process has been running at `now` (the sample's `BuildSample.t`)."""
        return max(0.0, now - self.started)


@dataclass(frozen=True, slots=True)
class BuildSample:
    """The whole build at one sample."""

    t: float
    """Epoch seconds of the sample."""
    interval: float
    """Seconds since the previous sample (0.0 for the first)."""
    processes: int
    cpus: int
    cpu_percent: float
    """CPU used over the interval as a share of all cores, 0–100."""
    cpu_cores: float
    """The same as a number of cores kept busy (e.g. 3.2)."""
    cpu_seconds: float
    """CPU used by the build since the sampler started, counting reaped children."""
    rss: int
    """Total RSS of the build's processes, bytes (shared pages count once per process)."""
    memory_available: int
    """Bytes the build can still use: host available memory or its cgroup's room, the lower."""
    memory_total: int
    compile_jobs: int
    """C/C++ and CUDA compile jobs running (one g++ with its cc1plus and as is one job)."""
    cuda_jobs: int
    """Of those, nvcc jobs."""
    link_jobs: int


@dataclass(frozen=True, slots=True)
class Sample:
    """What one `Sampler.sample()` call measured."""

    build: BuildSample
    processes: tuple[ProcessSample, ...]


class _Proc:
    """What the sampler remembers of one process of the build between samples."""

    __slots__ = (
        "children",
        "comm",
        "derivation",
        "fd",
        "file",
        "forked",
        "job",
        "job_kind",
        "kind",
        "name",
        "own",
        "pid",
        "ppid",
        "raw",
        "rss",
        "sample",
        "sched",
        "sched_fd",
        "starttime",
        "state",
        "threads",
        "tool",
        "unread",
    )

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.name = str(pid)  # its /proc entry
        self.fd: int | None = None
        self.sched_fd: int | None = None
        self.sched = b""
        self.raw = b""
        self.comm = ""
        self.forked = 0  # PF_FORKNOEXEC: a fork that has not exec'd yet
        self.ppid = 0
        self.own = 0  # utime + stime, clock ticks
        self.children = 0  # cutime + cstime, clock ticks
        self.starttime = 0
        self.rss = 0
        self.kind = ProcessKind.OTHER
        self.job = 0
        self.job_kind: ProcessKind | None = None
        self.derivation: str | None = None
        self.sample: ProcessSample | None = None
        self.state = "?"
        self.threads = 1
        self.tool = ""
        self.file: str | None = None
        self.unread = False  # its argv read empty: exiting, classified again next sample


class _Verdict(enum.Enum):
    """Why a process is not (yet) the build's."""

    NOT_OURS = "not ours"
    """For good: nothing it can still do makes it the build's (its parent is not the build's
    and it cannot become a build user)."""
    NOT_YET = "not yet"
    """Not now, but it may be once it execs a new program or changes its user: a nix-daemon
    process (its forked child becomes a builder), a root process started during the build that
    may switch to a build user (runuser's child before it switches, then execs), a build
    user's process whose derivation it does not say yet (a shell that execs the compiler)."""


class _Watch:
    """A process that is not the build's yet, watched for what its verdict depends on."""

    __slots__ = ("comm", "daemon", "fd", "forked", "name", "sched", "sched_fd", "start", "uid")

    def __init__(self, pid: int, stat: procfs.Stat, fd: int | None, uid: int | None) -> None:
        self.name = str(pid)
        self.comm = stat.comm
        self.daemon = stat.comm == NIX_DAEMON
        self.forked = stat.flags & procfs.PF_FORKNOEXEC
        self.start = stat.starttime
        self.uid = uid  # checked again when it ran, where its user decided the verdict
        self.fd = fd
        self.sched_fd: int | None = None
        self.sched = b""


# Processes that never run a program again: kernel threads, and those exiting (zombies too).
_NEVER_EXECS = procfs.PF_KTHREAD | procfs.PF_EXITING
# Watched processes: at most this many, holding descriptors up to a quarter of the budget
# (the build's own processes come first); past that a rejected process is rejected for good.
_MOST_WATCHED = 1024
# A root process counts as started during the build when it started at most this long before
# the sampler: the build's `runuser` may start just before the first sample.
_YOUNG_S = 2.0
# Programs (their comm) that switch to another user and exec a program they are given.
_SWITCHERS = frozenset(
    ("runuser", "su", "sudo", "doas", "setpriv", "chroot", "capsh", "gosu", "su-exec", "chpst")
)


def _default_fd_budget() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    # Leave most descriptors to the supervisor itself (log files, sockets, SQLite).
    return max(0, min(4096, soft // 2 - 64))


class Sampler:
    """Samples one build's processes; see the module docstring. Not thread-safe: one caller."""

    def __init__(
        self,
        root_pid: int | None = None,
        *,
        daemon: bool = False,
        derivations: Iterable[str] = (),
        drv_paths: Iterable[str] = (),
        cpus: int | None = None,
        memory: MemoryProbe | None = None,
        clock: Callable[[], float] = time.time,
        fd_budget: int | None = None,
        names_to_come: bool = False,
    ) -> None:
        """Watch `root_pid` and its descendants, and with `daemon` also nix-daemon builders.

        `derivations`: names of the derivations this build builds ("onnxruntime-1.23.2");
        `drv_paths`: their `.drv` files, which tell apart builders of derivations of the same
        name (`discovery.attribute_builder`). With `daemon`, builders of other derivations are
        left out. Without any, every daemon builder on the host counts, unless `names_to_come`
        (a supervisor that learns them from the Nix log): then a daemon builder counts only once
        its derivation is known to be this build's (a daemon serves every user: before that it
        may be anyone's). `cpus`: cores the build may use (default: all of this machine's).
        `clock`: epoch seconds, the one source of time: it stamps each sample and marks when the
        build began (a root process started since then may yet become a builder).
        """
        if root_pid is None and not daemon:
            raise ValueError("give root_pid, daemon=True, or both")
        self.root_pid = root_pid
        self.daemon = daemon
        self.cpus = cpus or len(os.sched_getaffinity(0)) or 1
        self._derivations = BuildDerivations()
        self._derivations.add(derivations, drv_paths)
        self._names_to_come = names_to_come
        self._memory = memory or MemoryProbe(root_pid)
        self._clock = clock
        self._fd_budget = _default_fd_budget() if fd_budget is None else fd_budget
        self._fds_open = 0
        self._boot = procfs.boot_time()
        self._members: dict[int, _Proc] = {}
        self._scanner = procfs.PidScanner()
        # Processes that are not the build's yet (`_Verdict.NOT_YET`), judged again when they
        # exec or change user: pid -> what their verdict was drawn from.
        self._watched: dict[int, _Watch] = {}
        self._watch_fds = 0
        # A root process started since this tick (since boot) is one forked during the build:
        # read from the clock the samples are timed by (one source of time).
        self._young_from = (clock() - self._boot - _YOUNG_S) * procfs.CLOCK_TICKS
        self._unattributed: set[int] = set()  # daemon builders of derivations not known (yet)
        self._rejudge: set[int] = set()
        self._last_t: float | None = None
        self._cpu_ticks = 0
        self._closed = False

    # -- public -------------------------------------------------------------------------------

    def add_derivations(self, names: Iterable[str] = (), drv_paths: Iterable[str] = ()) -> None:
        """Tell the sampler more derivations of this build (learnt from the Nix log): by name,
        or better by `.drv` path (see `__init__`)."""
        if not self._derivations.add(names, drv_paths):
            return
        # Builders seen before their derivation was known are judged again.
        self._rejudge |= self._unattributed
        self._unattributed.clear()

    def sample(self) -> Sample:
        """Measure the build now."""
        if self._closed:
            raise RuntimeError("the sampler is closed")
        now = self._clock()
        interval = 0.0 if self._last_t is None else max(0.0, now - self._last_t)
        previous_t = self._last_t
        names, candidates = self._scanner.scan()
        ticks = 0
        gone: list[_Proc] = []
        members = self._members
        for pid, proc in members.items():
            if proc.name not in names:
                gone.append(proc)
                continue
            if proc.unread:
                self._classify(proc)
                if not proc.unread:
                    proc.sample = self._make_sample(proc, 0.0)
            if proc.sched_fd is not None and proc.threads == 1:
                # A single-threaded process that has not run since the last sample (its run
                # time in /proc/PID/schedstat is unchanged) cannot have used CPU, reaped a child
                # or exec'd: skip its stat, which costs the kernel ~8 times more to produce.
                sched = procfs.read_fd(proc.sched_fd)
                if sched is not None and sched == proc.sched:
                    sample = proc.sample
                    if sample is not None and sample.cpu_percent != 0.0:
                        proc.sample = self._make_sample(proc, 0.0)
                    continue
                proc.sched = sched or b""
            if proc.fd is not None:
                data = procfs.read_fd(proc.fd)
            else:
                result = procfs.read_stat(pid)
                data = result[0] if result is not None else None
            if data is None:
                gone.append(proc)
                continue
            if data == proc.raw:
                # Nothing changed, not even a page fault: no CPU used, same sample as before.
                sample = proc.sample
                if sample is not None and sample.cpu_percent != 0.0:
                    proc.sample = self._make_sample(proc, 0.0)
                continue
            stat = procfs.parse_stat(data)
            if stat is None or (proc.fd is None and stat.starttime != proc.starttime):
                gone.append(proc)
                continue
            own = stat.utime + stat.stime
            children = stat.cutime + stat.cstime
            used = own - proc.own
            ticks += used + (children - proc.children)
            proc.raw, proc.own, proc.children = data, own, children
            proc.ppid, proc.rss = stat.ppid, stat.rss_pages * procfs.PAGE_SIZE
            proc.state, proc.threads = stat.state, stat.threads
            forked = stat.flags & procfs.PF_FORKNOEXEC
            if stat.comm != proc.comm or forked != proc.forked:
                # A new program in the same process (fork, then exec; a python that execs
                # another python keeps its name, not fork's flag): classify it again.
                proc.comm, proc.forked = stat.comm, forked
                self._classify(proc)
            percent = used * 100.0 / procfs.CLOCK_TICKS / interval if interval > 0 else 0.0
            proc.sample = None if proc.unread else self._make_sample(proc, percent)
        for proc in gone:
            self._forget(proc)
        if gone:
            ticks -= self._counted_again(gone)
        ticks += self._discover(names, candidates, now, previous_t)
        self._cpu_ticks += ticks
        self._last_t = now
        return self._build_sample(now, interval, ticks)

    def _counted_again(self, gone: list[_Proc]) -> int:
        """CPU of ended processes that will show up again in a live member's children times.

        A reaped process's CPU (its own and its children's) is added to its parent's children
        times. When the parent ended in the same interval too (g++ right after its cc1plus),
        the whole subtree lands in the grandparent's (ninja's): so walk up through ended
        processes to the first live one; if that is a member, the CPU comes back there and
        what was already counted must come off. If no member reaps it (the root, reaped by
        the supervisor), nothing comes back and nothing comes off.
        """
        ended = {proc.pid: proc for proc in gone}
        again = 0
        for proc in gone:
            parent = proc.ppid
            seen = 0
            while parent in ended and seen < len(ended):
                parent = ended[parent].ppid
                seen += 1
            if parent in self._members:
                again += proc.own + proc.children
        return again

    def close(self) -> None:
        """Close the descriptors the sampler holds. Safe to call twice."""
        for proc in self._members.values():
            self._close_fd(proc)
        self._members.clear()
        for pid in list(self._watched):
            self._unwatch(pid)
        self._scanner.close()
        self._closed = True

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def cpu_seconds(self) -> float:
        """CPU used by the build so far (all samples), seconds."""
        return self._cpu_ticks / procfs.CLOCK_TICKS

    # -- per sample ---------------------------------------------------------------------------

    def _build_sample(self, now: float, interval: float, ticks: int) -> Sample:
        rss = 0
        compile_jobs: set[int] = set()
        cuda_jobs: set[int] = set()
        link_jobs: set[int] = set()
        processes: list[ProcessSample] = []
        for proc in self._members.values():
            if proc.state == "Z":
                continue  # exited, waiting for its parent to reap it: not running any more
            rss += proc.rss
            if proc.job:
                if proc.job_kind is ProcessKind.LINKER:
                    link_jobs.add(proc.job)
                else:
                    compile_jobs.add(proc.job)
                    if proc.job_kind is ProcessKind.CUDA:
                        cuda_jobs.add(proc.job)
            if proc.sample is not None:
                processes.append(proc.sample)
        memory: MemoryState = self._memory.read()
        seconds = ticks / procfs.CLOCK_TICKS
        cores = seconds / interval if interval > 0 else 0.0
        build = BuildSample(
            t=now,
            interval=interval,
            processes=len(processes),
            cpus=self.cpus,
            cpu_percent=max(0.0, cores * 100.0 / self.cpus),
            cpu_cores=max(0.0, cores),
            cpu_seconds=self.cpu_seconds,
            rss=rss,
            memory_available=memory.available,
            memory_total=memory.total,
            compile_jobs=len(compile_jobs),
            cuda_jobs=len(cuda_jobs),
            link_jobs=len(link_jobs),
        )
        return Sample(build, tuple(processes))

    def _make_sample(self, proc: _Proc, percent: float) -> ProcessSample:
        return ProcessSample(
            pid=proc.pid,
            ppid=proc.ppid,
            kind=proc.kind.value,
            tool=proc.tool,
            file=proc.file,
            cpu_percent=percent,
            rss=proc.rss,
            started=self._boot + proc.starttime / procfs.CLOCK_TICKS,
            cpu_seconds=proc.own / procfs.CLOCK_TICKS,
            state=proc.state,
            threads=proc.threads,
            job=proc.job,
            job_kind=proc.job_kind.value if proc.job_kind is not None else None,
            derivation=proc.derivation,
        )

    # -- discovery ----------------------------------------------------------------------------

    def _discover(
        self, names: set[str], candidates: set[int], now: float, previous_t: float | None
    ) -> int:
        """Judge PIDs that may be new processes; returns the CPU ticks new members already used."""
        members, watched = self._members, self._watched
        if watched:
            self._changed(names, candidates)
        if self._rejudge:
            for pid in self._rejudge:
                self._unwatch(pid)
            candidates |= self._rejudge
            self._rejudge.clear()
        # Each candidate's stat is read once; a new member keeps the descriptor it was read
        # through (when the budget allows), so a new process costs one open, not two.
        pending: dict[int, tuple[int | None, bytes, procfs.Stat]] = {}
        spare = self._fd_budget - self._fds_open
        for pid in candidates:
            if pid in members or pid in watched:
                continue
            fd = procfs.open_stat(pid) if len(pending) < spare else None
            if fd is not None:
                data = procfs.read_fd(fd)
                stat = procfs.parse_stat(data) if data is not None else None
                if data is None or stat is None:
                    os.close(fd)
                    continue
                pending[pid] = (fd, data, stat)
            else:
                result = procfs.read_stat(pid)
                if result is not None:
                    pending[pid] = (None, *result)
        ticks = 0
        progress = True
        try:
            while pending and progress:
                progress = False
                for pid in list(pending):
                    fd, data, stat = pending[pid]
                    if stat.ppid in pending and stat.ppid != pid:
                        continue  # judge the parent first
                    del pending[pid]
                    progress = True
                    derivation = self._judge(pid, stat)
                    if derivation is _Verdict.NOT_YET:
                        self._watch(pid, stat, fd)
                        continue
                    if derivation is _Verdict.NOT_OURS:
                        if fd is not None:
                            os.close(fd)
                        continue
                    if self.daemon and stat.ppid not in members and pid != self.root_pid:
                        ticks += self._parent_again(stat.ppid, now, previous_t)
                    ticks += self._join(pid, fd, data, stat, derivation, now, previous_t)
        finally:
            for fd, _data, _stat in pending.values():
                if fd is not None:
                    os.close(fd)
        return ticks

    def _judge(self, pid: int, stat: procfs.Stat) -> str | _Verdict | None:
        """A `_Verdict`: not the build's (for good or for now). Otherwise the derivation it works
        for (None if unknown)."""
        if pid == self.root_pid:
            return None
        parent = self._members.get(stat.ppid)
        if parent is not None:
            return parent.derivation
        if not self.daemon or pid == 1 or stat.flags & _NEVER_EXECS:
            # Its parent is not the build's, and a process's parent never becomes the build's
            # later (a member's children are judged after it): no change of program or user
            # makes it the build's. Nor can a kernel thread (a kworker started during the
            # build is root and keeps fork's PF_FORKNOEXEC: it never execs), nor a process
            # that is exiting or a zombie (a killed fork keeps that flag too until its parent,
            # or an init slow to reap orphans, reaps it).
            return _Verdict.NOT_OURS
        if stat.comm == NIX_DAEMON:
            # The daemon, its workers, and forked children that have not exec'd the builder yet.
            return _Verdict.NOT_YET
        daemon = self._watched.get(stat.ppid)
        parent_is_daemon = daemon is not None and daemon.daemon
        if not parent_is_daemon:
            uid = procfs.uid_of(pid)
            if uid is None:
                return _Verdict.NOT_OURS
            if not is_nixbld_user(procfs.user_name(uid)):
                # Only root can become a build user, and a process started during the build
                # that is about to switch user may yet: a fork that has not exec'd (runuser's,
                # su's or nix's child switches user, then execs the builder), or a program that
                # switches user itself (setpriv, doas). Other root processes, busy or not, are
                # not watched: the sampler's cost stays with the build's processes.
                if (
                    uid == 0
                    and stat.starttime >= self._young_from
                    and (stat.flags & procfs.PF_FORKNOEXEC or stat.comm in _SWITCHERS)
                ):
                    return _Verdict.NOT_YET
                return _Verdict.NOT_OURS
        if not self._derivations.names:
            if self._names_to_come:
                # Held until the log names this build's derivations, then judged again: the
                # CPU it used meanwhile is counted when it joins (`_join`).
                self._unattributed.add(pid)
                return _Verdict.NOT_YET
            # No derivation learnt from the log yet: a builder can start (and be sampled)
            # before the supervisor has read Nix's start event. It is taken, named from its own
            # environment or build directory; a member keeps the name it joined with.
            return builder_name(pid)
        derivation = attribute_builder(pid, self._derivations)
        if derivation is None:
            # Judged again when the log names more derivations, or when it execs a program
            # whose arguments name its build directory (a wrapper's compiler).
            self._unattributed.add(pid)
            return _Verdict.NOT_YET
        return derivation

    def _parent_again(self, pid: int, now: float, previous_t: float | None, depth: int = 0) -> int:
        """Judge again the parent `pid` of a process just found to be the build's, when it is
        neither the build's nor watched; returns the CPU ticks it (and any ancestor taken with
        it) already used.

        A process rejected once is not looked at again: judging every root process that might
        still switch user again each sample would cost a read of each, every sample (about the
        sampler's own cost again with 200 idle ones beside the build). But a process that has
        become a build user since (a root shell that ran programs, then exec'd `setpriv ...
        g++`) shows itself when a child of it is found to be the build's (g++'s cc1plus): it is
        judged then, before that child joins, so it takes its place at the top of the job.
        Costs nothing while no new process of the build appears under one that is not.
        """
        if pid <= 1 or pid in self._members or pid in self._watched or depth > 16:
            return 0
        fd = procfs.open_stat(pid) if self._fds_open < self._fd_budget else None
        if fd is not None:
            data = procfs.read_fd(fd)
            stat = procfs.parse_stat(data) if data is not None else None
        else:
            result = procfs.read_stat(pid)
            data, stat = result if result is not None else (None, None)
        derivation = self._judge(pid, stat) if stat is not None else _Verdict.NOT_OURS
        if derivation is _Verdict.NOT_YET and stat is not None:
            self._watch(pid, stat, fd)
            return 0
        if isinstance(derivation, _Verdict) or data is None or stat is None:
            if fd is not None:
                os.close(fd)
            return 0
        # Its parent first: a member takes its job from its parent when it joins.
        ticks = self._parent_again(stat.ppid, now, previous_t, depth + 1)
        return ticks + self._join(pid, fd, data, stat, derivation, now, previous_t)

    def _watch(self, pid: int, stat: procfs.Stat, fd: int | None) -> None:
        """Watch a process that is not the build's yet (`_Verdict.NOT_YET`); keeps `fd`."""
        if len(self._watched) >= _MOST_WATCHED and stat.comm != NIX_DAEMON:
            if fd is not None:
                os.close(fd)
            self._unattributed.discard(pid)
            return
        # Its user decided its verdict unless it is a daemon process or a build user's.
        uid = None if stat.comm == NIX_DAEMON or pid in self._unattributed else 0
        watch = _Watch(pid, stat, fd, uid)
        held = self._watch_fds
        if fd is not None:
            if 4 * (self._watch_fds + 2) > self._fd_budget:
                os.close(fd)
                watch.fd = None
            else:
                self._watch_fds += 1
                watch.sched_fd = procfs.open_file(pid, "schedstat")
                if watch.sched_fd is not None:
                    self._watch_fds += 1
                    watch.sched = procfs.read_fd(watch.sched_fd) or b""
                self._fds_open += self._watch_fds - held
        self._watched[pid] = watch

    def _unwatch(self, pid: int) -> None:
        watch = self._watched.pop(pid, None)
        if watch is None:
            return
        for fd in (watch.fd, watch.sched_fd):
            if fd is not None:
                os.close(fd)
                self._watch_fds -= 1
                self._fds_open -= 1

    def _changed(self, names: set[str], candidates: set[int]) -> None:
        """Watched processes that exec'd or changed user since the last sample go back to be
        judged (into `candidates`); those gone are dropped.

        Cheap for the many that did nothing: a process that has not run (its schedstat is
        unchanged) cannot have exec'd or changed user; one that ran is seen to have exec'd by
        its name or by fork's PF_FORKNOEXEC flag, which exec clears."""
        again: list[int] = []
        gone: list[int] = []
        for pid, watch in self._watched.items():
            if watch.name not in names:
                gone.append(pid)
                continue
            if watch.sched_fd is not None:
                sched = procfs.read_fd(watch.sched_fd)
                if sched is None:
                    gone.append(pid)
                    continue
                if sched == watch.sched:
                    continue
                watch.sched = sched
            if watch.fd is not None:
                data = procfs.read_fd(watch.fd)
            else:
                result = procfs.read_stat(pid)
                data = result[0] if result is not None else None
            stat = procfs.parse_stat(data) if data is not None else None
            if stat is None or stat.starttime != watch.start or stat.flags & procfs.PF_EXITING:
                # Gone, its PID another process's (the scanner says), or exiting: a zombie
                # execs nothing, and stays until reaped (seconds, where init reaps slowly).
                gone.append(pid)
                continue
            if (
                stat.comm != watch.comm
                or stat.flags & procfs.PF_FORKNOEXEC != watch.forked
                or (watch.uid is not None and procfs.uid_of(pid) != watch.uid)
            ):
                again.append(pid)
        for pid in gone:
            self._unwatch(pid)
            self._unattributed.discard(pid)
        for pid in again:
            self._unwatch(pid)
            self._unattributed.discard(pid)
            candidates.add(pid)

    def _join(
        self,
        pid: int,
        fd: int | None,
        data: bytes,
        stat: procfs.Stat,
        derivation: str | None,
        now: float,
        previous_t: float | None,
    ) -> int:
        """Make a process a member; returns the CPU ticks it used before it was seen."""
        proc = _Proc(pid)
        if fd is not None:
            proc.fd = fd
            self._fds_open += 1
            if self._fds_open < self._fd_budget:
                proc.sched_fd = procfs.open_file(pid, "schedstat")
                if proc.sched_fd is not None:
                    self._fds_open += 1
                    proc.sched = procfs.read_fd(proc.sched_fd) or b""
                    # The stat was read before this schedstat: a process that ran in between
                    # (a forked shell that exec'd `sleep` and slept) would keep that stale
                    # stat, its old program and state, for as long as its schedstat stays.
                    fresh = procfs.read_fd(fd)
                    fresh_stat = procfs.parse_stat(fresh) if fresh is not None else None
                    if fresh is not None and fresh_stat is not None and fresh != data:
                        data, stat = fresh, fresh_stat
        proc.raw = data
        proc.comm = stat.comm
        proc.forked = stat.flags & procfs.PF_FORKNOEXEC
        proc.ppid = stat.ppid
        proc.own = stat.utime + stat.stime
        proc.children = stat.cutime + stat.cstime
        proc.starttime = stat.starttime
        proc.rss = stat.rss_pages * procfs.PAGE_SIZE
        proc.state, proc.threads = stat.state, stat.threads
        proc.derivation = derivation
        self._members[pid] = proc
        self._classify(proc)
        started = self._boot + stat.starttime / procfs.CLOCK_TICKS
        percent = 0.0
        if previous_t is not None:
            # New since the last sample: its CPU so far is this interval's (psutil would say
            # 0.0 until the next call; a compiler seen once would then never show any).
            elapsed = now - max(started, previous_t)
            if elapsed > 0:
                percent = proc.own * 100.0 / procfs.CLOCK_TICKS / elapsed
        proc.sample = None if proc.unread else self._make_sample(proc, percent)
        # Everything it used so far happened during the build (or before the sampler started,
        # which still belongs to the build's total).
        return proc.own + proc.children

    def _classify(self, proc: _Proc) -> None:
        argv = procfs.read_cmdline(proc.pid)
        # A member is never a kernel thread: an empty argv means it exited between its stat
        # and this read (the kernel drops the memory holding argv before the zombie state
        # shows). Named from its comm alone, a compiler would be shown compiling no file.
        proc.unread = not argv
        what = classify(proc.comm, argv)
        proc.kind, proc.tool, proc.file = what.kind, what.tool, what.file
        parent = self._members.get(proc.ppid)
        if parent is not None and parent.job:
            # g++ -> cc1plus, as; nvcc -> sh -> cicc, ptxas: one job, named by its top process.
            proc.job, proc.job_kind = parent.job, parent.job_kind
        elif what.kind in _JOB_KINDS:
            proc.job, proc.job_kind = proc.pid, what.kind
        else:
            proc.job, proc.job_kind = 0, None

    def _forget(self, proc: _Proc) -> None:
        self._close_fd(proc)
        del self._members[proc.pid]

    def _close_fd(self, proc: _Proc) -> None:
        for fd in (proc.fd, proc.sched_fd):
            if fd is not None:
                os.close(fd)
                self._fds_open -= 1
        proc.fd = proc.sched_fd = None
