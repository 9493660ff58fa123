"""What a capture holds: frames, thread stacks, samples, thread activity, and the diagnosis.

Every class has `to_json()`, which returns plain JSON-able values; the shape is the one
`workbench bt --json` prints (see `Capture.to_json` and `Diagnosis.to_json`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Frame:
    """One stack frame as gdb reports it; `function` is the name without its parameter list."""

    level: int
    address: int
    function: str | None
    file: str | None = None
    line: int | None = None
    library: str | None = None

    def location(self, full: bool = True) -> str:
        """`file:line` where debug info has it, else the library, else `??`.

        full=False gives base names only, for one-line summaries.
        """
        if self.file and self.line:
            return f"{self.file if full else self.file.rsplit('/', 1)[-1]}:{self.line}"
        if self.library:
            return self.library if full else self.library.rsplit("/", 1)[-1]
        return "??"

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "address": f"0x{self.address:x}",
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "library": self.library,
        }


@dataclass(frozen=True)
class WaitInfo:
    """What a blocked thread waits for, read from its futex syscall's registers.

    kind: "mutex", "join", "static-guard", "condition", "rwlock", "semaphore" or "futex".
    owner_tid is the mutex's `__owner` field for a mutex, the joined thread for a join.
    """

    kind: str
    address: int | None = None
    owner_tid: int | None = None
    symbol: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "address": None if self.address is None else f"0x{self.address:x}",
            "owner_tid": self.owner_tid,
            "symbol": self.symbol,
        }


@dataclass(frozen=True)
class ThreadStack:
    """One thread in one sample: gdb's frames (innermost first) and the kernel's view of it.

    state is the letter of /proc/PID/task/TID/stat read just before gdb stopped the thread
    (R running, S sleeping, D disk wait, ...); truncated means the stack had more frames than
    were read; stack_bytes is how much of the thread's stack mapping is in use (read only
    for truncated stacks, to show growth); trail is the functions a running thread went
    through while gdb single-stepped it for a few dozen instructions (consecutive repeats
    collapsed): the path of a tight loop, which samples alone may miss; trail_top is those
    of them that ran at the outermost stack level reached: two or more there means they
    jump to each other (tail calls) rather than call each other.
    """

    gdb_id: int
    tid: int
    name: str | None
    state: str | None
    wchan: str | None
    frames: tuple[Frame, ...]
    truncated: bool = False
    wait: WaitInfo | None = None
    stack_bytes: int | None = None
    trail: tuple[str, ...] = ()
    trail_top: tuple[str, ...] = ()

    def functions(self) -> list[str]:
        """Function names innermost first; `??` where gdb has none."""
        return [frame.function or "??" for frame in self.frames]

    def to_json(self) -> dict[str, Any]:
        return {
            "gdb_id": self.gdb_id,
            "tid": self.tid,
            "name": self.name,
            "state": self.state,
            "wchan": self.wchan,
            "truncated": self.truncated,
            "stack_bytes": self.stack_bytes,
            "wait": self.wait.to_json() if self.wait else None,
            "trail": list(self.trail),
            "trail_top": list(self.trail_top),
            "frames": [frame.to_json() for frame in self.frames],
        }


@dataclass(frozen=True)
class Sample:
    """All threads' stacks at one moment; `at` is seconds since the capture started."""

    index: int
    at: float
    duration: float
    threads: tuple[ThreadStack, ...]

    def thread(self, tid: int) -> ThreadStack | None:
        return next((thread for thread in self.threads if thread.tid == tid), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "at_s": round(self.at, 3),
            "duration_s": round(self.duration, 3),
            "threads": [thread.to_json() for thread in self.threads],
        }


@dataclass
class ThreadActivity:
    """How a thread behaved while no debugger was attached: polled from /proc.

    states counts each state letter seen; cpu_seconds is user+system time used between the
    first and last observation, over `seconds` of wall time. io holds how far its
    /proc/PID/task/TID/io counters (rchar, wchar, syscr, syscw) advanced from the first read
    to the last, `io_seconds` apart (empty where they could not be read).
    """

    tid: int
    observations: int = 0
    states: dict[str, int] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    seconds: float = 0.0
    wchan: str | None = None
    io: dict[str, int] = field(default_factory=dict)
    io_seconds: float = 0.0

    def wrote(self) -> bool:
        """Whether it wrote between the first and last look: output advancing (progress)."""
        return self.io.get("wchar", 0) > 0 or self.io.get("syscw", 0) > 0

    @property
    def running_share(self) -> float:
        """The share of observations in state R (0 when never observed)."""
        return self.states.get("R", 0) / self.observations if self.observations else 0.0

    @property
    def cpu_share(self) -> float | None:
        """CPU time over wall time; None when the observation window was too short to tell."""
        return self.cpu_seconds / self.seconds if self.seconds >= 0.05 else None

    def always_running(self) -> bool:
        """Seen runnable (R) nearly every time, or using nearly a whole CPU.

        R means runnable: on a loaded machine a spinning thread may get little CPU, but it
        never sleeps, so the state counts for more than the CPU share.
        """
        cpu = self.cpu_share
        if self.observations >= 3 and self.running_share >= 0.8:
            return True
        return cpu is not None and cpu >= 0.8

    def to_json(self) -> dict[str, Any]:
        cpu = self.cpu_share
        document = {
            "tid": self.tid,
            "observations": self.observations,
            "states": dict(sorted(self.states.items())),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "seconds": round(self.seconds, 3),
            "cpu_share": None if cpu is None else round(cpu, 3),
            "wchan": self.wchan,
        }
        if self.io:  # absent where the counters could not be read (and in older captures)
            document["io"] = dict(sorted(self.io.items()))
            document["io_seconds"] = round(self.io_seconds, 3)
        return document


@dataclass(frozen=True)
class PcHit:
    """One program-counter sample of a running thread: where it was, and its stack pointer.

    function is None where the code has no symbols; library is the file mapped there;
    state is a digest of all the thread's general registers (equal registers, equal digest);
    at is when it was read, in seconds after the first read of the capture; ran_ns the CPU
    time the thread had run by then (what tells whether it ran between two reads), user and
    kernel time together. What tells kernel time apart: timeslices and timeslices_asked, how
    many times the thread had been switched in, at the read and when the round asked it to
    stop (not switched in between its read before and the ask, it ran nothing but the stop);
    faults, the page faults the kernel had handled for it; in_syscall, whether the stop came
    at the end of a system call. Each is None where it was not recorded.
    """

    address: int
    sp: int
    function: str | None
    library: str | None
    state: int | None = None
    at: float | None = None
    ran_ns: int | None = None
    timeslices: int | None = None
    timeslices_asked: int | None = None
    faults: int | None = None
    in_syscall: bool | None = None

    def place(self) -> str:
        """The function, else `?? in LIBRARY+0xOFFSET-ish` base name: what a reader can look up."""
        if self.function:
            return self.function
        return f"?? in {(self.library or '?').rsplit('/', 1)[-1]}"

    def to_json(self) -> dict[str, Any]:
        return {
            "address": f"0x{self.address:x}",
            "sp": f"0x{self.sp:x}",
            "function": self.function,
            "library": self.library,
            "state": None if self.state is None else f"0x{self.state:x}",
            "at_s": None if self.at is None else round(self.at, 4),
            "ran_ns": self.ran_ns,
            "timeslices": self.timeslices,
            "timeslices_asked": self.timeslices_asked,
            "faults": self.faults,
            "in_syscall": self.in_syscall,
        }


@dataclass
class Capture:
    """Samples of one process's threads, with what happened while taking them.

    complete is False when the process exited (or became unreachable) before all samples were
    taken; notes say why, and what else the user should know (symbols-only fallback, a
    process that was found stopped and left stopped, ...).
    """

    pid: int
    command: list[str]
    executable: str | None
    requested_samples: int
    interval: float
    samples: list[Sample] = field(default_factory=list)
    activity: dict[int, ThreadActivity] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    complete: bool = True
    exited: bool = False
    symbols_only: bool = False
    gdb: str | None = None
    # Program counters of the threads that were running, read before gdb attached.
    pc_samples: dict[int, tuple[PcHit, ...]] = field(default_factory=dict)
    pc_rounds: int = 0
    # The executable's symbols: {"path", "level", "message", "debug_file", ...}; None unknown.
    symbols: dict[str, Any] | None = None
    # /proc state letter when the capture began (T: stopped by a signal).
    initial_state: str | None = None
    # The provider bridge's other side read from the binary (instead of stepping): stub ->
    # {"host_method": the ProviderHostImpl method, "instruction": its jump or call to the stub}.
    bridge_code: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "bridge_code": self.bridge_code,
            "initial_state": self.initial_state,
            "symbols": self.symbols,
            "pc_rounds": self.pc_rounds,
            "pc_samples": {
                str(tid): [hit.to_json() for hit in hits]
                for tid, hits in sorted(self.pc_samples.items())
            },
            "command": self.command,
            "executable": self.executable,
            "gdb": self.gdb,
            "requested_samples": self.requested_samples,
            "interval_s": self.interval,
            "complete": self.complete,
            "exited": self.exited,
            "symbols_only": self.symbols_only,
            "notes": list(self.notes),
            "activity": [self.activity[tid].to_json() for tid in sorted(self.activity)],
            "samples": [sample.to_json() for sample in self.samples],
        }


@dataclass(frozen=True)
class BridgePair:
    """A provider-bridge loop: `host_method` (ProviderHostImpl::X__Y) and what it calls."""

    host_method: str
    counterpart: str
    bridge_class: str
    bridge_method: str

    def to_json(self) -> dict[str, Any]:
        return {
            "host_method": self.host_method,
            "counterpart": self.counterpart,
            "class": self.bridge_class,
            "method": self.bridge_method,
        }


@dataclass(frozen=True)
class ProposedPatch:
    """The ORT_STATIC_PROVIDERS guard for a bridge loop; `path` once written under patches/."""

    file: str
    description: str
    snippet: str
    diff: str | None = None
    path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "description": self.description,
            "snippet": self.snippet,
            "diff": self.diff,
            "path": self.path,
        }


@dataclass
class Finding:
    """One thing the samples show, with the functions and threads involved and the evidence.

    kind: "call-cycle", "static-init", "deadlock", "lock-wait", "spin", "busy", "waiting", "asleep",
    "exited" or "unknown". pattern, for a call cycle: "recursion" or "tail-calls".
    hung: True when the finding means no progress, False when it shows progress, None when
    the samples cannot tell.
    """

    kind: str
    summary: str
    hung: bool | None
    functions: list[str] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    pattern: str | None = None
    bridge: BridgePair | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "hung": self.hung,
            "pattern": self.pattern,
            "functions": list(self.functions),
            "threads": list(self.threads),
            "evidence": list(self.evidence),
            "bridge": self.bridge.to_json() if self.bridge else None,
        }


@dataclass
class Diagnosis:
    """The verdict on a capture: the most telling finding first, then the others."""

    findings: list[Finding]
    proposed_patch: ProposedPatch | None = None

    @property
    def primary(self) -> Finding:
        return self.findings[0]

    @property
    def kind(self) -> str:
        return self.primary.kind

    @property
    def hung(self) -> bool | None:
        return self.primary.hung

    @property
    def summary(self) -> str:
        return self.primary.summary

    def thread_verdicts(self) -> dict[int, Finding]:
        """Each thread's verdict: the first (most telling) finding that names it.

        Findings are ordered, so a thread in the headline's cycle gets the headline's verdict
        and never a weaker one from a later finding.
        """
        verdicts: dict[int, Finding] = {}
        for finding in self.findings:
            for tid in finding.threads:
                verdicts.setdefault(tid, finding)
        return verdicts

    def to_json(self) -> dict[str, Any]:
        primary = self.primary
        verdicts = self.thread_verdicts()
        return {
            "thread_verdicts": {
                str(tid): {"kind": finding.kind, "hung": finding.hung}
                for tid, finding in sorted(verdicts.items())
            },
            "kind": primary.kind,
            "hung": primary.hung,
            "summary": primary.summary,
            "pattern": primary.pattern,
            "functions": list(primary.functions),
            "threads": list(primary.threads),
            "evidence": list(primary.evidence),
            "bridge": primary.bridge.to_json() if primary.bridge else None,
            "proposed_patch": self.proposed_patch.to_json() if self.proposed_patch else None,
            "findings": [finding.to_json() for finding in self.findings],
        }


def _address(text: str | None) -> int | None:
    return int(text, 16) if text else None


def capture_from_json(document: dict[str, Any]) -> Capture:
    """Rebuild a Capture from its `to_json()` (or a `workbench bt --json` document).

    Used to diagnose recorded samples again, and by the tests.
    """
    samples = []
    for sample in document.get("samples", []):
        threads = []
        for thread in sample["threads"]:
            wait = thread.get("wait")
            threads.append(
                ThreadStack(
                    gdb_id=thread["gdb_id"],
                    tid=thread["tid"],
                    name=thread.get("name"),
                    state=thread.get("state"),
                    wchan=thread.get("wchan"),
                    frames=tuple(
                        Frame(
                            level=frame["level"],
                            address=_address(frame.get("address")) or 0,
                            function=frame.get("function"),
                            file=frame.get("file"),
                            line=frame.get("line"),
                            library=frame.get("library"),
                        )
                        for frame in thread.get("frames", [])
                    ),
                    truncated=thread.get("truncated", False),
                    wait=WaitInfo(
                        kind=wait["kind"],
                        address=_address(wait.get("address")),
                        owner_tid=wait.get("owner_tid"),
                        symbol=wait.get("symbol"),
                    )
                    if wait
                    else None,
                    stack_bytes=thread.get("stack_bytes"),
                    trail=tuple(thread.get("trail", ())),
                    trail_top=tuple(thread.get("trail_top", ())),
                )
            )
        samples.append(
            Sample(
                index=sample["index"],
                at=sample.get("at_s", 0.0),
                duration=sample.get("duration_s", 0.0),
                threads=tuple(threads),
            )
        )
    activity = {
        entry["tid"]: ThreadActivity(
            tid=entry["tid"],
            observations=entry.get("observations", 0),
            states=dict(entry.get("states", {})),
            cpu_seconds=entry.get("cpu_seconds", 0.0),
            seconds=entry.get("seconds", 0.0),
            wchan=entry.get("wchan"),
            io=dict(entry.get("io", {})),
            io_seconds=entry.get("io_seconds", 0.0),
        )
        for entry in document.get("activity", [])
    }
    pc_samples = {
        int(tid): tuple(
            PcHit(
                address=_address(hit.get("address")) or 0,
                sp=_address(hit.get("sp")) or 0,
                function=hit.get("function"),
                library=hit.get("library"),
                state=_address(hit.get("state")),
                at=hit.get("at_s"),
                ran_ns=hit.get("ran_ns"),
                timeslices=hit.get("timeslices"),
                timeslices_asked=hit.get("timeslices_asked"),
                faults=hit.get("faults"),
                in_syscall=hit.get("in_syscall"),
            )
            for hit in hits
        )
        for tid, hits in document.get("pc_samples", {}).items()
    }
    return Capture(
        pc_samples=pc_samples,
        pc_rounds=document.get("pc_rounds", 0),
        bridge_code=dict(document.get("bridge_code", {})),
        symbols=document.get("symbols"),
        initial_state=document.get("initial_state"),
        pid=document["pid"],
        command=list(document.get("command", [])),
        executable=document.get("executable"),
        requested_samples=document.get("requested_samples", len(samples)),
        interval=document.get("interval_s", 0.0),
        samples=samples,
        activity=activity,
        notes=list(document.get("notes", [])),
        complete=document.get("complete", True),
        exited=document.get("exited", False),
        symbols_only=document.get("symbols_only", False),
        gdb=document.get("gdb"),
    )
