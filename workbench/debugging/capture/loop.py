"""The capture loop: /proc watched between gdb samples, the process left as it was found."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from workbench.debugging.capture import proc_threads
from workbench.debugging.capture.activity_tracker import ActivityTracker
from workbench.debugging.capture.debug_directories import passable
from workbench.debugging.capture.gdb_sample import SteppingStalled, take_sample
from workbench.debugging.capture.libraries import libraries_in_use, symbols_json, with_libraries
from workbench.debugging.capture.options import (
    FEW_THREADS_PC_ROUNDS,
    IDLE_LOOK_S,
    MIN_PC_ROUNDS,
    MIN_PC_ROUNDS_MANY,
    MIN_WATCH_S,
    PC_SAMPLE_BUDGET,
    CaptureOptions,
    Progress,
)
from workbench.debugging.capture.pc_sampling import PcSampler, PcSamples
from workbench.debugging.capture.symbols import (
    check_libraries,
    check_symbols,
)
from workbench.debugging.debug_errors import (
    AlreadyTracedError,
    DebugError,
    GdbTimeoutError,
    ProcessExitedError,
    ProcessGoneError,
    PtraceDeniedError,
    ZombieError,
)
from workbench.debugging.gdb.gdb_session import GdbSession, find_gdb, mi_quote
from workbench.debugging.gdb.ptrace import check_ptrace
from workbench.debugging.model import (
    Capture,
)


def preflight(pid: int, proc: Path = proc_threads.PROC) -> proc_threads.Stat:
    """Refuse, with the reason, a process that cannot be captured: gone, zombie, traced."""
    stat = proc_threads.read_stat(pid, proc=proc)
    if stat is None:
        raise ProcessGoneError(f"no process {pid} (it has exited, or the PID is wrong)")
    if stat.state in ("Z", "X"):
        parent = proc_threads.read_stat(stat.ppid, proc=proc)
        parent_text = f"{stat.ppid} ({parent.comm})" if parent else str(stat.ppid)
        raise ZombieError(
            f"process {pid} ({stat.comm}) is a zombie: it has exited, and its parent, process "
            f"{parent_text}, has not collected its exit status (wait), so no threads or memory "
            f"are left to debug. If the parent is what hangs, run `workbench bt {stat.ppid}`; "
            "ending the parent clears the zombie"
        )
    tracer = proc_threads.read_status(pid, proc).get("TracerPid", "0")
    if tracer.isdigit() and int(tracer) != 0:
        tracer_stat = proc_threads.read_stat(int(tracer), proc=proc)
        name = f" ({tracer_stat.comm})" if tracer_stat else ""
        raise AlreadyTracedError(
            f"process {pid} is already traced by process {tracer}{name}: only one debugger "
            "may attach; detach that one (quit gdb/strace) and try again"
        )
    access = check_ptrace(pid, proc=proc)
    if access.verdict == "denied":
        raise PtraceDeniedError(access.message(pid))
    return stat


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
    executable = proc_threads.executable(pid, proc)
    symbols = check_symbols(executable, options.debug_dirs)
    result = Capture(
        pid=pid,
        command=proc_threads.command_line(pid, proc),
        executable=executable,
        requested_samples=options.samples,
        interval=options.interval,
        gdb=gdb,
        symbols_only=options.symbols_only,
        symbols=symbols_json(symbols),
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
    # The first look's (session is replaced only after it).
    first_answered = partial(session.answered, loading)
    first_wait = partial(session.wait_answered, loading)
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
                    first_answered,
                    first_wait,
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
    libraries = check_libraries(libraries_in_use(result), executable, options.debug_dirs)
    if libraries:
        result.symbols = with_libraries(result.symbols, libraries)
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
        stat = proc_threads.read_stat(pid)
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
