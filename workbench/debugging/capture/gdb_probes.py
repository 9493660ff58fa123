"""What gdb is asked beyond the stacks: waits, depths, program-counter groups, the bridge."""

from __future__ import annotations

import os
import re
from typing import Any

from workbench.debugging.capture import proc_threads
from workbench.debugging.capture.mappings import library_of
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.capture.pc_sampling import RegisterRead
from workbench.debugging.cpp_names import strip_signature
from workbench.debugging.gdb.gdb_session import GdbSession, MiResult, mi_quote
from workbench.debugging.model import (
    Frame,
    PcHit,
    WaitInfo,
)

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


def thread_tid(thread: dict[str, Any], pid: int) -> int:
    found = _LWP.search(str(thread.get("target-id", "")))
    if found:
        return int(found.group(1) or found.group(2))
    return pid


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


class WaitProbe:
    """For threads in a futex wait: which futex, its owner (mutex) or joined thread, its name.

    The futex syscall's first argument is the address waited on: for a mutex that is the
    pthread_mutex_t itself (whose `__owner` field, at offset 8, is the holder's TID); for a
    join it is the joined thread's TID word. This works without libc debug info.

    Two round trips, each sent beside other probes' commands: `registers()` (the syscall's
    number and arguments), then `reads(answers)` (the futex words and their symbols), then
    `infos(answers)`.
    """

    def __init__(self, raw: list[tuple[dict[str, Any], list[Frame], bool]]) -> None:
        kinds = {int(thread["id"]): wait_kind(frames) for thread, frames, _ in raw}
        self._infos = {gdb_id: WaitInfo(kind=kind) for gdb_id, kind in kinds.items() if kind}
        # Only waits with an owner to find are probed: a condition variable or semaphore has
        # no holder to name, and probing every idle worker of a thread pool would be slow.
        self._waiting = [gdb_id for gdb_id, kind in kinds.items() if kind in OWNED_WAITS]
        self._registers = SYSCALL_REGISTERS.get(os.uname().machine)
        self._addresses: dict[int, int] = {}

    def registers(self) -> list[str]:
        if self._registers is None:
            return []
        nr_register, arg0, arg1, _ = self._registers
        return [
            f"-data-evaluate-expression --thread {gdb_id} --frame 0 {register}"
            for gdb_id in self._waiting
            for register in (nr_register, arg0, arg1)
        ]

    def reads(self, answers: list[MiResult]) -> list[str]:
        if self._registers is None or not answers:
            return []
        futex_nr = self._registers[3]
        values = [_int_value(result) for result in answers]
        for position, gdb_id in enumerate(self._waiting):
            number, address, operation = values[position * 3 : position * 3 + 3]
            if (
                number == futex_nr
                and address
                and operation is not None
                and operation & 0x7F in FUTEX_WAIT_OPS
            ):
                self._addresses[gdb_id] = address
        reads = []
        for gdb_id, address in self._addresses.items():
            size = 12 if self._infos[gdb_id].kind == "mutex" else 4
            reads.append(f"-data-read-memory-bytes 0x{address:x} {size}")
            reads.append(f'-interpreter-exec console "info symbol 0x{address:x}"')
        return reads

    def infos(self, answers: list[MiResult]) -> dict[int, WaitInfo]:
        infos = dict(self._infos)
        for position, (gdb_id, address) in enumerate(self._addresses.items()):
            memory, symbol = answers[position * 2], answers[position * 2 + 1]
            words = _words(memory)
            kind = infos[gdb_id].kind
            owner = None
            if kind == "mutex" and len(words) >= 3 and words[2] > 0:
                owner = words[2]
            elif kind == "join" and words and words[0] > 0:
                owner = words[0]
            infos[gdb_id] = WaitInfo(
                kind=kind, address=address, owner_tid=owner, symbol=_symbol(symbol)
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


def deep_threads(raw: list[tuple[dict[str, Any], list[Frame], bool]]) -> list[int]:
    """The threads whose stacks were too deep to read in full (their depth is probed)."""
    return [int(thread["id"]) for thread, _, truncated in raw if truncated]


def depth_commands(deep: list[int]) -> list[str]:
    return [f"-data-evaluate-expression --thread {gdb_id} --frame 0 $sp" for gdb_id in deep]


def stack_depths(
    pid: int, deep: list[int], answers: list[MiResult], options: CaptureOptions
) -> dict[int, int]:
    """Stack bytes in use for the threads whose stacks were too deep to read in full."""
    depths = {}
    for gdb_id, result in zip(deep, answers, strict=True):
        pointer = _int_value(result)
        used = proc_threads.stack_bytes_used(pid, pointer, options.proc) if pointer else None
        if used is not None:
            depths[gdb_id] = used
    return depths


def symbol_addresses(pcs: dict[int, list[RegisterRead]], options: CaptureOptions) -> list[int]:
    """The sampled program counters to name, the most frequent first (a loop's few addresses
    are always named)."""
    counts: dict[int, int] = {}
    for reads in pcs.values():
        for read in reads:
            counts[read.pc] = counts.get(read.pc, 0) + 1
    return sorted(counts, key=lambda address: -counts[address])[: options.max_symbolised]


def symbol_commands(addresses: list[int]) -> list[str]:
    return [f'-interpreter-exec console "info symbol 0x{address:x}"' for address in addresses]


def symbolised(
    pcs: dict[int, list[RegisterRead]],
    mappings: list[tuple[int, int, str]],
    addresses: list[int],
    answers: list[MiResult],
) -> dict[int, tuple[PcHit, ...]]:
    """The sampled program counters, named by gdb's `info symbol` answers."""
    names: dict[int, str | None] = {}
    for address, answer in zip(addresses, answers, strict=True):
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
                library_of(read.pc, mappings),
                state=read.state,
                at=read.at - first,
                ran_ns=read.ran_ns,
                timeslices=read.timeslices,
                timeslices_asked=read.timeslices_asked,
                faults=read.faults,
                in_syscall=read.in_syscall,
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


def pc_groups(pc_samples: dict[int, tuple[PcHit, ...]]) -> dict[int, tuple[str, ...]]:
    """Running threads by the code they run in; a group whose program counters already show
    two or more functions jumping to each other (at the same, outermost stack level, the
    stack depth steady) needs no stepping, and is marked SETTLED. Threads whose counters show
    the provider bridge's stub calling Provider_GetHost are one group (BRIDGED): one of them
    is stepped for all. Stepping costs most where threads are many: 40 steps of a thread under
    cuda-gdb take most of a second."""
    from workbench.debugging.diagnosis.evidence import pc_evidence, sampled_stub_callers

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


def bridge_stubs(
    pc_samples: dict[int, tuple[PcHit, ...]], groups: dict[int, tuple[str, ...]]
) -> set[str]:
    """The bridge stubs the BRIDGED threads' program counters showed calling Provider_GetHost."""
    from workbench.debugging.diagnosis.evidence import pc_evidence, sampled_stub_callers

    stubs: set[str] = set()
    for tid, key in groups.items():
        if key == BRIDGED and tid in pc_samples:
            stubs |= sampled_stub_callers(pc_evidence(pc_samples[tid]))
    return stubs


def stack_stub_callers(
    raw: list[tuple[dict[str, Any], list[Frame], bool]],
    states: dict[int, tuple[str, str | None]],
    pid: int,
) -> set[str]:
    """The bridge stubs running threads' stacks show calling Provider_GetHost: a thread
    stopped in Provider_GetHost (its top frame), the frame beneath it the stub.

    The program counters show the stub's call only where one thread was read in both in
    one run of the loop; on a busy machine two rounds of 64 threads are often one moment
    read twice (each thread in one place both times), and none does. gdb's stack of a
    thread stopped in Provider_GetHost shows the same call, at no extra cost.
    """
    from workbench.debugging.bridge import bridge_names

    stubs: set[str] = set()
    for thread, frames, _ in raw:
        if states.get(thread_tid(thread, pid), ("?", None))[0] != "R" or len(frames) < 2:
            continue
        top, caller = frames[0].function or "", frames[1].function or ""
        if bridge_names.is_get_host(top) and caller and not bridge_names.is_get_host(caller):
            stubs.add(caller)
    return stubs


def _host_method_of(stub: str) -> str:
    """`ns::DataTypeImpl::GetType<float>` -> `ns::ProviderHostImpl::DataTypeImpl__GetType_float`:
    the host method ORT's bridge forwards to the stub's real definition."""
    from workbench.debugging.bridge import bridge_names
    from workbench.debugging.cpp_names import split_scope

    namespace = split_scope(stub)[:-2]
    return "::".join([*namespace, bridge_names.host_method_for(stub)])


# `jmp    0x1340 <ns::DataTypeImpl::GetType<float>()>`: the target's name holds `<>` too.
_BRANCH = re.compile(r"\b(jmp|call)q?\s+(0x[0-9a-fA-F]+)\s+<(.+)>\s*$")


def bridge_commands(stubs: set[str]) -> tuple[list[str], list[str]]:
    """The provider bridge's other side, read from the binary instead of single-stepping.

    The program counters catch the stub calling Provider_GetHost but never the host method,
    at -O2 a single jump back to the stub; stepping one thread walked the loop to see it
    (80 commands: half a second among 64 threads under cuda-gdb). Here gdb disassembles the
    host method ORT's naming gives the stub (`x/4i`), and the loop's other side is confirmed
    (bridge_code) when its first jump or call goes to the stub. Stubs it cannot confirm are
    left out (the thread is stepped as before). Returns the stubs asked about and the
    commands (none without stubs).
    """
    wanted = sorted(stubs)[:4]
    if not wanted:
        return [], []
    return wanted, ["-gdb-set print asm-demangle on"] + [
        f"-interpreter-exec console {mi_quote(f'x/4i {chr(39)}{_host_method_of(stub)}{chr(39)}')}"
        for stub in wanted
    ]


def bridge_code(wanted: list[str], answers: list[MiResult]) -> dict[str, dict[str, str]]:
    """The stubs (of bridge_commands') whose host method jumps or calls straight back to them."""
    found: dict[str, dict[str, str]] = {}
    for stub, answer in zip(wanted, answers[1:], strict=True):
        if not answer.ok:
            continue
        for line in "".join(answer.console).splitlines():
            branch = _BRANCH.search(line)
            if branch is None:
                continue
            target = strip_signature(branch.group(3).split("+", 1)[0].strip())
            if target == strip_signature(stub):
                found[stub] = {
                    "host_method": _host_method_of(stub),
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


def _in_loop(name: str | None, loop: set[str]) -> bool:
    """Whether `name` is one of the loop's functions. The loop names Provider_GetHost
    without a namespace, gdb with its own (`onnxruntime::Provider_GetHost`): either is it."""
    from workbench.debugging.bridge import bridge_names

    name = strip_signature(name or "")
    return name in loop or (
        bridge_names.is_get_host(name) and any(bridge_names.is_get_host(known) for known in loop)
    )


def step_plan(
    raw: list[tuple[dict[str, Any], list[Frame], bool]],
    states: dict[int, tuple[str, str | None]],
    options: CaptureOptions,
    groups: dict[int, tuple[str, ...]] | None = None,
    skip_bridged: bool = False,
    confirmed: set[str] | None = None,
) -> list[tuple[int, str | None]]:
    """The running threads to single-step (probe_steps), each with where its group's program
    counters were most (None where they were not sampled); empty: nothing to step, and the
    detach goes with the last probes' round trip.

    Only threads that were running user code (not blocked, not in a system library) are
    stepped, one per group of threads running the same code, none in a loop the binary
    confirmed (`confirmed`: its functions).
    """
    if options.step_probe <= 0:
        return []
    candidates = []
    for thread, frames, truncated in raw:
        tid = thread_tid(thread, 0)
        if states.get(tid, ("?", None))[0] != "R" or truncated or not frames:
            continue
        if wait_kind(frames) or len(frames) > 64:
            continue
        library = frames[0].library or ""
        if SYSTEM_LIBRARY.search(library) or "[vdso]" in library:
            continue
        candidates.append((int(thread["id"]), tid, frames[0].function))
    if not candidates:
        return []
    # A thread whose program counters were not sampled (not running at the first look, or
    # the window ended first) but whose stack stops where a bridge thread's does is in the
    # bridge's loop: not a group of its own to step.
    bridge_tops = {
        frames[0].function
        for thread, frames, _ in raw
        if frames and (groups or {}).get(thread_tid(thread, 0)) == BRIDGED
    }
    # One thread per group of threads running the same code first: 64 threads in one loop
    # need one stepped, and a second loop elsewhere must not wait behind them.
    seen_groups: set[tuple[str, ...]] = set()
    first: list[int] = []
    rest: list[int] = []
    sampled_place: dict[int, str] = {}  # thread -> where its group's counters were most
    for gdb_id, tid, top in candidates:
        if (groups or {}).get(tid) == SETTLED:
            continue
        key = (groups or {}).get(tid) or (BRIDGED if top in bridge_tops else (str(tid),))
        if skip_bridged and key == BRIDGED:
            continue  # the bridge's other side was read from the binary: nothing to step
        if confirmed and _in_loop(top, confirmed):
            continue  # stopped in the loop the binary confirmed: its group is that loop
        (rest if key in seen_groups else first).append(gdb_id)
        seen_groups.add(key)
        if tid in (groups or {}) and key not in (SETTLED, BRIDGED):
            sampled_place[gdb_id] = key[0]
    ordered = first if groups else first + rest
    # A group whose counters were in the confirmed loop is that loop, not one to step.
    return [
        (gdb_id, sampled_place.get(gdb_id))
        for gdb_id in ordered[: options.max_probed_threads]
        if not (gdb_id in sampled_place and _in_loop(sampled_place[gdb_id], confirmed or set()))
    ]


def probe_steps(
    session: GdbSession,
    plan: list[tuple[int, str | None]],
    options: CaptureOptions,
    confirmed: set[str] | None = None,
) -> dict[int, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Single-step the planned threads (step_plan) a few dozen instructions each; the
    functions they go through.

    A tail-call loop spends most of its time in one or two instructions of one function, so
    samples alone may never catch the others; stepping walks the whole loop. The other
    threads are held (scheduler-locking), and all steps of a thread go in one batch.
    """
    if not plan:
        return {}
    session.command("-gdb-set scheduler-locking on", timeout=options.command_timeout, check=False)
    trails: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    # Loops known already (stepped, or confirmed from the binary): a group whose counters
    # were there is that loop, not a second one to step.
    went_through: set[str] = set(confirmed or ())
    for gdb_id, place in plan:
        if place is not None and _in_loop(place, went_through):
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
