"""Lock evidence: who holds a static guard, a deadlock's finding, waits on locks, retry places."""

from __future__ import annotations

import re

from workbench.debugging.diagnosis.evidence import (
    PcEvidence,
    brief_stack,
    describe,
    user_frame,
    where,
)
from workbench.debugging.model import (
    Capture,
    Finding,
    ThreadStack,
)

DEADLOCK_PREFIX = "lock-order deadlock: "


def guard_holder(waiter: ThreadStack, threads: list[ThreadStack]) -> tuple[int, str] | None:
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


def deadlock_finding(
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
        clauses.append(f"{describe(thread)}{where(thread)} {held}{waits}")
        evidence.append(f"{describe(thread)} [{thread.state or '?'}]: {brief_stack(thread)}")
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
        if (frame := user_frame(by_tid[tid].frames)) and frame.function
    ]
    return Finding(
        kind="deadlock",
        summary=summary,
        hung=True if still or samples == 1 else None,
        functions=functions,
        threads=list(cycle),
        evidence=evidence,
    )


def lock_waits(
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
        holder = f" held by {describe(owner)}{where(owner)}" if owner else ""
        findings.append(
            Finding(
                kind="lock-wait",
                summary=f"{describe(last)}{where(last)} waits for mutex {what}{holder} "
                f"in all {len(history)} samples",
                hung=None,
                functions=[f.function for f in [user_frame(last.frames)] if f and f.function],
                threads=[tid],
                evidence=[f"{describe(last)}: {brief_stack(last)}"],
            )
        )
    return findings


# Where a thread that backs off and retries is caught: trying a lock, or giving the CPU away.
RETRY_TRY = re.compile(r"trylock|try_lock")
RETRY_YIELD = re.compile(r"sched_yield|this_thread::yield|pthread_yield")


def retry_places(history: list[ThreadStack], pc: PcEvidence | None) -> set[str]:
    """The try-lock and yield functions a thread was caught in, by its stacks or its PCs."""
    names = {frame.function for thread in history for frame in thread.frames if frame.function}
    if pc is not None:
        names |= set(pc.places)
    return {name for name in names if RETRY_TRY.search(name) or RETRY_YIELD.search(name)}
