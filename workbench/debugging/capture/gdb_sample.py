"""One gdb sample: attach, read every thread's stack in two batched round trips, detach."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from workbench.debugging.capture import proc_threads
from workbench.debugging.capture.gdb_probes import (
    BRIDGED,
    WaitProbe,
    bridge_code,
    bridge_commands,
    bridge_stubs,
    deep_threads,
    depth_commands,
    pc_groups,
    probe_steps,
    stack_depths,
    stack_stub_callers,
    step_plan,
    symbol_addresses,
    symbol_commands,
    symbolised,
    thread_tid,
)
from workbench.debugging.capture.libraries import library_debug_directories, load_relative_libraries
from workbench.debugging.capture.mappings import executable_mappings, library_of
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.capture.pc_sampling import RegisterRead
from workbench.debugging.cpp_names import strip_signature
from workbench.debugging.debug_errors import (
    DebugError,
    GdbDiedError,
    GdbTimeoutError,
    MiError,
    ProcessExitedError,
    ProcessGoneError,
    PtraceDeniedError,
)
from workbench.debugging.gdb.gdb_session import GdbSession, MiResult
from workbench.debugging.gdb.ptrace import explain_attach_failure
from workbench.debugging.model import (
    Capture,
    Frame,
    Sample,
    ThreadStack,
)


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
        libraries = executable_mappings(pid, options.proc)
        more = library_debug_directories(pcs, libraries, given_dirs)
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
        libraries = executable_mappings(pid, options.proc)
    import workbench.debugging.diagnosis.verdict  # noqa: F401 (for gdb_probes.pc_groups, the caller)

    if directories:
        session.collect(directories, timeout=limit)
    attach, thread_info = session.collect(attaching, timeout=limit)
    if not attach.ok:
        _raise_attach_error(pid, attach.error, options.proc)
    try:
        load_relative_libraries(session, libraries, _left(deadline))
        if not thread_info.ok:
            raise MiError("-thread-info", thread_info.error)
        threads = thread_info.payload.get("threads", [])
        # Three round trips after the attach, each one write of every command that can go:
        # the stacks and the sampled program counters' names; the waits' registers, the deep
        # stacks' depths and the bridge's host method; the waits' futex words and the detach
        # (after them, unless a thread is to be stepped first).
        naming = symbol_addresses(pcs, options) if pcs and result is not None else []
        stacks, names = _round_trip(
            session,
            [
                [
                    f"-stack-list-frames --thread {thread['id']} 0 {options.max_frames}"
                    for thread in threads
                ],
                symbol_commands(naming),
            ],
            timeout=_left(deadline),
        )
        raw: list[tuple[dict[str, Any], list[Frame], bool]] = []
        for thread, stack in zip(threads, stacks, strict=True):
            if not stack.ok:
                if not proc_threads.exists(pid, options.proc):
                    raise ProcessGoneError(f"process {pid} exited: {stack.error}")
                frames: list[Frame] = []
            else:
                frames = [_frame(item, libraries) for item in stack.payload.get("stack", [])]
            truncated = len(frames) > options.max_frames
            raw.append((thread, frames[: options.max_frames], truncated))
        if pcs and result is not None:
            result.pc_samples = symbolised(pcs, libraries, naming, names)
        groups = pc_groups(result.pc_samples) if result is not None else {}
        # The stub's call to Provider_GetHost, seen in the counters or in a stack: the
        # host method is read from the binary instead of stepping a thread round the loop.
        stubs = stack_stub_callers(raw, states, pid) if result is not None else set()
        if result is not None and BRIDGED in groups.values():
            stubs |= bridge_stubs(result.pc_samples, groups)
        waiting = WaitProbe(raw)
        deep = deep_threads(raw)
        asked, bridge_asks = bridge_commands(stubs)
        registers, pointers, disassembly = _round_trip(
            session,
            [waiting.registers(), depth_commands(deep), bridge_asks],
            timeout=options.command_timeout,
        )
        depths = stack_depths(pid, deep, pointers, options)
        read_bridge = False
        if result is not None and asked:
            code = bridge_code(asked, disassembly)
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
        plan = step_plan(
            raw, states, options, groups, skip_bridged=read_bridge, confirmed=confirmed
        )
        futexes, detached = _round_trip(
            session,
            [waiting.reads(registers), [] if plan else ["-target-detach"]],
            timeout=options.command_timeout,
        )
        waits = waiting.infos(futexes)
        stalled = False
        trails: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        if plan:
            try:
                trails = probe_steps(session, plan, options, confirmed=confirmed)
            except GdbTimeoutError:
                # A stepped thread entered a blocking call: gdb waits for it and takes no
                # commands, so this gdb must go (the caller ends it and restores the process).
                stalled = True
            if not stalled:
                detached = [
                    session.command("-target-detach", timeout=options.command_timeout, check=False)
                ]
        if detached and not detached[0].ok and proc_threads.exists(pid, options.proc):
            raise MiError("-target-detach", detached[0].error)
    except (MiError, GdbDiedError) as exc:
        if not proc_threads.exists(pid, options.proc):
            raise ProcessGoneError(f"process {pid} exited: {exc}") from None
        raise
    thread_stacks = []
    for thread, frames, truncated in raw:
        tid = thread_tid(thread, pid)
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


def _round_trip(
    session: GdbSession, batches: list[list[str]], timeout: float
) -> list[list[MiResult]]:
    """Every batch's commands written to gdb at once, and read back per batch: one round
    trip for all (none where there are no commands)."""
    flat = [command for batch in batches for command in batch]
    answers = session.commands(flat, timeout=timeout) if flat else []
    split = []
    for batch in batches:
        split.append(answers[: len(batch)])
        answers = answers[len(batch) :]
    return split


def _left(deadline: float) -> float:
    return max(0.001, deadline - time.monotonic())


def _raise_attach_error(pid: int, message: str, proc: Path) -> None:
    # /proc first: a process that exits while gdb attaches makes the kernel refuse the
    # attach too ("Operation not permitted" on an exiting task), which is not a ptrace rule.
    after = proc_threads.read_stat(pid, proc=proc)
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
        library=item.get("from") or library_of(address, mappings),
    )
