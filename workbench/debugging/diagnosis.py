"""From samples to a verdict: call cycles, static-initialisation hangs, lock cycles, progress.

Pure functions over a Capture (no gdb, no /proc), so recorded samples can be diagnosed again
and tested. Each finding names the functions and threads involved and lists its evidence;
`diagnose` orders them, most telling first:

- call-cycle: a repeating run of frames in one stack that is deeper than was read or keeps
  growing (unbounded recursion, what -O0 makes of the provider bridge), or a thread that is
  always running while its stack, below a few changing top frames, stays the same and the top
  moves among the same few functions (a tail-call loop, what -O2 makes of it). A
  `ProviderHostImpl::X__Y` ↔ `X::Y` pair is named in the bridge's terms.
- static-init: a thread stuck inside static initialisation (`_GLOBAL__sub_I_*`,
  `__static_initialization_and_destruction*`, `_dl_init`, `call_init`), usually before main.
- deadlock: a cycle in the wait-for graph built from mutex owners (`__owner`), joined
  threads and function-local static guards (`__cxa_guard_acquire`).
- lock-wait, spin, busy, waiting: weaker or reassuring findings; a program whose stacks
  change between samples is busy, not hung.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass

from workbench.debugging import bridge_names
from workbench.debugging.bridge_patch import propose
from workbench.debugging.model import (
    BridgePair,
    Capture,
    Diagnosis,
    Finding,
    Frame,
    PcHit,
    ThreadActivity,
    ThreadStack,
)
from workbench.debugging.names import display_name
from workbench.host.units import scaled_byte_size

MIN_RECURSION_REPEATS = 8
MAX_CYCLE_PERIOD = 12
MAX_CYCLE_START = 16
MAX_LOOP_TOP = 4  # frames above an unchanging base in a tail-call loop
MAX_LOOP_FUNCTIONS = 8
# Program-counter samples of a thread that moves: many distinct addresses, or a stack depth
# that swings by more than this many bytes (recursion, calls in and out of deep helpers).
BUSY_DISTINCT_ADDRESSES = 48
BUSY_STACK_SPREAD = 4096
LOOP_STACK_SPREAD = 2048
# A spin is judged from program counters alone only when the thread was caught this often,
# and more than half of those reads fell on addresses it was caught at more than once.
MIN_STILL_HITS = 4
# CPU time a thread must have run between two reads for them to be two moments: each stop
# and continue costs it a few microseconds of kernel time without running a user
# instruction (2–20 µs measured here), while a thread scheduled between rounds runs 0.5 ms
# and more.
MIN_RAN_BETWEEN_NS = 100_000


@dataclass(frozen=True)
class PcEvidence:
    """What one thread's program-counter samples show.

    places: how often each function (or `?? in LIB` where there are no symbols) was hit;
    top_level: the places hit at the outermost stack pointer seen (functions that jump to
    each other run there, callees run deeper); spread: outermost minus innermost stack
    pointer; unnamed: hits in code without symbols outside the system libraries.
    """

    hits: int
    places: Counter[str]
    samples: tuple[PcHit, ...]
    addresses: int
    top_level: frozenset[str]
    spread: int
    unnamed: tuple[PcHit, ...]

    @property
    def span(self) -> float:
        """Seconds between the first and the last read (0 where times were not recorded)."""
        times = [hit.at for hit in self.samples if hit.at is not None]
        return max(times) - min(times) if times else 0.0

    def ran_between(self) -> list[PcHit]:
        """The reads with registers taken after the thread had run since its read before: two
        reads with no CPU time between them (beyond the stop's own few microseconds) are one
        moment read twice, as a busy machine may not schedule a thread between rounds. The
        first read counts."""
        kept: list[PcHit] = []
        before: int | None = None
        for hit in self.samples:
            if hit.state is None or hit.ran_ns is None:
                continue
            if before is None or hit.ran_ns - before >= MIN_RAN_BETWEEN_NS:
                kept.append(hit)
            before = hit.ran_ns
        return kept

    @property
    def cpu_ns(self) -> int:
        """CPU time the thread ran from its first read to its last (0 if not known)."""
        times = [hit.ran_ns for hit in self.samples if hit.ran_ns is not None]
        return max(times) - min(times) if times else 0

    @property
    def revisits(self) -> tuple[int, int, int]:
        """(reads at addresses caught more than once, how many of those addresses showed
        different registers on different reads, how many addresses were caught more than once)."""
        states: dict[int, list[int]] = {}
        for hit in self.ran_between():
            assert hit.state is not None
            states.setdefault(hit.address, []).append(hit.state)
        repeated = {address: seen for address, seen in states.items() if len(seen) >= 2}
        reads = sum(len(seen) for seen in repeated.values())
        changed = sum(1 for seen in repeated.values() if len(set(seen)) > 1)
        return reads, changed, len(repeated)

    @property
    def still(self) -> bool | None:
        """Whether the thread stood still in a tight loop: True when most reads fell on
        addresses caught more than once and, at each, every register was the same every time
        (nothing a register holds changed: no counter, no pointer moving on); False when the
        registers at one address differed (it computes); None when the reads cannot say."""
        if self.moving or self.unnamed or self.spread > LOOP_STACK_SPREAD:
            return None
        reads, changed, _addresses = self.revisits
        if changed:
            return False
        independent = len(self.ran_between())
        if independent < MIN_STILL_HITS or reads * 2 <= independent:
            return None
        return True

    @property
    def moving(self) -> bool:
        """The thread goes through much code or in and out of calls: it makes progress."""
        return (
            len(self.places) > MAX_LOOP_FUNCTIONS
            or self.addresses > BUSY_DISTINCT_ADDRESSES
            or self.spread > BUSY_STACK_SPREAD
        )


def pc_evidence(hits: tuple[PcHit, ...]) -> PcEvidence | None:
    """Summarise a thread's program-counter samples (None when there are none)."""
    if not hits:
        return None
    outermost = max(hit.sp for hit in hits)
    innermost = min(hit.sp for hit in hits)
    unnamed = tuple(
        hit
        for hit in hits
        if hit.function is None and not (hit.library and SYSTEM_LIBRARY.search(hit.library))
    )
    return PcEvidence(
        hits=len(hits),
        places=Counter(hit.place() for hit in hits),
        samples=hits,
        addresses=len({hit.address for hit in hits}),
        top_level=frozenset(hit.place() for hit in hits if hit.sp == outermost),
        spread=outermost - innermost,
        unnamed=unnamed,
    )


STATIC_INIT = re.compile(r"^(_GLOBAL__sub_I|__static_initialization_and_destruction)")
LOADER_INIT = {"_dl_init", "call_init", "__libc_csu_init", "_dl_start_user", "_init"}
SYSTEM_LIBRARY = re.compile(
    r"/(libc|libpthread|libstdc\+\+|libgcc_s|libm|ld-linux[^/]*|ld64)[.-][^/]*$|/ld-[^/]*$"
)
DEADLOCK_PREFIX = "lock-order deadlock: "
RANK = {
    "call-cycle": 0,
    "deadlock": 1,
    "livelock": 1,
    "static-init": 1,
    "no-symbols": 2,
    "stopped": 2,
    "lock-wait": 3,
    "exited": 4,
    "busy": 5,
    "spin": 6,
    "waiting": 7,
    "asleep": 7,
    "unknown": 8,
}


@dataclass(frozen=True)
class Cycle:
    """A repeating run in one stack: `functions` innermost first, `repeats` times."""

    start: int
    period: int
    repeats: int
    functions: tuple[str, ...]

    def call_order(self) -> list[str]:
        """Caller first: the order in which the cycle's functions call each other."""
        return list(reversed(self.functions))


def find_cycle(functions: list[str], min_repeats: int = MIN_RECURSION_REPEATS) -> Cycle | None:
    """The repeating run of frames covering most of the stack, shortest period on ties."""
    best: Cycle | None = None
    best_cover = 0
    count = len(functions)
    for start in range(min(MAX_CYCLE_START, count)):
        for period in range(1, MAX_CYCLE_PERIOD + 1):
            if start + 2 * period > count:
                break
            matched = 0
            while (
                start + matched + period < count
                and functions[start + matched] == functions[start + matched + period]
            ):
                matched += 1
            repeats = matched // period + 1
            cover = matched + period
            if repeats >= min_repeats and cover > best_cover:
                block = tuple(functions[start : start + period])
                if all(name == "??" for name in block):
                    continue
                best = Cycle(start=start, period=period, repeats=repeats, functions=block)
                best_cover = cover
        if best is not None:
            break  # the earliest start is the innermost loop; deeper starts only repeat it
    return best


def diagnose(capture: Capture) -> Diagnosis:
    """Every finding the samples support, the most telling first."""
    if not capture.samples:
        return Diagnosis(
            findings=[
                Finding(
                    kind="exited",
                    summary=f"process {capture.pid} exited before any sample was taken",
                    hung=False,
                    evidence=list(capture.notes),
                )
            ]
        )
    histories = _histories(capture)
    findings: list[Finding] = []
    explained: set[int] = set()
    pcs = {
        tid: evidence
        for tid, hits in capture.pc_samples.items()
        if (evidence := pc_evidence(hits)) is not None
    }

    for tid, history in histories.items():
        activity = capture.activity.get(tid)
        # A thread whose output advances is not caught in a tail-call loop, whatever the
        # same few functions on top say (a prime sieve printing as it goes).
        finding = _recursion(tid, history, activity) or (
            None
            if activity is not None and activity.wrote()
            else _tail_call_loop(
                tid,
                history,
                activity,
                len(capture.samples),
                pcs.get(tid),
                capture.bridge_code,
            )
        )
        if finding:
            findings.append(finding)
            explained.add(tid)
    findings = _merge_by_code(findings, capture, pcs, histories, explained)
    stopped = _stopped(capture, histories)
    if stopped:
        findings.append(stopped)
        explained.update(stopped.threads)
    unnamed = _without_symbols(capture, histories, pcs, explained)
    if unnamed:
        findings.append(unnamed)
        explained.update(unnamed.threads)

    deadlocks = _deadlocks(capture, histories)
    for finding in deadlocks:
        findings.append(finding)
        explained.update(finding.threads)

    for tid, history in histories.items():
        finding = _static_init(tid, history, deadlocks, findings)
        if finding:
            findings.append(finding)
            explained.add(tid)

    livelock = _livelock(capture, histories, pcs, explained)
    if livelock:
        findings.append(livelock)
        explained.update(livelock.threads)
    findings += _lock_waits(capture, histories, explained)
    findings += _activity_findings(capture, histories, explained, pcs)
    if capture.exited:
        findings.append(
            Finding(
                kind="exited",
                summary=f"process {capture.pid} exited during the capture",
                hung=False,
                evidence=list(capture.notes),
            )
        )
    if not findings:
        findings.append(
            Finding(kind="unknown", summary="no pattern found in the samples", hung=None)
        )
    findings.sort(key=_rank)
    if len(capture.samples) == 1 and not pcs:
        findings[0].evidence.append(
            "only one sample: whether threads make progress cannot be judged; take more "
            "(--samples 5)"
        )
    elif len(capture.samples) == 1:
        findings[0].evidence.append(
            f"one stack sample, and {capture.pc_rounds} program-counter samples of each of "
            f"the {len(pcs)} running thread(s) taken before it"
        )
    for note in capture.notes:
        if note not in findings[0].evidence:
            findings[0].evidence.append(note)
    bridge = next((finding.bridge for finding in findings if finding.bridge), None)
    return Diagnosis(findings=findings, proposed_patch=propose(bridge) if bridge else None)


def _rank(finding: Finding) -> tuple[int, bool]:
    """Most telling first; a spin shown to be hung outranks other threads' progress."""
    rank = RANK.get(finding.kind, 9)
    if finding.kind == "spin" and finding.hung is True:
        rank = RANK["lock-wait"]
    return rank, finding.hung is not True


def _histories(capture: Capture) -> dict[int, list[ThreadStack]]:
    histories: dict[int, list[ThreadStack]] = {}
    for sample in capture.samples:
        for thread in sample.threads:
            histories.setdefault(thread.tid, []).append(thread)
    return histories


def describe(thread: ThreadStack) -> str:
    name = f' "{thread.name}"' if thread.name else ""
    return f"thread {thread.gdb_id} (LWP {thread.tid}{name})"


def _user_frame(frames: tuple[Frame, ...] | list[Frame]) -> Frame | None:
    """The innermost frame of the program itself: not libc, libstdc++, the loader or std::."""
    for frame in frames:
        name = frame.function or ""
        if not name or name.startswith(("std::", "__gnu_cxx::", "__")):
            continue
        if frame.library and SYSTEM_LIBRARY.search(frame.library):
            continue
        return frame
    return None


def _where(thread: ThreadStack) -> str:
    frame = _user_frame(thread.frames)
    if frame is None:
        return ""
    return f" in {_short(frame.function or '??')} ({frame.location(full=False)})"


def _static_name(symbol: str | None) -> str | None:
    """gdb's `guard variable for f()::x` → `f()::x`."""
    if symbol and symbol.startswith("guard variable for "):
        return symbol.removeprefix("guard variable for ")
    return symbol


def _stub_callers(history: list[ThreadStack]) -> set[str]:
    """Functions seen calling Provider_GetHost (the provider's bridge stubs): its caller in
    a stack, or the function a stepping trail was in just before it."""
    callers = set()
    for thread in history:
        names = thread.functions()
        for index, name in enumerate(names[:-1]):
            if bridge_names.is_get_host(name):
                callers.add(names[index + 1])
        trail = thread.trail
        for index, name in enumerate(trail[1:], start=1):
            if bridge_names.is_get_host(name) and not bridge_names.is_get_host(trail[index - 1]):
                callers.add(trail[index - 1])
    return callers


def _asleep_deep(
    tid: int, history: list[ThreadStack], activity: ThreadActivity | None, order: list[str]
) -> Finding | None:
    """A deep stack that is the same in every sample, of a thread that slept throughout and
    used no CPU: deep, but neither growing nor running, so not hung (issue 29: a recursion
    20,000 deep that then sleeps was "HUNG, unbounded recursion" at 0% CPU)."""
    if len(history) < 2 or activity is None or not activity.observations:
        return None
    first = history[0]
    steady = all(
        thread.functions() == first.functions() and thread.stack_bytes == first.stack_bytes
        for thread in history
    )
    asleep = all(thread.state in ("S", "D") for thread in history) and (
        activity.running_share <= 0.1 and activity.cpu_seconds <= 0.02 * max(activity.seconds, 0.1)
    )
    if not (steady and asleep):
        return None
    last = history[-1]
    depth = (
        f"more than {len(last.frames)} frames" if last.truncated else f"{len(last.frames)} frames"
    )
    size = f", {_size(last.stack_bytes)} of stack" if last.stack_bytes else ""
    where = last.wchan or (last.frames[0].function if last.frames else None) or "the kernel"
    return Finding(
        kind="asleep",
        summary=(
            f"asleep at depth {depth} in {describe(last)}, in {where}: a deep call chain "
            f"({' → '.join(_short(name) for name in order)} …) that is not growing; not hung"
        ),
        hung=False,
        functions=order,
        threads=[tid],
        evidence=[
            f"the same stack ({depth}{size}) in all {len(history)} samples",
            f"sleeping in every look at it, {activity.cpu_seconds:.2f} s of CPU over "
            f"{activity.seconds:.1f} s observed",
        ],
    )


def _recursion(
    tid: int, history: list[ThreadStack], activity: ThreadActivity | None = None
) -> Finding | None:
    cycles = [find_cycle(thread.functions()) for thread in history]
    if not cycles or any(cycle is None for cycle in cycles):
        return None
    first = cycles[0]
    assert first is not None
    if any(set(cycle.functions) != set(first.functions) for cycle in cycles if cycle):
        return None
    depths = [thread.stack_bytes for thread in history if thread.stack_bytes]
    growing = len(depths) >= 2 and all(b > a for a, b in itertools.pairwise(depths))
    truncated = all(thread.truncated for thread in history)
    if not (truncated or growing):
        return None  # bounded recursion (a tree walk, a sort): nothing wrong with it
    last = history[-1]
    order = first.call_order()
    if not growing:
        asleep = _asleep_deep(tid, history, activity, order)
        if asleep is not None:
            return asleep
    evidence = [
        f"{describe(last)}: {' → '.join(_short(name) for name in order)} repeats "
        f"{first.repeats} times in the frames read"
        + (f" (the stack has more than {len(last.frames)} frames)" if truncated else ""),
    ]
    if len(history) > 1:
        evidence.append(f"the same cycle is on top of the stack in all {len(history)} samples")
    if growing:
        evidence.append(
            f"stack in use grew from {_size(depths[0])} to {_size(depths[-1])} between the "
            "first and last sample: the recursion has no end"
        )
    elif depths:
        evidence.append(f"stack in use: {_size(depths[-1])}")
    bridge = bridge_names.find_pair(order, _stub_callers(history))
    summary = (
        f"unbounded recursion in {describe(last)}: "
        f"{' → '.join(_short(name) for name in order)} → {_short(order[0])} …"
    )
    if bridge:
        via = _host_access({name for thread in history for name in thread.functions()})
        summary = _bridge_summary(bridge, via) + f" ({describe(last)}, unbounded recursion)"
        evidence.append(_bridge_evidence(bridge, via))
    return Finding(
        kind="call-cycle",
        summary=summary,
        hung=True,
        functions=order,
        threads=[tid],
        evidence=evidence,
        pattern="recursion",
        bridge=bridge,
    )


def sampled_stub_callers(pc: PcEvidence | None) -> set[str]:
    """Functions whose program counters sat just above Provider_GetHost's on the stack: its
    caller, a bridge stub (the samples never catch the host method's single jump)."""
    if pc is None:
        return set()
    host_sps = [
        hit.sp for hit in pc.samples if hit.function and bridge_names.is_get_host(hit.function)
    ]
    if not host_sps:
        return set()
    inner = min(host_sps)
    return {
        hit.function
        for hit in pc.samples
        if hit.function
        and not bridge_names.is_get_host(hit.function)
        and inner < hit.sp <= inner + 64
    }


def _common_base(stacks: list[list[str]]) -> int:
    """How many outermost frames all stacks share."""
    shortest = min(len(stack) for stack in stacks)
    count = 0
    while count < shortest and len({stack[len(stack) - 1 - count] for stack in stacks}) == 1:
        count += 1
    return count


def _trail_loop(trail: tuple[str, ...]) -> list[str]:
    """The loop in a stepping trail: the shortest run that repeats, in execution order."""
    names = list(trail)
    for period in range(2, min(MAX_LOOP_FUNCTIONS * 2, len(names) // 2) + 1):
        if all(names[i] == names[i + period] for i in range(len(names) - period)):
            return names[:period]
    return []


def _generic_tail_cycle(
    history: list[ThreadStack],
    stacks: list[list[str]],
    loop: list[str],
    pc: PcEvidence | None = None,
) -> bool:
    """Functions that jump to each other for ever, without the provider bridge's names.

    Needs the stepping trail: a closed loop through two or more functions that ran at the
    same (outermost) stack level, so they did not call each other but jumped; and in every
    sample the stack is some of those functions above the same unchanging base. A loop that
    calls a helper (the helper runs deeper) or a busy sort (the top changes) does not qualify.
    """
    loop_set = set(loop)
    top_level = {name for thread in history for name in thread.trail_top}
    if pc is not None:
        if pc.moving or pc.spread > LOOP_STACK_SPREAD or pc.unnamed:
            return False
        if pc.hits >= MIN_STILL_HITS and len(pc.places) == 1 and not loop_set <= set(pc.places):
            # Every program counter fell in one function (ELF symbols: inlined code has none
            # of its own): the trail's other names are functions inlined into it (an atomic
            # load in a spin loop), a loop inside one function, not calls jumping around.
            return False
        top_level |= set(pc.top_level)
    if len(loop_set) < 2 or len(top_level & loop_set) < 2:
        return False
    bases = set()
    for stack in stacks:
        count = 0
        while count < min(len(stack), MAX_LOOP_TOP) and stack[count] in loop_set:
            count += 1
        if count == 0 or loop_set & set(stack[count:]):
            return False
        bases.add(tuple(stack[count:]))
    return len(bases) == 1


def _rotate_for_bridge(loop: list[str]) -> list[str]:
    """Start the loop at the stub, just before it calls Provider_GetHost, as people read it."""
    for index in range(len(loop)):
        if bridge_names.is_get_host(loop[(index + 1) % len(loop)]):
            return loop[index:] + loop[:index]
    return loop


def _bridge_names_in(names: set[str], stub_callers: set[str], bridge_counterpart: str) -> set[str]:
    return {
        name
        for name in names
        if bridge_names.host_method_parts(name)
        or bridge_names.is_get_host(name)
        or name in stub_callers
        or _short(name) == bridge_counterpart
    }


def _tail_call_loop(
    tid: int,
    history: list[ThreadStack],
    activity: ThreadActivity | None,
    samples: int,
    pc: PcEvidence | None = None,
    bridge_code: dict[str, dict[str, str]] | None = None,
) -> Finding | None:
    """A thread always running, its base unchanged, its top moving among a few functions.

    Evidence comes from the samples (the same frames beneath, the top alternating) and from
    the stepping trail (the functions the thread went through in a few dozen instructions).
    """
    if any(thread.wait or thread.truncated for thread in history):
        return None
    running = activity.always_running() if activity else False
    if not running and not (samples == 1 and history[-1].state == "R"):
        return None
    stacks = [thread.functions() for thread in history]
    base = _common_base(stacks)
    tops = [stack[: len(stack) - base] for stack in stacks]
    trails = [thread.trail for thread in history if thread.trail]
    loop = next((found for trail in trails if (found := _trail_loop(trail))), [])
    stepped = bool(loop)
    sampled: list[str] = []
    if pc is not None and not pc.moving and not pc.unnamed and len(pc.places) >= 2:
        # Where the program counters went: the loop's functions, most visited first.
        sampled = [name for name, _ in pc.places.most_common()]
    if not loop and sampled:
        loop = sampled
    stub_callers = _stub_callers(history) | sampled_stub_callers(pc)
    # The host method read from the binary: it jumps (or calls) to a stub this thread was
    # seen calling Provider_GetHost from, so it is the loop's other side.
    read = {stub: entry for stub, entry in (bridge_code or {}).items() if stub in stub_callers}
    seen = (
        {name for top in tops for name in top}
        | {name for trail in trails for name in trail}
        | set(sampled)
        | {entry["host_method"] for entry in read.values()}
    )
    # A bridge frame that every sample caught sits in the common base, yet is part of the
    # loop: take the base's top frames while they belong to the bridge.
    base_loop: list[str] = []
    for name in stacks[0][len(stacks[0]) - base :]:
        if not _bridge_names_in({name}, stub_callers, ""):
            break
        base_loop.append(name)
    bridge = bridge_names.find_pair(sorted(seen | set(base_loop)), stub_callers)
    if bridge:
        # Every frame above the base must belong to the bridge.
        allowed = _bridge_names_in(seen | set(base_loop), stub_callers, bridge.counterpart)
        if not all(set(top) <= allowed for top in tops) or not set(loop) <= allowed:
            bridge = None
    if bridge is None:
        base_loop = []
    if bridge and loop:
        loop = _rotate_for_bridge(loop)
    if bridge is None and not _generic_tail_cycle(history, stacks, loop, pc):
        return None
    last = history[-1]
    if loop:
        functions = list(dict.fromkeys(loop))
    else:
        functions = sorted(set(base_loop) | {name for top in tops for name in top})
    top_names = Counter(_short(stack[0]) for stack in stacks if stack)
    beneath = [name for name in stacks[0][len(stacks[0]) - base :] if name not in base_loop]
    evidence = [
        f"{describe(last)} is always running"
        + (f" ({_activity_text(activity)})" if activity else ""),
        f"top of the stack in {len(history)} sample(s): "
        + ", ".join(f"{name} ×{count}" for name, count in top_names.most_common()),
    ]
    if len(history) >= 2:
        low, high = min(len(s) for s in stacks), max(len(s) for s in stacks)
        evidence.append(
            f"the {len(beneath)} frame(s) beneath ({' ← '.join(_short(n) for n in beneath[:4])}) "
            f"are the same in every sample; stack depth stays at "
            f"{low if low == high else f'{low}–{high}'}: the calls do not return, they jump "
            "to each other (tail calls)"
        )
    if loop and stepped:
        evidence.append(
            "single-stepping the thread went round "
            + " → ".join(_short(name) for name in [*loop, loop[0]])
            + " again and again"
        )
    if pc is not None and sampled:
        evidence.append(
            f"its program counter, sampled {pc.hits} times, was only ever in "
            + ", ".join(f"{_short(name)} ×{count}" for name, count in pc.places.most_common())
            + f"; the stack pointer moved by {pc.spread} bytes at most"
        )
    if bridge:
        via = _host_access(seen | set(base_loop))
        summary = (
            _bridge_summary(bridge, via) + f" ({describe(last)}, a tail-call loop at 100% CPU)"
        )
        evidence.append(_bridge_evidence(bridge, via))
        evidence += [
            f"{_short(entry['host_method'])} is `{entry['instruction']}` in the binary (read "
            f"with gdb, not stepped): it goes straight back to {_short(stub)}"
            for stub, entry in sorted(read.items())
        ]
        if not any(bridge_names.host_method_parts(name) for name in functions):
            # Its full name where the binary gave it, else the bridge's short one.
            hosts = [entry["host_method"] for _, entry in sorted(read.items())]
            functions.append(hosts[0] if hosts else bridge.host_method)
    else:
        summary = (
            f"{describe(last)} spins through {', '.join(_short(name) for name in functions)} "
            "without returning: a call cycle made of tail calls"
        )
    return Finding(
        kind="call-cycle",
        summary=summary,
        # A bridge loop in a thread that is always running, whose program counters never
        # left the bridge's functions, is hung even when one sample caught one function.
        hung=True
        if len(history) >= 2 or loop or sampled or (bridge and pc is not None and not pc.moving)
        else None,
        functions=functions,
        threads=[tid],
        evidence=evidence,
        pattern="tail-calls",
        bridge=bridge,
    )


def _merge_by_code(
    findings: list[Finding],
    capture: Capture,
    pcs: dict[int, PcEvidence],
    histories: dict[int, list[ThreadStack]],
    explained: set[int],
) -> list[Finding]:
    """One call-cycle finding per loop, naming every thread caught in it.

    Threads whose cycles have the same functions are one finding. A thread with no finding
    of its own whose program counters hit only that loop's functions, and whose stack is the
    same shape, is in it too: a thread pool spinning in one loop gets one verdict for all.
    """
    merged: list[Finding] = []
    by_loop: dict[object, Finding] = {}
    names: dict[object, set[str]] = {}
    for finding in findings:
        if finding.kind != "call-cycle":
            merged.append(finding)
            continue
        # One loop, however each thread's evidence spelled it: the bridge pair, else the
        # functions by their short names.
        loop_id: object = (
            finding.bridge.host_method
            if finding.bridge
            else frozenset(_short(name) for name in finding.functions)
        )
        names.setdefault(loop_id, set()).update(finding.functions)
        for tid in finding.threads:
            if tid in pcs:
                names[loop_id].update(pcs[tid].places)
        if loop_id in by_loop:
            by_loop[loop_id].threads += finding.threads
            if finding.hung:  # one thread's proof of the loop holds for the loop
                by_loop[loop_id].hung = True
        else:
            by_loop[loop_id] = finding
            merged.append(finding)
    for loop_id, finding in by_loop.items():
        # Short names: gdb's frames and the loop's evidence spell namespaces differently.
        key = frozenset(_short(name) for name in names[loop_id])
        members = set(finding.threads)
        shapes = {_shape(histories[tid][-1], key) for tid in members if tid in histories}
        for tid, evidence in pcs.items():
            if tid in explained or tid not in histories or evidence.unnamed:
                continue
            # Samples in the C library (a thread just out of clone3) say nothing either way.
            own = {
                _short(hit.place())
                for hit in evidence.samples
                if not (hit.library and SYSTEM_LIBRARY.search(hit.library))
            }
            if not own:
                # Never scheduled while sampled (many threads, few cores): its stack, read by
                # gdb, is what shows where it runs.
                top = histories[tid][-1].functions()[:1]
                own = {_short(name) for name in top}
            if own and own <= key and _shape(histories[tid][-1], key) in shapes:
                finding.threads.append(tid)
                explained.add(tid)
        count = len(finding.threads)
        if count > 1:
            finding.summary += f"; {count} threads are caught in this loop"
            stepped = sum(1 for tid in finding.threads if histories[tid][-1].trail)
            how = (
                f"{stepped} single-stepped, the others' program counters sampled"
                if stepped
                else "their program counters sampled"
            )
            finding.evidence.append(
                f"{count} threads run only in these functions, with the same stack beneath: "
                f"{how} ({_thread_list(finding.threads, histories)})"
            )
    return merged


def _shape(thread: ThreadStack, loop: frozenset[str]) -> tuple[str, ...]:
    """A stack with its loop frames on top removed: the part threads of one loop share."""
    names = [_short(name) for name in thread.functions()]
    count = 0
    while count < len(names) and names[count] in loop:
        count += 1
    return tuple(names[count:])


def _thread_list(tids: list[int], histories: dict[int, list[ThreadStack]]) -> str:
    ids = [histories[tid][-1].gdb_id for tid in tids if tid in histories]
    shown = ", ".join(str(gdb_id) for gdb_id in sorted(ids)[:12])
    return f"threads {shown}" + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")


def _stopped(capture: Capture, histories: dict[int, list[ThreadStack]]) -> Finding | None:
    """A process found stopped (state T) runs nothing: say so rather than "waits"."""
    if capture.initial_state != "T":
        return None
    return Finding(
        kind="stopped",
        summary=f"process {capture.pid} is stopped by a signal (state T: SIGSTOP, SIGTSTP, "
        "or a terminal's stop): none of its threads run, so it cannot make progress until it "
        f"is continued (kill -CONT {capture.pid}, or `fg` in its shell); the stacks show "
        "where each thread will resume",
        hung=None,
        threads=list(histories),
        evidence=[
            "/proc reported state T before gdb attached; the process was left stopped",
        ],
    )


def _without_symbols(
    capture: Capture,
    histories: dict[int, list[ThreadStack]],
    pcs: dict[int, PcEvidence],
    explained: set[int],
) -> Finding | None:
    """Running threads in code without symbols: never called busy or "not hung".

    A spin and a call cycle look alike without names; what the samples do show (how few
    addresses, how still the stack) is given, with how to get symbols.
    """
    blind: list[int] = []
    addresses: set[int] = set()
    libraries: set[str] = set()
    spreads: list[int] = []
    for tid, history in histories.items():
        if tid in explained:
            continue
        activity = capture.activity.get(tid)
        evidence = pcs.get(tid)
        running = (activity is not None and activity.always_running()) or evidence is not None
        frames = [frame for thread in history for frame in thread.frames[:4]]
        unnamed_top = any(
            frame.function is None and not (frame.library and SYSTEM_LIBRARY.search(frame.library))
            for frame in frames[:1]
        )
        if not running or not ((evidence and evidence.unnamed) or unnamed_top):
            continue
        blind.append(tid)
        if evidence:
            addresses |= {hit.address for hit in evidence.unnamed}
            libraries |= {hit.library or "?" for hit in evidence.unnamed}
            spreads.append(evidence.spread)
        else:
            libraries |= {frame.library or "?" for frame in frames[:1]}
    if not blind:
        return None
    symbols = capture.symbols or {}
    where = ", ".join(sorted(name.rsplit("/", 1)[-1] for name in libraries))
    # The symbol checks of the files these threads run in (the executable's, or a shared
    # library's: libonnxruntime.so in a python process): their messages and how to get them.
    checked = [symbols, *(symbols.get("libraries") or [])]
    mine = [doc for doc in checked if doc.get("path") in libraries and doc.get("message")]
    if not mine and symbols.get("message"):
        mine = [symbols]
    advice = [line for doc in mine for line in doc.get("advice") or []]
    evidence_lines = [str(doc["message"]) for doc in mine]
    if addresses:
        low, high = min(addresses), max(addresses)
        evidence_lines.append(
            f"their program counters hit {len(addresses)} distinct address(es), "
            f"0x{low:x}–0x{high:x} ({high - low} bytes of code), and the stack pointer moved "
            f"by at most {max(spreads)} bytes: "
            + (
                "a tight loop or a call cycle, but which functions cannot be named"
                if high - low < 4096 and max(spreads) <= LOOP_STACK_SPREAD
                else "they move through much code; with symbols this could be told apart "
                "from a loop"
            )
        )
    return Finding(
        kind="no-symbols",
        summary=f"cannot tell without symbols: {len(blind)} running thread(s) are in code of "
        f"{where} that has no symbols, so a loop cannot be told from progress. "
        + (
            "Get symbols: " + "; or ".join(dict.fromkeys(advice))
            if advice
            else "Rebuild with -g and without stripping, or install the debug output, and run again"
        ),
        hung=None,
        threads=blind,
        evidence=evidence_lines,
    )


def _host_access(names: set[str] | list[str]) -> str:
    """How the stubs reach the host: Provider_GetHost() when seen, else ORT's g_host pointer."""
    return "Provider_GetHost()" if any(map(bridge_names.is_get_host, names)) else "g_host"


def _bridge_summary(bridge: BridgePair, via: str) -> str:
    return (
        f"{bridge.host_method} calls {bridge.counterpart} which calls back through {via}: "
        "the provider bridge loops on itself in a static build"
    )


def _bridge_evidence(bridge: BridgePair, via: str) -> str:
    method = bridge.host_method.split("::")[-1]
    return (
        f"{bridge.counterpart} is the provider's bridge stub (it calls {via}->{method}()), "
        f"and in one static binary {bridge.host_method} resolves {bridge.counterpart} to "
        "that same stub"
    )


def _static_init_frames(thread: ThreadStack) -> list[Frame]:
    names = thread.functions()
    hits = [frame for frame in thread.frames if STATIC_INIT.match(frame.function or "")]
    if not hits and "main" not in names and any(name in LOADER_INIT for name in names):
        hits = [frame for frame in thread.frames if (frame.function or "") in LOADER_INIT]
    return hits


def _static_init(
    tid: int, history: list[ThreadStack], deadlocks: list[Finding], findings: list[Finding]
) -> Finding | None:
    if not all(_static_init_frames(thread) for thread in history):
        return None
    last = history[-1]
    initialiser = _static_init_frames(last)[0]
    names = last.functions()
    before_main = "main" not in names and not last.truncated
    library = initialiser.library or "?"
    where = "before main" if before_main else f"while loading {library.rsplit('/', 1)[-1]} (dlopen)"
    unchanged = len(history) >= 2 and all(t.functions() == names for t in history)
    chain = [
        _short(frame.function or "??")
        for frame in reversed(last.frames)
        if frame is initialiser or (frame.function and frame is _user_frame([frame]))
    ]
    evidence = [
        f"{describe(last)} is inside {initialiser.function} "
        f"({initialiser.location(full=False)}) {where}",
        "initialiser chain: " + " → ".join(chain[:12]),
    ]
    if unchanged:
        evidence.append(f"its stack is the same in all {len(history)} samples")
    deadlock = next((finding for finding in deadlocks if tid in finding.threads), None)
    loop = next((f for f in findings if f.kind == "call-cycle" and tid in f.threads), None)
    if deadlock:
        deadlock.kind = "static-init"
        clauses = deadlock.summary.removeprefix(DEADLOCK_PREFIX)
        deadlock.summary = f"static-initialisation deadlock {where}: {clauses}"
        deadlock.evidence[:0] = evidence
        return None
    if loop:
        loop.evidence.append(
            f"this happens during static initialisation {where}, in {initialiser.function}"
            + (": the bridge's host pointer is not set yet" if loop.bridge else "")
        )
        return Finding(
            kind="static-init",
            summary=f"{describe(last)} never finishes static initialisation ({where}): it is "
            "caught in the call cycle above",
            hung=True,
            functions=[initialiser.function or "??"],
            threads=[tid],
            evidence=evidence,
        )
    if not unchanged and len(history) >= 2:
        return None  # initialisation in progress: it moves
    top = _user_frame(last.frames)
    waiting = f", waiting in {last.wait.kind}" if last.wait else ""
    return Finding(
        kind="static-init",
        summary=f"{describe(last)} is stuck in static initialisation {where} in "
        f"{initialiser.function}{' at ' + (top.function or '') if top else ''}{waiting}",
        hung=True if unchanged else None,
        functions=[initialiser.function or "??", *([top.function] if top and top.function else [])],
        threads=[tid],
        evidence=evidence,
    )


def _guard_holder(waiter: ThreadStack, threads: list[ThreadStack]) -> tuple[int, str] | None:
    """The thread running the initialiser of the static `waiter` waits for, and its function.

    The waiter's frame below __cxa_guard_acquire is the function owning the static; the
    thread that has that function on its stack without a guard wait above it is inside
    the initialisation.
    """
    names = waiter.functions()
    try:
        position = next(i for i, name in enumerate(names) if name == "__cxa_guard_acquire")
    except StopIteration:
        return None
    if position + 1 >= len(names):
        return None
    owner_function = names[position + 1]
    for other in threads:
        if other.tid == waiter.tid:
            continue
        other_names = other.functions()
        for index, name in enumerate(other_names):
            if name == owner_function and (
                index == 0 or other_names[index - 1] != "__cxa_guard_acquire"
            ):
                return other.tid, owner_function
    return None


def _deadlocks(capture: Capture, histories: dict[int, list[ThreadStack]]) -> list[Finding]:
    """Cycles in the last sample's wait-for graph whose threads never moved."""
    last = capture.samples[-1]
    by_tid = {thread.tid: thread for thread in last.threads}
    edges: dict[int, tuple[int, str]] = {}
    for thread in last.threads:
        wait = thread.wait
        if wait is None:
            continue
        what = wait.symbol or (f"0x{wait.address:x}" if wait.address else "?")
        if wait.kind == "mutex" and wait.owner_tid:
            edges[thread.tid] = (wait.owner_tid, f"mutex {what}")
        elif wait.kind == "join" and wait.owner_tid:
            edges[thread.tid] = (wait.owner_tid, "join")
        elif wait.kind == "static-guard":
            holder = _guard_holder(thread, list(last.threads))
            if holder:
                static = _static_name(wait.symbol) or f"a static local of {_short(holder[1])}"
                edges[thread.tid] = (holder[0], f"static {static}")
    findings = []
    seen: set[int] = set()
    for start in edges:
        if start in seen:
            continue
        path: list[int] = []
        node = start
        while node in edges and node not in path and node not in seen:
            path.append(node)
            node = edges[node][0]
        seen.update(path)
        if node not in path:
            continue
        cycle = path[path.index(node) :]
        if not all(tid in by_tid for tid in cycle):
            continue
        still = all(len({tuple(t.functions()) for t in histories[tid]}) == 1 for tid in cycle)
        findings.append(_deadlock_finding(cycle, edges, by_tid, still, len(capture.samples)))
    return findings


def _deadlock_finding(
    cycle: list[int],
    edges: dict[int, tuple[int, str]],
    by_tid: dict[int, ThreadStack],
    still: bool,
    samples: int,
) -> Finding:
    holds: dict[int, list[str]] = {}
    for tid in cycle:
        owner, what = edges[tid]
        if what.startswith("mutex"):
            holds.setdefault(owner, []).append(what)
        elif what.startswith("static "):
            holds.setdefault(owner, []).append(f"the guard of {what}")
    clauses = []
    evidence = []
    for tid in cycle:
        owner, what = edges[tid]
        thread = by_tid[tid]
        held = f"holds {' and '.join(holds[tid])} and " if holds.get(tid) else ""
        target = by_tid[owner]
        if what == "join":
            waits = f"waits in pthread_join for {describe(target)} to finish"
        elif what.startswith("static "):
            waits = f"waits for {what} to be initialised by {describe(target)}"
        else:
            waits = f"waits for {what} held by {describe(target)}"
        clauses.append(f"{describe(thread)}{_where(thread)} {held}{waits}")
        evidence.append(f"{describe(thread)} [{thread.state or '?'}]: {_brief_stack(thread)}")
    if len(cycle) == 1:
        summary = f"self-deadlock: {clauses[0]} (a non-recursive mutex locked twice)"
    else:
        summary = f"{DEADLOCK_PREFIX}{'; '.join(clauses)}"
    if still and samples > 1:
        evidence.append(f"none of these threads moved in {samples} samples")
    evidence.append("owners read from each mutex's __owner field and joined threads' TIDs")
    functions = [
        frame.function
        for tid in cycle
        if (frame := _user_frame(by_tid[tid].frames)) and frame.function
    ]
    return Finding(
        kind="deadlock",
        summary=summary,
        hung=True if still or samples == 1 else None,
        functions=functions,
        threads=list(cycle),
        evidence=evidence,
    )


def _lock_waits(
    capture: Capture, histories: dict[int, list[ThreadStack]], explained: set[int]
) -> list[Finding]:
    findings = []
    for tid, history in histories.items():
        last = history[-1]
        if tid in explained or last.wait is None or last.wait.kind != "mutex":
            continue
        if not all(t.wait and t.wait.kind == "mutex" for t in history):
            continue
        wait = last.wait
        what = wait.symbol or (f"0x{wait.address:x}" if wait.address else "a mutex")
        owner = next((t for t in capture.samples[-1].threads if t.tid == wait.owner_tid), None)
        holder = f" held by {describe(owner)}{_where(owner)}" if owner else ""
        findings.append(
            Finding(
                kind="lock-wait",
                summary=f"{describe(last)}{_where(last)} waits for mutex {what}{holder} "
                f"in all {len(history)} samples",
                hung=None,
                functions=[f.function for f in [_user_frame(last.frames)] if f and f.function],
                threads=[tid],
                evidence=[f"{describe(last)}: {_brief_stack(last)}"],
            )
        )
    return findings


# Where a thread that backs off and retries is caught: trying a lock, or giving the CPU away.
RETRY_TRY = re.compile(r"trylock|try_lock")
RETRY_YIELD = re.compile(r"sched_yield|this_thread::yield|pthread_yield")


def _retry_places(history: list[ThreadStack], pc: PcEvidence | None) -> set[str]:
    """The try-lock and yield functions a thread was caught in, by its stacks or its PCs."""
    names = {frame.function for thread in history for frame in thread.frames if frame.function}
    if pc is not None:
        names |= set(pc.places)
    return {name for name in names if RETRY_TRY.search(name) or RETRY_YIELD.search(name)}


def _livelock(
    capture: Capture,
    histories: dict[int, list[ThreadStack]],
    pcs: dict[int, PcEvidence],
    explained: set[int],
) -> Finding | None:
    """Two or more threads that keep running, each caught trying a lock or yielding, with
    none of them writing anything: they back off and retry for ever (a livelock).

    Only where the whole process shows no progress: no thread wrote anything, and no other
    thread runs (a pool's workers yielding while one thread computes wait for work, they
    are not a livelock)."""
    caught: dict[int, set[str]] = {}
    for tid, history in histories.items():
        activity = capture.activity.get(tid)
        if activity is None or not activity.observations:
            continue
        if not activity.io or activity.wrote():
            return None  # output advancing (or not known): no lack of progress shown
        running = activity.running_share >= 0.5 or (activity.cpu_share or 0) >= 0.2
        places = _retry_places(history, pcs.get(tid))
        if running and places and tid not in explained:
            caught[tid] = places
        elif running and tid not in explained:
            return None  # another thread runs elsewhere: it may be the one making progress
    seen = set().union(*caught.values()) if caught else set()
    if len(caught) < 2 or not any(RETRY_YIELD.search(name) for name in seen):
        return None
    tids = sorted(caught)
    evidence = []
    for tid in tids[:8]:
        history = histories[tid]
        activity = capture.activity[tid]
        evidence.append(
            f"{describe(history[-1])} in {_short(_user_name(history))}: caught in "
            + ", ".join(sorted(_short(name) for name in caught[tid]))
            + f" ({_activity_text(activity)}); wrote 0 bytes in 0 write calls over "
            f"{activity.io_seconds:.1f} s (/proc io counters)"
        )
    functions = sorted({_user_name(histories[tid]) for tid in tids} - {"??"})
    return Finding(
        kind="livelock",
        summary=f"livelock: {_thread_list(tids, histories)} keep running and giving way "
        f"(caught in {', '.join(sorted(_short(name) for name in seen))}) without progress: "
        "no thread of the process wrote anything while watched; they back off and retry for ever "
        "(try a lock, unlock, yield)",
        hung=True,
        functions=functions[:12],
        threads=tids,
        evidence=evidence,
    )


def _user_name(history: list[ThreadStack]) -> str:
    frame = _user_frame(history[-1].frames)
    return frame.function if frame and frame.function else "??"


def _wrote_text(activity: ThreadActivity) -> str:
    io = activity.io
    return (
        f"wrote {io.get('wchar', 0)} bytes in {io.get('syscw', 0)} write calls and made "
        f"{io.get('syscr', 0)} read calls over {activity.io_seconds:.1f} s observed "
        "(/proc io counters)"
    )


def _activity_findings(
    capture: Capture,
    histories: dict[int, list[ThreadStack]],
    explained: set[int],
    pcs: dict[int, PcEvidence] | None = None,
) -> list[Finding]:
    """Busy (stacks change), spinning (always running, same stack) or waiting threads."""
    moving, spinning, blocked = [], [], []
    pcs = pcs or {}
    for tid, history in histories.items():
        if tid in explained:
            continue
        activity = capture.activity.get(tid)
        running = activity is not None and (
            activity.running_share >= 0.5 or (activity.cpu_share or 0) >= 0.2
        )
        distinct = {tuple(thread.functions()) for thread in history}
        tops = {thread.functions()[0] if thread.frames else "??" for thread in history}
        evidence = pcs.get(tid)
        if activity is not None and activity.wrote():
            # Its output advanced between the looks: progress, whatever its stacks show.
            moving.append((tid, history, distinct, activity))
        elif evidence is not None and len(history) == 1:
            # One stack sample: the program counters say whether the thread moves.
            if evidence.moving:
                moving.append((tid, history, distinct, activity))
            else:
                spinning.append((tid, history, activity))
        elif running and len(history) >= 2 and (len(distinct) > 1 or len(tops) > 1):
            moving.append((tid, history, distinct, activity))
        elif running and len(history) >= 2:
            spinning.append((tid, history, activity))
        elif not running:
            blocked.append((tid, history))
    findings = []
    if moving:
        evidence = []
        for tid, history, distinct, activity in moving[:8]:
            tops = Counter(_short(t.functions()[0]) for t in history if t.frames)
            pc = pcs.get(tid)
            if activity is not None and activity.wrote():
                evidence.append(
                    f"{describe(history[-1])} in {_short(_user_name(history))}: "
                    f"{_wrote_text(activity)} ({_activity_text(activity)})"
                )
                continue
            if pc is not None and len(history) == 1:
                evidence.append(
                    f"{describe(history[-1])}: program counter in {len(pc.places)} "
                    f"function(s) at {pc.addresses} addresses in {pc.hits} samples, stack "
                    f"depth swinging by {pc.spread} bytes; most: "
                    + ", ".join(
                        f"{_short(name)} ×{count}" for name, count in pc.places.most_common(4)
                    )
                )
                continue
            evidence.append(
                f"{describe(history[-1])}: {len(distinct)} different stacks in "
                f"{len(history)} samples; on top: "
                + ", ".join(f"{name} ×{count}" for name, count in tops.most_common(4))
                + (f" ({_activity_text(activity)})" if activity else "")
            )
        findings.append(
            Finding(
                kind="busy",
                summary=f"busy, making progress: {len(moving)} thread(s) whose output "
                "advances or whose stacks change from sample to sample (or whose program "
                "counters range over much code); not hung",
                hung=False,
                functions=sorted(
                    {
                        f.function
                        for _, history, _, _ in moving
                        for t in history
                        if (f := _user_frame(t.frames)) and f.function
                    }
                )[:12],
                threads=[tid for tid, *_ in moving],
                evidence=evidence,
            )
        )
    for tid, history, activity in spinning:
        findings.append(_spin_finding(tid, history, activity, pcs.get(tid)))
    if (
        blocked
        and not moving
        and not spinning
        and not any(tid in explained for tid in histories if tid not in {t for t, _ in blocked})
    ):
        # Thread pools have many identical waiters: one line per distinct stack.
        groups: dict[str, list[ThreadStack]] = {}
        for _tid, history in blocked:
            groups.setdefault(_brief_stack(history[-1]), []).append(history[-1])
        evidence = []
        for members in list(groups.values())[:8]:
            last = members[0]
            kind = last.wait.kind if last.wait else (last.wchan or last.state or "?")
            who = (
                describe(last)
                if len(members) == 1
                else f"{len(members)} threads like {describe(last)}"
            )
            evidence.append(f"{who} [{last.state or '?'}] wait ({kind}): {_brief_stack(last)}")
        findings.append(
            Finding(
                kind="waiting",
                summary=f"all {len(blocked)} thread(s) are blocked and use no CPU, with no "
                "lock cycle between them: the program waits for something outside it (input, "
                "a child, a peer) or for a wake-up that never comes",
                hung=None,
                threads=[tid for tid, _ in blocked],
                evidence=evidence,
            )
        )
    return findings


def _more_samples(taken: int) -> str:
    """Advice on sampling again, given only where more samples could still tell: after five
    or more that all saw the same, more would see the same too."""
    if taken < 5:
        return "More samples (--samples 5) show whether it ever leaves"
    return (
        f"All {taken} samples saw it there: more would not tell; whether it ends shows in its "
        "output, or in `bt` again in a while"
    )


def _spin_finding(
    tid: int,
    history: list[ThreadStack],
    activity: ThreadActivity | None,
    pc: PcEvidence | None,
) -> Finding:
    """A thread running in one place: hung when its program counters show a tight loop that
    changes nothing the registers hold, else a loop or a long computation, undecided."""
    last = history[-1]
    frame = _user_frame(last.frames) or (last.frames[0] if last.frames else None)
    name = frame.function if frame and frame.function else "??"
    evidence = [
        f"always running ({_activity_text(activity)})" if activity else "running",
        "stack: " + " ← ".join(_short(n) for n in last.functions()[:8]),
    ]
    same_stack = (
        f"{describe(last)} ran in {_short(name)} with the same stack in all {len(history)} samples"
    )
    still = (
        pc.still if pc is not None and activity is not None and activity.always_running() else None
    )
    if pc is None or still is None:
        return Finding(
            kind="spin",
            summary=same_stack
            + (f" and its program counter stayed in {_places(pc)}" if pc else "")
            + ": a loop that never leaves it, or a long computation",
            hung=None,
            functions=[name],
            threads=[tid],
            evidence=evidence,
        )
    reads, changed, repeated = pc.revisits
    low, high = min(hit.address for hit in pc.samples), max(hit.address for hit in pc.samples)
    where = (
        f"its program counter, read {pc.hits} times over {pc.span * 1000:.0f} ms in which "
        f"it ran {pc.cpu_ns / 1e6:.0f} ms on a CPU, was at "
        f"{pc.addresses} address(es) within {high - low + 1} bytes of code in {_places(pc)}"
        + (
            ", the stack pointer never moving"
            if pc.spread == 0
            else f", the stack pointer moving by {pc.spread} bytes at most"
        )
    )
    evidence.append(where)
    if still:
        evidence.append(
            f"{reads} of the {len(pc.ran_between())} reads taken after it had run again fell "
            f"on {repeated} address(es) it came back to, and at each every register was the "
            "same every time: between the reads it changed "
            "nothing its registers hold (no counter, no pointer moving on). What it reads "
            "from memory never let it out (memory itself is not compared)"
        )
        return Finding(
            kind="spin",
            summary=f"{describe(last)} spins in {_short(name)} without progress: a tight loop "
            "whose registers were the same each time the same instruction was caught; it waits "
            "for something that does not change (a flag, a lock word) or loops for ever",
            hung=True,
            functions=[name],
            threads=[tid],
            evidence=evidence,
        )
    evidence.append(
        f"at {changed} of the {repeated} address(es) it came back to, its registers differed "
        "from one read to the next: it computes as it loops (a counter, a pointer moving on)"
    )
    return Finding(
        kind="spin",
        summary=same_stack
        + " in a tight loop whose registers change as it goes: a long computation, or a loop "
        "that never ends; program counters cannot tell which. " + _more_samples(len(history)),
        hung=None,
        functions=[name],
        threads=[tid],
        evidence=evidence,
    )


def _places(evidence: PcEvidence) -> str:
    return ", ".join(_short(name) for name, _ in evidence.places.most_common(4))


def _brief_stack(thread: ThreadStack) -> str:
    """A few frames around the program's own innermost frame: where it waits, in its terms."""
    frames = list(thread.frames)
    user = _user_frame(frames)
    at = frames.index(user) if user else 0
    chosen = frames[max(0, at - 2) : at + 2] if user else frames[:5]
    return " ← ".join(_short(frame.function or "??") for frame in chosen)


def _activity_text(activity: ThreadActivity | None) -> str:
    if activity is None:
        return "no /proc observations"
    share = activity.cpu_share
    parts = [f"R in {activity.states.get('R', 0)} of {activity.observations} looks"]
    if share is not None:
        parts.append(f"{share * 100:.0f}% CPU")
    return ", ".join(parts)


def _short(name: str) -> str:
    """Drop the outer namespaces and long template arguments: fits on a line."""
    return display_name(name)


def _size(count: int) -> str:
    return scaled_byte_size(count)  # a stack is counted in powers of 1024: MiB, KiB
