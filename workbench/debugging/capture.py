"""Samples of every thread's stack, taken with gdb, leaving the process as it was found.

Each sample attaches, reads all threads in two batched round trips, and detaches, so the
process runs normally between samples (and is never left traced if the workbench dies
between them). Between samples the threads' states and CPU time are polled from /proc:
that is where "always running" evidence comes from, since gdb sees only stopped threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from workbench.debugging import procfs
from workbench.debugging.debug_directories import nix_debug_outputs, passable, store_path
from workbench.debugging.errors import (
    AlreadyTracedError,
    DebugError,
    GdbDiedError,
    GdbTimeoutError,
    MiError,
    ProcessExitedError,
    ProcessGoneError,
    PtraceDeniedError,
    ZombieError,
)
from workbench.debugging.gdb_session import GdbSession, MiResult, find_gdb, mi_quote
from workbench.debugging.model import (
    Capture,
    Frame,
    PcHit,
    Sample,
    ThreadActivity,
    ThreadStack,
    WaitInfo,
)
from workbench.debugging.names import strip_signature
from workbench.debugging.pc_sampling import PcSampler, PcSamples, RegisterRead
from workbench.debugging.ptrace import check_ptrace, explain_attach_failure
from workbench.debugging.symbols import (
    SymbolStatus,
    check_libraries,
    check_symbols,
    is_runtime_or_system_library,
)

Progress = Callable[[str], None]
MIN_PC_ROUNDS = 4  # for many threads; few threads get at least FEW_THREADS_PC_ROUNDS
FEW_THREADS_PC_ROUNDS = 10
MIN_WATCH_S = 0.05  # /proc's CPU time needs this much wall time to say "always running"
MIN_PC_ROUNDS_MANY = 2  # 32 threads and more: each round waits for every one to be scheduled
PC_SAMPLE_BUDGET = 128  # thread-samples per capture: 16 rounds of 8 threads, 2 of 64
IDLE_LOOK_S = 0.025  # /proc looks while only gdb is awaited (sampling over)

# Innermost-first markers of a thread blocked in a futex, and what it waits for. The first
# specific marker found in the top frames wins; a bare futex frame is the fallback.
WAIT_MARKERS: tuple[tuple[str, str], ...] = (
    ("__cxa_guard_acquire", "static-guard"),
    ("__lll_lock_wait", "mutex"),
    ("pthread_mutex_lock", "mutex"),
    ("pthread_mutex_timedlock", "mutex"),
    ("pthread_mutex_clocklock", "mutex"),
    ("pthread_join", "join"),
    ("pthread_clockjoin", "join"),
    ("pthread_timedjoin", "join"),
    ("pthread_tryjoin", "join"),
    ("pthread_cond_wait", "condition"),
    ("pthread_cond_timedwait", "condition"),
    ("pthread_cond_clockwait", "condition"),
    ("__pthread_cond_wait_common", "condition"),
    ("condition_variable::wait", "condition"),
    ("pthread_rwlock", "rwlock"),
    ("sem_wait", "semaphore"),
    ("sem_timedwait", "semaphore"),
    ("sem_clockwait", "semaphore"),
)
WAIT_SCAN_DEPTH = 8
# Syscall number register, first two argument registers, and futex's number, per machine.
SYSCALL_REGISTERS = {
    "x86_64": ("$orig_rax", "$rdi", "$rsi", 202),
    "aarch64": ("$x8", "$x0", "$x1", 98),
}
OWNED_WAITS = {"mutex", "join", "static-guard"}
FUTEX_WAIT_OPS = {0, 6, 9, 11}  # WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI
SYSTEM_LIBRARY = re.compile(
    r"/(libc|libpthread|libstdc\+\+|libgcc_s|libm|ld-linux[^/]*)[.-][^/]*$|/ld-[^/]*$"
)
_LWP = re.compile(r"\bLWP (\d+)|\bprocess (\d+)")
_HEX = re.compile(r"0x[0-9a-fA-F]+")


@dataclass
class CaptureOptions:
    """How to sample: count, spacing, frame limit, time limits and which gdb."""

    samples: int = 5
    interval: float = 0.2
    max_frames: int = 256
    attach_timeout: float = 30.0
    symbols_only_timeout: float = 120.0
    command_timeout: float = 60.0
    gdb: str | None = None
    symbols_only: bool = False
    observe: float = 0.12
    poll_every: float = 0.02
    step_probe: int = 40
    step_timeout: float = 3.0
    max_probed_threads: int = 8
    pc_rounds: int = 16
    max_symbolised: int = 256
    # The CLI, about to print and exit, leaves a detached gdb to exit by itself.
    wait_for_gdb_exit: bool = True
    debug_dirs: tuple[str, ...] = ()
    proc: Path = field(default=procfs.PROC)


def preflight(pid: int, proc: Path = procfs.PROC) -> procfs.Stat:
    """Refuse, with the reason, a process that cannot be captured: gone, zombie, traced."""
    stat = procfs.read_stat(pid, proc=proc)
    if stat is None:
        raise ProcessGoneError(f"no process {pid} (it has exited, or the PID is wrong)")
    if stat.state in ("Z", "X"):
        parent = procfs.read_stat(stat.ppid, proc=proc)
        parent_text = f"{stat.ppid} ({parent.comm})" if parent else str(stat.ppid)
        raise ZombieError(
            f"process {pid} ({stat.comm}) is a zombie: it has exited, and its parent, process "
            f"{parent_text}, has not collected its exit status (wait), so no threads or memory "
            f"are left to debug. If the parent is what hangs, run `workbench bt {stat.ppid}`; "
            "ending the parent clears the zombie"
        )
    tracer = procfs.read_status(pid, proc).get("TracerPid", "0")
    if tracer.isdigit() and int(tracer) != 0:
        tracer_stat = procfs.read_stat(int(tracer), proc=proc)
        name = f" ({tracer_stat.comm})" if tracer_stat else ""
        raise AlreadyTracedError(
            f"process {pid} is already traced by process {tracer}{name}: only one debugger "
            "may attach; detach that one (quit gdb/strace) and try again"
        )
    access = check_ptrace(pid, proc=proc)
    if access.verdict == "denied":
        raise PtraceDeniedError(access.message(pid))
    return stat


class ActivityTracker:
    """Polls /proc between samples: per thread, the states seen and the CPU time used."""

    def __init__(self, pid: int, proc: Path) -> None:
        self.pid = pid
        self.proc = proc
        self.activity: dict[int, ThreadActivity] = {}
        self.last: dict[int, tuple[str, str | None]] = {}
        # Each thread's first /proc io counters and when they were read: output advancing
        # between the first and the last look is progress (read at each watch's ends only).
        self.first_io: dict[int, tuple[float, dict[str, int]]] = {}

    def look_at_io(self) -> None:
        """Read every thread's io counters; record how far they moved since its first read."""
        for tid in procfs.thread_ids(self.pid, self.proc):
            counters = procfs.read_io(self.pid, tid, self.proc)
            if counters is None:
                continue
            now = time.monotonic()
            first = self.first_io.setdefault(tid, (now, counters))
            entry = self.activity.setdefault(tid, ThreadActivity(tid=tid))
            entry.io = {key: counters[key] - first[1][key] for key in procfs.IO_FIELDS}
            entry.io_seconds = now - first[0]

    def watch(
        self,
        seconds: float,
        poll_every: float,
        between: Callable[[], bool] | None = None,
    ) -> bool:
        """Observe for `seconds` (at least once); False when the process has gone.

        `between` runs after each poll for as long as it returns True (the PC sampler), and
        the watch lasts until it is done even past `seconds`.
        """
        start = time.monotonic()
        first = self._poll()
        if first is None:
            return False
        self.look_at_io()
        latest = first
        busy = between is not None
        while time.monotonic() - start < seconds or busy:
            if busy:
                assert between is not None
                busy = between()
            time.sleep(min(poll_every, max(0.001, seconds - (time.monotonic() - start))))
            polled = self._poll()
            if polled is None:
                return False
            latest = polled
        self.look_at_io()
        elapsed = time.monotonic() - start
        for tid, ticks in latest.items():
            if tid in first:
                entry = self.activity[tid]
                entry.cpu_seconds += (ticks - first[tid]) / procfs.CLOCK_TICKS
                entry.seconds += elapsed
        return True

    def _poll(self) -> dict[int, int] | None:
        stat = procfs.read_stat(self.pid, proc=self.proc)
        if stat is None or stat.state in ("Z", "X"):
            return None
        ticks: dict[int, int] = {}
        for tid in procfs.thread_ids(self.pid, self.proc):
            task = procfs.read_stat(self.pid, tid, self.proc)
            if task is None:
                continue
            wchan = procfs.read_wchan(self.pid, tid, self.proc)
            entry = self.activity.setdefault(tid, ThreadActivity(tid=tid))
            entry.observations += 1
            entry.states[task.state] = entry.states.get(task.state, 0) + 1
            entry.wchan = wchan or entry.wchan
            self.last[tid] = (task.state, wchan)
            ticks[tid] = task.cpu_ticks
        return ticks


def capture(
    pid: int,
    options: CaptureOptions | None = None,
    progress: Progress | None = None,
    session: GdbSession | None = None,
) -> Capture:
    """Take `options.samples` samples of every thread of `pid`, `options.interval` apart.

    The process is left as found: running if it was running, stopped (T) if it was stopped.
    If it exits part-way, the samples taken so far are returned with `complete=False` and a
    note; if it exits before the first, ProcessGoneError.
    """
    options = options or CaptureOptions()
    say = progress or (lambda _message: None)
    proc = options.proc
    try:
        stat = preflight(pid, proc)
    except DebugError:
        if session is not None:
            session.close()
        raise
    was_stopped = stat.state == "T"
    gdb = session.gdb if session is not None else find_gdb(options.gdb)
    executable = procfs.executable(pid, proc)
    symbols = check_symbols(executable, options.debug_dirs)
    result = Capture(
        pid=pid,
        command=procfs.command_line(pid, proc),
        executable=executable,
        requested_samples=options.samples,
        interval=options.interval,
        gdb=gdb,
        symbols_only=options.symbols_only,
        symbols=_symbols_json(symbols),
        initial_state=stat.state,
    )
    if symbols is not None and symbols.level != "full":
        result.notes.insert(0, symbols.message())
    if was_stopped:
        result.notes.append(f"process {pid} was stopped (state T) when found; it is left stopped")
    tracker = ActivityTracker(pid, proc)
    directories = symbols.searched if symbols else ()
    # gdb starts now (unless the caller started it earlier still) and loads itself while
    # the threads are watched and their program counters sampled: the waits overlap.
    if session is None:
        say(f"starting {os.path.basename(gdb)}")
        session = GdbSession(gdb, symbols_only=result.symbols_only)
    # -gdb-set hands its text to gdb's `set` unquoted: a directory with a colon, a space or a
    # quote cannot be named there, and is left out.
    usable = passable(directories)
    setup = []
    # A gdb that start_early gave this program and these directories is reading it already.
    if session.preloaded is None or session.preloaded != (executable, usable):
        setup = [f"-gdb-set debug-file-directory {':'.join(usable)}"] if usable else []
        if executable and os.path.isfile(executable) and not result.symbols_only:
            # Reading the executable's symbols (the bulk of a static ORT binary's) needs no
            # ptrace: gdb does it now, while the threads are watched, not after the attach.
            setup.append(f"-file-exec-and-symbols {mi_quote(executable)}")
    setup.append("-gdb-set print thread-events off")  # always one answer to wait for
    loading = session.send(setup)
    pcs: PcSamples | None = None
    started = time.monotonic()
    finished = False
    try:
        for index in range(options.samples):
            window = options.observe if index == 0 else options.interval
            if index == 0 and not was_stopped and options.pc_rounds > 0 and window > 0:
                alive, pcs = _watch_and_sample(
                    tracker,
                    window,
                    options,
                    partial(session.answered, loading),
                    partial(session.wait_answered, loading),
                )
            else:
                alive = tracker.watch(window, options.poll_every)
            if not alive:
                _note_gone(result, pid, index)
                break
            sample = None
            while sample is None and not result.exited:
                if session is None:
                    say(
                        f"starting {os.path.basename(gdb)}"
                        + (" (symbols only)" if result.symbols_only else "")
                    )
                    session = GdbSession(
                        gdb, symbols_only=result.symbols_only, debug_dirs=directories
                    )
                say(f"sample {index + 1}/{options.samples}: attaching to {pid}")
                try:
                    hits = pcs.by_thread if (pcs and not result.pc_samples) else {}
                    sample = take_sample(
                        session,
                        pid,
                        index,
                        started,
                        tracker.last,
                        options,
                        hits,
                        result,
                        given_dirs=usable,
                    )
                except SteppingStalled as stalled:
                    sample = stalled.sample
                    session.close(grace=1.0)
                    session = None
                    _restore_state(pid, was_stopped)
                    options = dataclasses.replace(options, step_probe=0)
                    result.notes.append(
                        f"single-stepping a running thread in sample {index + 1} did not come "
                        f"back within {options.step_timeout:g} s (it entered a blocking call): "
                        "stepping is off for the rest of the capture"
                    )
                except GdbTimeoutError as exc:
                    session.close(grace=1.0)
                    session = None
                    _restore_state(pid, was_stopped)
                    if result.symbols_only:
                        raise GdbTimeoutError(
                            f"{exc}, even reading ELF symbols only (gdb --readnever, "
                            f"{options.symbols_only_timeout:g} s): is the machine overloaded, "
                            "or the process stuck in the kernel (state D)?"
                        ) from None
                    result.symbols_only = True
                    result.notes.append(
                        f"gdb took longer than {options.attach_timeout:g} s to attach and read "
                        "debug info (a huge binary?): fell back to ELF symbols only (gdb "
                        "--readnever), so frames have function names but no file:line"
                    )
                    say("gdb too slow: retrying with symbols only")
                except ProcessGoneError:
                    _note_gone(result, pid, index)
            if sample is None:
                break
            result.samples.append(sample)
        finished = True
    finally:
        if session is not None:
            # After a clean detach nothing is left for gdb to undo: the CLI need not wait.
            # A process found stopped is stopped again only once gdb has fully let it go.
            session.close(
                wait=options.wait_for_gdb_exit or not finished or result.exited or was_stopped
            )
        _restore_state(pid, was_stopped)
    # A last look without the debugger, so the last sample has activity after it too (with
    # one sample, the look before it and the program counters are the evidence).
    if len(result.samples) > 1 and not result.exited and options.observe > 0:
        tracker.watch(options.observe, options.poll_every)
    elif not result.exited:
        # One sample: no watch after it, but its io counters, read now (microseconds), take
        # in what the threads wrote since the watch before gdb attached.
        tracker.look_at_io()
    result.activity = tracker.activity
    # The shared libraries the threads run in (libonnxruntime.so in a python process, a
    # provider loaded by dlopen) get the executable's check, after gdb has let the process
    # go: only their ELF headers, and only of the libraries the threads' code is in.
    libraries = check_libraries(_libraries_in_use(result), executable, options.debug_dirs)
    if libraries:
        result.symbols = _with_libraries(result.symbols, libraries)
        missing = [status.message() for status in libraries if status.missing]
        found = [status.message() for status in libraries if status.level == "separate"]
        # What is missing is said first, right after the executable's own warning.
        first = 1 if symbols is not None and symbols.level != "full" else 0
        result.notes[first:first] = missing
        result.notes.extend(found)
    if pcs is not None:
        result.pc_rounds = pcs.rounds
        if pcs.problem:
            result.notes.append(f"program counters not sampled: {pcs.problem}")
    if not result.samples:
        raise ProcessExitedError(
            f"process {pid} exited while gdb was attaching, before a sample was taken: it "
            "did not hang" + (f" ({'; '.join(result.notes)})" if result.notes else "")
        )
    return result


def _symbols_json(status: SymbolStatus | None) -> dict[str, Any] | None:
    if status is None:
        return None
    facts = status.facts
    return {
        "path": status.path,
        "level": status.level,
        "missing": status.missing,
        "debug_file": status.debug_file,
        "build_id": facts.build_id if facts else None,
        "debuglink": facts.debuglink if facts else None,
        "searched": list(status.searched),
        "advice": list(status.advice),
        "message": status.message(),
    }


def _with_libraries(
    executable: dict[str, Any] | None, libraries: list[SymbolStatus]
) -> dict[str, Any]:
    """The executable's symbols document with `libraries`: each checked library's own."""
    document = dict(executable) if executable else {"path": None, "level": None}
    document["missing"] = bool(executable and executable.get("missing"))
    document["libraries"] = [_symbols_json(status) for status in libraries]
    return document


def _libraries_in_use(capture: Capture) -> list[str]:
    """The mapped files the threads' code is in: where program counters were sampled, then
    each thread's innermost frame and its innermost frame outside the runtime libraries
    (a thread blocked in libc waits on behalf of that caller). Most frequent first."""
    counts: dict[str, int] = {}
    for hits in capture.pc_samples.values():
        for hit in hits:
            if hit.library:
                counts[hit.library] = counts.get(hit.library, 0) + 1
    for sample in capture.samples[-1:]:
        for thread in sample.threads:
            frames = thread.frames[:WAIT_SCAN_DEPTH]
            caller = next(
                (
                    frame
                    for frame in frames
                    if frame.library and not is_runtime_or_system_library(frame.library)
                ),
                None,
            )
            for frame in (frames[0] if frames else None, caller):
                if frame is not None and frame.library:
                    counts[frame.library] = counts.get(frame.library, 0) + 1
    return sorted(counts, key=lambda path: -counts[path])


def _load_relative_libraries(
    session: GdbSession, mappings: list[tuple[int, int, str]], timeout: float
) -> None:
    """Load the libraries gdb could not find because the program named them relative to its
    own directory (dlopen("./libx.so"), ctypes.CDLL("./libx.so")): gdb looks for them
    relative to its own. Their mapped paths' directories become solib-search-path, where
    gdb looks for a library by its base name, and `sharedlibrary` loads them. Nothing is
    sent when every library was found (the usual case)."""
    unfound = {
        os.path.basename(str(payload.get("host-name") or payload.get("id") or ""))
        for record in session.notifications
        if record.get("message") == "library-loaded"
        and isinstance(payload := record.get("payload"), dict)
        and not str(payload.get("host-name") or payload.get("id") or "/").startswith("/")
    }
    directories = passable(
        tuple(
            dict.fromkeys(
                os.path.dirname(path)
                for _, _, path in mappings
                if os.path.basename(path) in unfound
            )
        )
    )
    if directories:
        session.commands(
            [
                f"-gdb-set solib-search-path {':'.join(directories)}",
                '-interpreter-exec console "sharedlibrary"',
            ],
            timeout=timeout,
        )


def _library_debug_directories(
    pcs: dict[int, list[RegisterRead]],
    mappings: list[tuple[int, int, str]],
    given: tuple[str, ...],
) -> tuple[str, ...]:
    """The Nix `-debug` outputs of the store libraries the program counters landed in that
    gdb was not given: empty unless such a library runs (then gdb is told before it attaches
    and loads the library's symbols). The store is listed once per process."""
    landed: set[str] = set()
    for reads in pcs.values():
        for read in reads:
            library = _library_of(read.pc, mappings)
            if library and store_path(library):
                landed.add(library)
    extra: list[str] = []
    for library in sorted(landed):
        if not is_runtime_or_system_library(library):
            extra += [d for d in nix_debug_outputs(library) if d not in given and d not in extra]
    return passable(tuple(extra))


def _watch_and_sample(
    tracker: ActivityTracker,
    window: float,
    options: CaptureOptions,
    gdb_ready: Callable[[], bool],
    gdb_wait: Callable[[float], bool] | None = None,
) -> tuple[bool, PcSamples | None]:
    """Watch /proc and sample the running threads' program counters until gdb is ready.

    gdb starts and reads the executable's symbols meanwhile, so the watch costs nothing
    while it lasts no longer than that: it ends once gdb has answered, at least
    MIN_WATCH_S has passed and MIN_PC_ROUNDS rounds were taken; at the latest after
    `window` seconds, or when gdb is ready after that (a huge binary's symbols).

    Once the sampling is over and only gdb is awaited, `gdb_wait(seconds)` waits on gdb's
    answer between looks at /proc, IDLE_LOOK_S apart, instead of a look every few ms: a look
    at 64 threads (stat and wchan of each) costs about 3 ms of CPU, which on a busy machine
    is taken from gdb loading beside it.
    """
    sampler: PcSampler | None = None
    rounds = 0
    wanted = least = options.pc_rounds
    let_go = False
    began = time.monotonic()

    def sample() -> bool:
        nonlocal sampler, rounds, wanted, least, let_go
        if sampler is None:
            running = [tid for tid, (state, _) in tracker.last.items() if state == "R"]
            sampler = PcSampler(running)
            # A round stops every running thread once, and on a busy machine each stop waits
            # for its thread to be scheduled: many threads get fewer rounds (their group
            # still has many samples), and the window's end ends the sampling.
            floor = MIN_PC_ROUNDS_MANY if len(running) >= 32 else MIN_PC_ROUNDS
            wanted = max(floor, min(options.pc_rounds, PC_SAMPLE_BUDGET // max(1, len(running))))
            least = min(wanted, FEW_THREADS_PC_ROUNDS)
        elapsed = time.monotonic() - began
        done = elapsed >= MIN_WATCH_S and ((rounds >= least and elapsed >= window) or gdb_ready())
        if sampler.traced and not let_go:
            rounds += 1
            if rounds >= wanted or (done and rounds >= least):
                sampler.detach()  # a last read, then every thread is let go
                let_go = True
            else:
                sampler.sample()
        elif not done and gdb_wait is not None and (let_go or not sampler.traced):
            # Nothing to sample: wait on gdb (back at once when it answers), not on a timer.
            until_minimum = MIN_WATCH_S - elapsed
            gdb_wait(IDLE_LOOK_S if until_minimum <= 0 else min(IDLE_LOOK_S, until_minimum))
            elapsed = time.monotonic() - began
            done = elapsed >= MIN_WATCH_S and (
                (rounds >= least and elapsed >= window) or gdb_ready()
            )
        return not done or (bool(sampler.traced) and not let_go)

    spacing = min(options.poll_every, window / max(1, options.pc_rounds))
    try:
        alive = tracker.watch(0.0, spacing, between=sample)
    finally:
        if sampler is not None:
            sampler.detach()
    return alive, sampler.samples if sampler is not None else None


def _note_gone(result: Capture, pid: int, index: int) -> None:
    result.complete = False
    result.exited = True
    result.notes.append(
        f"process {pid} exited during the capture, after {index} of {result.requested_samples} "
        "samples: the samples taken before are kept"
    )


def _restore_state(pid: int, was_stopped: bool) -> None:
    """Undo a stop gdb may have left (a SIGSTOP from the attach still pending at a kill).

    A process found running must not be left stopped, and one found stopped must not be
    left running.
    """
    deadline = time.monotonic() + 0.5
    while True:
        stat = procfs.read_stat(pid)
        if stat is None or stat.state in ("Z", "X"):
            return
        if stat.state != "t":
            break
        if time.monotonic() > deadline:
            return  # still traced: the caller's gdb is still attached or exiting
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        if stat.state == "T" and not was_stopped:
            os.kill(pid, signal.SIGCONT)
        elif stat.state != "T" and was_stopped:
            os.kill(pid, signal.SIGSTOP)


def take_sample(
    session: GdbSession,
    pid: int,
    index: int,
    started: float,
    states: dict[int, tuple[str, str | None]],
    options: CaptureOptions,
    pcs: dict[int, list[RegisterRead]] | None = None,
    result: Capture | None = None,
    given_dirs: tuple[str, ...] = (),
) -> Sample:
    """Attach, read every thread's frames (and what blocked threads wait for), detach.

    `given_dirs`: the debug directories gdb was told; a Nix store library the sampled
    program counters landed in adds its `-debug` output's before the attach."""
    begin = time.monotonic()
    session.take_notifications()
    # gdb reads symbols while attaching and while unwinding the first time: the attach,
    # thread list and stacks together get the time limit whose expiry means "too slow".
    limit = options.symbols_only_timeout if session.symbols_only else options.attach_timeout
    deadline = begin + limit
    libraries: list[tuple[int, int, str]] = []
    directories: dict[int, str] = {}
    if pcs:
        # The address map first (a fraction of a millisecond): gdb reads a library's
        # separate debug file when the attach loads it, so a Nix library's debug output
        # must be named before. Nothing is sent or listed unless a store library runs.
        libraries = _executable_mappings(pid, options.proc)
        more = _library_debug_directories(pcs, libraries, given_dirs)
        if more:
            directories = session.send(
                [f"-gdb-set debug-file-directory {':'.join([*given_dirs, *more])}"]
            )
    attaching = session.send([f"-target-attach {pid}", "-thread-info"])
    # While gdb attaches and reads the libraries' symbols (the bulk of a sample), Python does
    # what needs no gdb: the address map, and importing the code that groups the threads.
    # The diagnosis (about 10 ms of imports) is needed after the capture in any case: the
    # attach hides it, where after the stacks it would delay the detach and the answer.
    if not pcs:
        libraries = _executable_mappings(pid, options.proc)
    import workbench.debugging.diagnosis  # noqa: F401 (for _pc_groups, below, and the caller)

    if directories:
        session.collect(directories, timeout=limit)
    attach, thread_info = session.collect(attaching, timeout=limit)
    if not attach.ok:
        _raise_attach_error(pid, attach.error, options.proc)
    try:
        _load_relative_libraries(session, libraries, _left(deadline))
        if not thread_info.ok:
            raise MiError("-thread-info", thread_info.error)
        threads = thread_info.payload.get("threads", [])
        stacks = session.commands(
            [
                f"-stack-list-frames --thread {thread['id']} 0 {options.max_frames}"
                for thread in threads
            ],
            timeout=_left(deadline),
        )
        raw: list[tuple[dict[str, Any], list[Frame], bool]] = []
        for thread, stack in zip(threads, stacks, strict=True):
            if not stack.ok:
                if not procfs.exists(pid, options.proc):
                    raise ProcessGoneError(f"process {pid} exited: {stack.error}")
                frames: list[Frame] = []
            else:
                frames = [_frame(item, libraries) for item in stack.payload.get("stack", [])]
            truncated = len(frames) > options.max_frames
            raw.append((thread, frames[: options.max_frames], truncated))
        waits = _probe_waits(session, raw, options)
        depths = _probe_depths(session, pid, raw, options)
        if pcs and result is not None:
            result.pc_samples = _symbolise(session, pcs, libraries, options)
        groups = _pc_groups(result.pc_samples) if result is not None else {}
        read_bridge = False
        if result is not None and BRIDGED in groups.values():
            code = _read_bridge_code(session, _bridge_stubs(result.pc_samples, groups), options)
            result.bridge_code.update(code)
            read_bridge = bool(code)
        # The loop the binary confirmed: its stub, host method and Provider_GetHost. A thread
        # whose counters or stack top fell there is in that loop, whatever its group.
        confirmed = (
            {
                strip_signature(name)
                for stub, found in result.bridge_code.items()
                for name in (stub, found.get("host_method", ""), "Provider_GetHost")
                if name
            }
            if result is not None and read_bridge
            else set()
        )
        stalled = False
        try:
            trails = _probe_steps(
                session,
                raw,
                states,
                options,
                groups,
                skip_bridged=read_bridge,
                confirmed=confirmed,
            )
        except GdbTimeoutError:
            # A stepped thread entered a blocking call: gdb waits for it and takes no
            # commands, so this gdb must go (the caller ends it and restores the process).
            trails, stalled = {}, True
        if not stalled:
            detach = session.command("-target-detach", timeout=options.command_timeout, check=False)
            if not detach.ok and procfs.exists(pid, options.proc):
                raise MiError("-target-detach", detach.error)
    except (MiError, GdbDiedError) as exc:
        if not procfs.exists(pid, options.proc):
            raise ProcessGoneError(f"process {pid} exited: {exc}") from None
        raise
    thread_stacks = []
    for thread, frames, truncated in raw:
        tid = _thread_tid(thread, pid)
        state, wchan = states.get(tid, (None, None))
        thread_stacks.append(
            ThreadStack(
                gdb_id=int(thread["id"]),
                tid=tid,
                name=thread.get("name"),
                state=state,
                wchan=wchan,
                frames=tuple(frames),
                truncated=truncated,
                wait=waits.get(int(thread["id"])),
                stack_bytes=depths.get(int(thread["id"])),
                trail=trails.get(int(thread["id"]), ((), ()))[0],
                trail_top=trails.get(int(thread["id"]), ((), ()))[1],
            )
        )
    end = time.monotonic()
    sample = Sample(
        index=index, at=begin - started, duration=end - begin, threads=tuple(thread_stacks)
    )
    if stalled:
        raise SteppingStalled(sample)
    return sample


class SteppingStalled(Exception):
    """Single-stepping a thread did not come back; the sample was read before that."""

    def __init__(self, sample: Sample) -> None:
        super().__init__("single-stepping stalled")
        self.sample = sample


def _left(deadline: float) -> float:
    return max(0.001, deadline - time.monotonic())


def _raise_attach_error(pid: int, message: str, proc: Path) -> None:
    # /proc first: a process that exits while gdb attaches makes the kernel refuse the
    # attach too ("Operation not permitted" on an exiting task), which is not a ptrace rule.
    after = procfs.read_stat(pid, proc=proc)
    if after is None or after.state in ("Z", "X"):
        raise ProcessExitedError(
            f"process {pid} exited while gdb was attaching (gdb said: {message.strip()}): "
            "it did not hang"
        )
    lowered = message.lower()
    if "operation not permitted" in lowered or "permission denied" in lowered:
        raise PtraceDeniedError(explain_attach_failure(pid, message, proc=proc))
    if "no such process" in lowered:
        raise ProcessExitedError(f"process {pid} is gone: {message}")
    raise DebugError(f"gdb could not attach to process {pid}: {message}")


def _thread_tid(thread: dict[str, Any], pid: int) -> int:
    found = _LWP.search(str(thread.get("target-id", "")))
    if found:
        return int(found.group(1) or found.group(2))
    return pid


def _executable_mappings(pid: int, proc: Path) -> list[tuple[int, int, str]]:
    """(start, end, path) of every executable file mapping: where each address comes from."""
    try:
        text = (proc / str(pid) / "maps").read_text()
    except OSError:
        return []
    mappings = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
            continue
        start_text, _, end_text = parts[0].partition("-")
        mappings.append((int(start_text, 16), int(end_text, 16), parts[5].strip()))
    return mappings


def _library_of(address: int, mappings: list[tuple[int, int, str]]) -> str | None:
    for start, end, path in mappings:
        if start <= address < end:
            return path
    return None


def _frame(item: dict[str, Any], mappings: list[tuple[int, int, str]]) -> Frame:
    address = int(item.get("addr", "0"), 16) if str(item.get("addr", "")).startswith("0x") else 0
    function = item.get("func")
    line = item.get("line")
    return Frame(
        level=int(item.get("level", 0)),
        address=address,
        function=strip_signature(function) if function and function != "??" else None,
        file=item.get("fullname") or item.get("file"),
        line=int(line) if line and str(line).isdigit() else None,
        library=item.get("from") or _library_of(address, mappings),
    )


def wait_kind(frames: list[Frame]) -> str | None:
    """What the top frames say the thread is blocked in, or None when not a known wait."""
    top = frames[:WAIT_SCAN_DEPTH]
    for frame in top:
        name = frame.function or ""
        for marker, kind in WAIT_MARKERS:
            if marker in name:
                return kind
    if any("futex" in (frame.function or "") for frame in top[:4]):
        return "futex"
    return None


def _int_value(result: MiResult) -> int | None:
    if not result.ok:
        return None
    text = str(result.payload.get("value", ""))
    found = _HEX.search(text)
    try:
        return int(found.group(0), 16) if found else int(text.split()[0])
    except (ValueError, IndexError):
        return None


def _probe_waits(
    session: GdbSession,
    raw: list[tuple[dict[str, Any], list[Frame], bool]],
    options: CaptureOptions,
) -> dict[int, WaitInfo]:
    """For threads in a futex wait: which futex, its owner (mutex) or joined thread, its name.

    The futex syscall's first argument is the address waited on: for a mutex that is the
    pthread_mutex_t itself (whose `__owner` field, at offset 8, is the holder's TID); for a
    join it is the joined thread's TID word. This works without libc debug info.
    """
    machine = os.uname().machine
    registers = SYSCALL_REGISTERS.get(machine)
    kinds = {int(thread["id"]): wait_kind(frames) for thread, frames, _ in raw}
    infos = {gdb_id: WaitInfo(kind=kind) for gdb_id, kind in kinds.items() if kind}
    # Only waits with an owner to find are probed: a condition variable or semaphore has no
    # holder to name, and probing every idle worker of a thread pool would be slow.
    waiting = [(gdb_id, kind) for gdb_id, kind in kinds.items() if kind in OWNED_WAITS]
    if not waiting or registers is None:
        return infos
    nr_register, arg0, arg1, futex_nr = registers
    commands = [
        f"-data-evaluate-expression --thread {gdb_id} --frame 0 {register}"
        for gdb_id, _ in waiting
        for register in (nr_register, arg0, arg1)
    ]
    values = [_int_value(result) for result in session.commands(commands, options.command_timeout)]
    addresses: dict[int, int] = {}
    for position, (gdb_id, _kind) in enumerate(waiting):
        number, address, operation = values[position * 3 : position * 3 + 3]
        if (
            number == futex_nr
            and address
            and operation is not None
            and operation & 0x7F in FUTEX_WAIT_OPS
        ):
            addresses[gdb_id] = address
    if not addresses:
        return infos
    order = list(addresses)
    reads = []
    for gdb_id in order:
        size = 12 if infos[gdb_id].kind == "mutex" else 4
        reads.append(f"-data-read-memory-bytes 0x{addresses[gdb_id]:x} {size}")
        reads.append(f'-interpreter-exec console "info symbol 0x{addresses[gdb_id]:x}"')
    answers = session.commands(reads, options.command_timeout)
    for position, gdb_id in enumerate(order):
        memory, symbol = answers[position * 2], answers[position * 2 + 1]
        words = _words(memory)
        kind = infos[gdb_id].kind
        owner = None
        if kind == "mutex" and len(words) >= 3 and words[2] > 0:
            owner = words[2]
        elif kind == "join" and words and words[0] > 0:
            owner = words[0]
        infos[gdb_id] = WaitInfo(
            kind=kind, address=addresses[gdb_id], owner_tid=owner, symbol=_symbol(symbol)
        )
    return infos


def _words(result: MiResult) -> list[int]:
    """The 32-bit little-endian words of a -data-read-memory-bytes answer."""
    if not result.ok:
        return []
    blocks = result.payload.get("memory") or []
    contents = blocks[0].get("contents", "") if blocks else ""
    data = bytes.fromhex(contents)
    return [
        int.from_bytes(data[i : i + 4], "little", signed=True) for i in range(0, len(data) - 3, 4)
    ]


def _symbol(result: MiResult) -> str | None:
    """`m1 in section .bss of /x` → `m1`; None for "No symbol matches" (heap objects)."""
    text = "".join(result.console).strip()
    if not result.ok or not text or text.startswith("No symbol"):
        return None
    return text.split(" in section ")[0].strip()


def _probe_depths(
    session: GdbSession,
    pid: int,
    raw: list[tuple[dict[str, Any], list[Frame], bool]],
    options: CaptureOptions,
) -> dict[int, int]:
    """Stack bytes in use for the threads whose stacks were too deep to read in full."""
    deep = [int(thread["id"]) for thread, _, truncated in raw if truncated]
    if not deep:
        return {}
    commands = [f"-data-evaluate-expression --thread {gdb_id} --frame 0 $sp" for gdb_id in deep]
    depths = {}
    answers = session.commands(commands, options.command_timeout)
    for gdb_id, result in zip(deep, answers, strict=True):
        pointer = _int_value(result)
        used = procfs.stack_bytes_used(pid, pointer, options.proc) if pointer else None
        if used is not None:
            depths[gdb_id] = used
    return depths


def _symbolise(
    session: GdbSession,
    pcs: dict[int, list[RegisterRead]],
    mappings: list[tuple[int, int, str]],
    options: CaptureOptions,
) -> dict[int, tuple[PcHit, ...]]:
    """Name the sampled program counters with gdb's `info symbol`, one batch for all."""
    counts: dict[int, int] = {}
    for reads in pcs.values():
        for read in reads:
            counts[read.pc] = counts.get(read.pc, 0) + 1
    # The most frequent addresses first: a loop's few addresses are always named.
    wanted = sorted(counts, key=lambda address: -counts[address])[: options.max_symbolised]
    answers = session.commands(
        [f'-interpreter-exec console "info symbol 0x{address:x}"' for address in wanted],
        timeout=options.command_timeout,
    )
    names: dict[int, str | None] = {}
    for address, answer in zip(wanted, answers, strict=True):
        text = _symbol(answer)
        if text:
            text = text.split(" + ")[0].strip()
        names[address] = strip_signature(text) if text else None
    first = min((read.at for reads in pcs.values() for read in reads), default=0.0)
    return {
        tid: tuple(
            PcHit(
                read.pc,
                read.sp,
                names.get(read.pc),
                _library_of(read.pc, mappings),
                state=read.state,
                at=read.at - first,
                ran_ns=read.ran_ns,
            )
            for read in reads
        )
        for tid, reads in pcs.items()
    }


def pc_group_key(hits: tuple[PcHit, ...]) -> tuple[str, ...]:
    """The code a thread ran in: the place its program counter was most often.

    Threads in one loop with few samples each hit different subsets of its functions, but
    most often the same one, so they land in one group (and one of them is stepped).
    """
    counts: dict[str, int] = {}
    for hit in hits:
        counts[hit.place()] = counts.get(hit.place(), 0) + 1
    return (max(sorted(counts), key=lambda place: counts[place]),) if counts else ()


def _pc_groups(pc_samples: dict[int, tuple[PcHit, ...]]) -> dict[int, tuple[str, ...]]:
    """Running threads by the code they run in; a group whose program counters already show
    two or more functions jumping to each other (at the same, outermost stack level, the
    stack depth steady) needs no stepping, and is marked SETTLED. Threads whose counters show
    the provider bridge's stub calling Provider_GetHost are one group (BRIDGED): one of them
    is stepped for all. Stepping costs most where threads are many: 40 steps of a thread under
    cuda-gdb take most of a second."""
    from workbench.debugging.diagnosis import pc_evidence, sampled_stub_callers

    groups = {tid: pc_group_key(hits) for tid, hits in pc_samples.items() if hits}
    top_level: dict[tuple[str, ...], set[str]] = {}
    bridged: set[tuple[str, ...]] = set()
    for tid, key in groups.items():
        evidence = pc_evidence(pc_samples[tid])
        if evidence is not None and not evidence.moving and not evidence.unnamed:
            top_level.setdefault(key, set()).update(evidence.top_level)
            if sampled_stub_callers(evidence):
                bridged.add(key)
    settled = {key for key, places in top_level.items() if len(places) >= 2} - bridged
    # A thread whose few samples all fell in places the bridge's threads were seen in (two
    # rounds of 64 threads: both in Provider_GetHost) is in that loop too, not a group of
    # its own to step: with it, 64 threads in the loop stepped two.
    bridge_places = {
        hit.place() for tid, key in groups.items() if key in bridged for hit in pc_samples[tid]
    }
    joined = {
        tid
        for tid, key in groups.items()
        if key not in bridged and {hit.place() for hit in pc_samples[tid]} <= bridge_places
    }
    # The bridge's threads share one key: one of them is stepped (its trail names the other
    # side of the bridge, which the samples never catch), not one per sampled place.
    return {
        tid: SETTLED
        if key in settled and tid not in joined
        else BRIDGED
        if key in bridged or tid in joined
        else key
        for tid, key in groups.items()
    }


def _bridge_stubs(
    pc_samples: dict[int, tuple[PcHit, ...]], groups: dict[int, tuple[str, ...]]
) -> set[str]:
    """The bridge stubs the BRIDGED threads' program counters showed calling Provider_GetHost."""
    from workbench.debugging.diagnosis import pc_evidence, sampled_stub_callers

    stubs: set[str] = set()
    for tid, key in groups.items():
        if key == BRIDGED and tid in pc_samples:
            stubs |= sampled_stub_callers(pc_evidence(pc_samples[tid]))
    return stubs


def _host_method_of(stub: str) -> str:
    """`ns::DataTypeImpl::GetType<float>` -> `ns::ProviderHostImpl::DataTypeImpl__GetType_float`:
    the host method ORT's bridge forwards to the stub's real definition."""
    from workbench.debugging import bridge_names
    from workbench.debugging.names import split_scope

    namespace = split_scope(stub)[:-2]
    return "::".join([*namespace, bridge_names.host_method_for(stub)])


# `jmp    0x1340 <ns::DataTypeImpl::GetType<float>()>`: the target's name holds `<>` too.
_BRANCH = re.compile(r"\b(jmp|call)q?\s+(0x[0-9a-fA-F]+)\s+<(.+)>\s*$")


def _read_bridge_code(
    session: GdbSession, stubs: set[str], options: CaptureOptions
) -> dict[str, dict[str, str]]:
    """The provider bridge's other side, read from the binary instead of single-stepping.

    The program counters catch the stub calling Provider_GetHost but never the host method,
    at -O2 a single jump back to the stub; stepping one thread walked the loop to see it
    (80 commands: half a second among 64 threads under cuda-gdb). Here gdb disassembles the
    host method ORT's naming gives the stub (`x/4i`), and the loop's other side is confirmed
    when its first jump or call goes to the stub. Stubs it cannot confirm are left out (the
    thread is stepped as before).
    """
    wanted = sorted(stubs)[:4]
    if not wanted:
        return {}
    hosts = [_host_method_of(stub) for stub in wanted]
    answers = session.commands(
        ["-gdb-set print asm-demangle on"]
        + [
            f"-interpreter-exec console {mi_quote(f'x/4i {chr(39)}{host}{chr(39)}')}"
            for host in hosts
        ],
        timeout=options.command_timeout,
    )[1:]
    found: dict[str, dict[str, str]] = {}
    for stub, host, answer in zip(wanted, hosts, answers, strict=True):
        if not answer.ok:
            continue
        for line in "".join(answer.console).splitlines():
            branch = _BRANCH.search(line)
            if branch is None:
                continue
            target = strip_signature(branch.group(3).split("+", 1)[0].strip())
            if target == strip_signature(stub):
                found[stub] = {
                    "host_method": host,
                    "instruction": f"{branch.group(1)} {branch.group(2)} <{target}>",
                }
            break  # the first branch decides
    return found


def _trail_repeats(names: tuple[str, ...]) -> bool:
    """Whether a stepping trail went round a loop (a run of functions that repeats)."""
    for period in range(1, len(names) // 2 + 1):
        if all(names[i] == names[i + period] for i in range(len(names) - period)):
            return True
    return False


SETTLED = ("(settled by program counters)",)
BRIDGED = ("(the provider bridge's loop, by program counters)",)


def _one_name_per_function(
    session: GdbSession, named: list[tuple[str, str | None]], options: CaptureOptions
) -> tuple[str, ...]:
    """The names stepped through at one stack level, one per function of the binary.

    gdb names a step's place from DWARF, where code inlined into a function is named after
    the inlined function: an interpreter's dispatch loop, its helpers inlined, would look like
    functions jumping to each other (a tail-call cycle) while it is one function looping.
    Each name's first address is looked up with `info symbol` (the ELF symbol, which inlined
    code has not); names in one symbol count once (the symbol's own name where it is one).
    """
    first: dict[str, str | None] = {}
    for name, address in named:
        first.setdefault(name, address)
    if len(first) < 2:
        return tuple(first)
    lookups = [(name, address) for name, address in first.items() if address]
    answers = session.commands(
        [f'-interpreter-exec console "info symbol {address}"' for _, address in lookups],
        timeout=options.command_timeout,
    )
    symbol_of = {}
    for (name, _), answer in zip(lookups, answers, strict=True):
        text = _symbol(answer)
        symbol_of[name] = strip_signature(text.split(" + ")[0].strip()) if text else name
    kept: dict[str, str] = {}  # symbol -> the name kept for it
    for name in first:
        symbol = symbol_of.get(name, name)
        if symbol not in kept or name == symbol:
            kept[symbol] = name
    return tuple(name for name in first if name in kept.values())


def _probe_steps(
    session: GdbSession,
    raw: list[tuple[dict[str, Any], list[Frame], bool]],
    states: dict[int, tuple[str, str | None]],
    options: CaptureOptions,
    groups: dict[int, tuple[str, ...]] | None = None,
    skip_bridged: bool = False,
    confirmed: set[str] | None = None,
) -> dict[int, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Single-step running threads a few dozen instructions; the functions they go through.

    A tail-call loop spends most of its time in one or two instructions of one function, so
    samples alone may never catch the others; stepping walks the whole loop. Only threads
    that were running user code (not blocked, not in a system library) are stepped, with the
    other threads held (scheduler-locking), and all steps of a thread go in one batch.
    """
    if options.step_probe <= 0:
        return {}
    candidates = []
    for thread, frames, truncated in raw:
        tid = _thread_tid(thread, 0)
        if states.get(tid, ("?", None))[0] != "R" or truncated or not frames:
            continue
        if wait_kind(frames) or len(frames) > 64:
            continue
        library = frames[0].library or ""
        if SYSTEM_LIBRARY.search(library) or "[vdso]" in library:
            continue
        candidates.append((int(thread["id"]), tid, frames[0].function))
    if not candidates:
        return {}
    # A thread whose program counters were not sampled (not running at the first look, or
    # the window ended first) but whose stack stops where a bridge thread's does is in the
    # bridge's loop: not a group of its own to step.
    bridge_tops = {
        frames[0].function
        for thread, frames, _ in raw
        if frames and (groups or {}).get(_thread_tid(thread, 0)) == BRIDGED
    }
    # One thread per group of threads running the same code first: 64 threads in one loop
    # need one stepped, and a second loop elsewhere must not wait behind them.
    seen_groups: set[tuple[str, ...]] = set()
    first, rest = [], []
    sampled_place: dict[int, str] = {}  # thread -> where its group's counters were most
    for gdb_id, tid, top in candidates:
        if (groups or {}).get(tid) == SETTLED:
            continue
        key = (groups or {}).get(tid) or (BRIDGED if top in bridge_tops else (str(tid),))
        if skip_bridged and key == BRIDGED:
            continue  # the bridge's other side was read from the binary: nothing to step
        if confirmed and strip_signature(top or "") in confirmed:
            continue  # stopped in the loop the binary confirmed: its group is that loop
        (rest if key in seen_groups else first).append(gdb_id)
        seen_groups.add(key)
        if tid in (groups or {}) and key not in (SETTLED, BRIDGED):
            sampled_place[gdb_id] = key[0]
    ordered = first if groups else first + rest
    if not ordered:
        return {}
    session.command("-gdb-set scheduler-locking on", timeout=options.command_timeout, check=False)
    trails: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    # Loops known already (stepped, or confirmed from the binary): a group whose counters
    # were there is that loop, not a second one to step.
    went_through: set[str] = set(confirmed or ())
    for gdb_id in ordered[: options.max_probed_threads]:
        if sampled_place.get(gdb_id) in went_through:
            # A loop stepped already goes through where this group's counters were: the
            # same loop (a busy machine left two rounds of 64 threads one moment each, the
            # bridge's threads split by where that moment fell), not a second one to step.
            continue
        session.take_notifications()
        # Each step is followed by reading $sp: which functions run at the outermost stack
        # level tells calls (deeper) from tail calls (the same level).
        steps = [
            command
            for _ in range(options.step_probe)
            for command in (
                f"-exec-step-instruction --thread {gdb_id}",
                f"-data-evaluate-expression --thread {gdb_id} --frame 0 $sp",
            )
        ]
        results = session.commands(steps, timeout=options.step_timeout)
        if any(not result.ok for result in results):
            continue
        stops = [
            (record.get("payload") or {}).get("frame") or {}
            for record in session.take_notifications()
            if record.get("message") == "stopped"
        ]
        pointers = [_int_value(result) for result in results[1::2]]
        names = [
            strip_signature(frame["func"]) if frame.get("func") not in (None, "??") else "??"
            for frame in stops
        ]
        if len(names) != len(pointers):
            continue
        collapsed = tuple(name for i, name in enumerate(names) if i == 0 or names[i - 1] != name)
        known = [pointer for pointer in pointers if pointer is not None]
        outermost = max(known) if known else None
        at_top = [
            (name, frame.get("addr"))
            for name, frame, pointer in zip(names, stops, pointers, strict=True)
            if pointer == outermost
        ]
        trails[gdb_id] = (collapsed, _one_name_per_function(session, at_top, options))
        if _trail_repeats(collapsed):
            went_through.update(collapsed)
    session.command(
        "-gdb-set scheduler-locking replay", timeout=options.command_timeout, check=False
    )
    return trails
