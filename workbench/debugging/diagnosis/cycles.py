"""Call cycles: recursion, tail-call loops (the provider bridge's among them), no symbols."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

from workbench.debugging.bridge import bridge_names
from workbench.debugging.cpp_names import strip_signature
from workbench.debugging.diagnosis.evidence import (
    LOOP_STACK_SPREAD,
    MAX_CYCLE_PERIOD,
    MAX_CYCLE_START,
    MAX_LOOP_FUNCTIONS,
    MAX_LOOP_TOP,
    MIN_RECURSION_REPEATS,
    MIN_STILL_HITS,
    SYSTEM_LIBRARY,
    PcEvidence,
    activity_text,
    describe,
    sampled_stub_callers,
    short,
    thread_list,
)
from workbench.debugging.model import (
    BridgePair,
    Capture,
    Finding,
    ThreadActivity,
    ThreadStack,
)
from workbench.host.units import scaled_byte_size


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
            f"({' → '.join(short(name) for name in order)} …) that is not growing; not hung"
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


def recursion(
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
        f"{describe(last)}: {' → '.join(short(name) for name in order)} repeats "
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
        f"{' → '.join(short(name) for name in order)} → {short(order[0])} …"
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
        or short(name) == bridge_counterpart
    }


def tail_call_loop(
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
    # A stub whose host method the binary's read shows jumping straight back to it, where this
    # thread was caught (its stack's top, its counters): the loop is the binary's, even where
    # no read caught the stub calling Provider_GetHost (on a loaded host every read of a
    # thread can fall on the same instruction of the stub).
    caught = {strip_signature(stack[0]) for stack in stacks if stack}
    if pc is not None:
        caught |= {strip_signature(name) for name in pc.places}
    stub_callers |= {stub for stub in (bridge_code or {}) if strip_signature(stub) in caught}
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
    top_names = Counter(short(stack[0]) for stack in stacks if stack)
    beneath = [name for name in stacks[0][len(stacks[0]) - base :] if name not in base_loop]
    evidence = [
        f"{describe(last)} is always running"
        + (f" ({activity_text(activity)})" if activity else ""),
        f"top of the stack in {len(history)} sample(s): "
        + ", ".join(f"{name} ×{count}" for name, count in top_names.most_common()),
    ]
    if len(history) >= 2:
        low, high = min(len(s) for s in stacks), max(len(s) for s in stacks)
        evidence.append(
            f"the {len(beneath)} frame(s) beneath ({' ← '.join(short(n) for n in beneath[:4])}) "
            f"are the same in every sample; stack depth stays at "
            f"{low if low == high else f'{low}–{high}'}: the calls do not return, they jump "
            "to each other (tail calls)"
        )
    if loop and stepped:
        evidence.append(
            "single-stepping the thread went round "
            + " → ".join(short(name) for name in [*loop, loop[0]])
            + " again and again"
        )
    if pc is not None and sampled:
        evidence.append(
            f"its program counter, sampled {pc.hits} times, was only ever in "
            + ", ".join(f"{short(name)} ×{count}" for name, count in pc.places.most_common())
            + f"; the stack pointer moved by {pc.spread} bytes at most"
        )
    if bridge:
        # The binary's read confirms the pair whichever thread's counters caught the stub's
        # call: a thread sampled in the host method's jump, never in Provider_GetHost, names
        # the pair without having seen the stub call it.
        read |= {
            stub: entry
            for stub, entry in (bridge_code or {}).items()
            if short(entry["host_method"]) == bridge.host_method
            and short(stub) == bridge.counterpart
        }
        via = _host_access(seen | set(base_loop))
        summary = (
            _bridge_summary(bridge, via) + f" ({describe(last)}, a tail-call loop at 100% CPU)"
        )
        evidence.append(_bridge_evidence(bridge, via))
        evidence += [
            f"{short(entry['host_method'])} is `{entry['instruction']}` in the binary (read "
            f"with gdb, not stepped): it goes straight back to {short(stub)}"
            for stub, entry in sorted(read.items())
        ]
        if not any(bridge_names.host_method_parts(name) for name in functions):
            # Its full name where the binary gave it, else the bridge's short one.
            hosts = [entry["host_method"] for _, entry in sorted(read.items())]
            functions.append(hosts[0] if hosts else bridge.host_method)
    else:
        summary = (
            f"{describe(last)} spins through {', '.join(short(name) for name in functions)} "
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


def merge_by_code(
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
            else frozenset(short(name) for name in finding.functions)
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
        key = frozenset(short(name) for name in names[loop_id])
        members = set(finding.threads)
        shapes = {_shape(histories[tid][-1], key) for tid in members if tid in histories}
        for tid, evidence in pcs.items():
            if tid in explained or tid not in histories or evidence.unnamed:
                continue
            # Samples in the C library (a thread just out of clone3) say nothing either way.
            own = {
                short(hit.place())
                for hit in evidence.samples
                if not (hit.library and SYSTEM_LIBRARY.search(hit.library))
            }
            if not own:
                # Never scheduled while sampled (many threads, few cores): its stack, read by
                # gdb, is what shows where it runs.
                top = histories[tid][-1].functions()[:1]
                own = {short(name) for name in top}
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
                f"{how} ({thread_list(finding.threads, histories)})"
            )
    return merged


def _shape(thread: ThreadStack, loop: frozenset[str]) -> tuple[str, ...]:
    """A stack with its loop frames on top removed: the part threads of one loop share."""
    names = [short(name) for name in thread.functions()]
    count = 0
    while count < len(names) and names[count] in loop:
        count += 1
    return tuple(names[count:])


def without_symbols(
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


def _size(count: int) -> str:
    return scaled_byte_size(count)  # a stack is counted in powers of 1024: MiB, KiB
