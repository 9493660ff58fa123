"""Findings from /proc activity and program counters: busy, spinning and waiting threads."""

from __future__ import annotations

from collections import Counter

from workbench.debugging.diagnosis.evidence import (
    PcEvidence,
    activity_text,
    brief_stack,
    describe,
    more_samples,
    places,
    short,
    user_frame,
    user_name,
    wrote_text,
)
from workbench.debugging.model import (
    Capture,
    Finding,
    ThreadActivity,
    ThreadStack,
)


def activity_findings(
    capture: Capture,
    histories: dict[int, list[ThreadStack]],
    explained: set[int],
    pcs: dict[int, PcEvidence] | None = None,
) -> list[Finding]:
    """Busy (stacks change), spinning (always running, same stack) or waiting threads."""
    moving: list[tuple[int, list[ThreadStack], set[tuple[str, ...]], ThreadActivity | None]] = []
    spinning: list[tuple[int, list[ThreadStack], ThreadActivity | None]] = []
    blocked: list[tuple[int, list[ThreadStack]]] = []
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
        sampled = pcs.get(tid)
        if activity is not None and activity.wrote():
            # Its output advanced between the looks: progress, whatever its stacks show.
            moving.append((tid, history, distinct, activity))
        elif sampled is not None and len(history) == 1:
            # One stack sample: the program counters say whether the thread moves.
            if sampled.moving:
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
    evidence: list[str] = []
    if moving:
        for tid, history, distinct, activity in moving[:8]:
            on_top = Counter(short(t.functions()[0]) for t in history if t.frames)
            pc = pcs.get(tid)
            if activity is not None and activity.wrote():
                evidence.append(
                    f"{describe(history[-1])} in {short(user_name(history))}: "
                    f"{wrote_text(activity)} ({activity_text(activity)})"
                )
                continue
            if pc is not None and len(history) == 1:
                evidence.append(
                    f"{describe(history[-1])}: program counter in {len(pc.places)} "
                    f"function(s) at {pc.addresses} addresses in {pc.hits} samples, stack "
                    f"depth swinging by {pc.spread} bytes; most: "
                    + ", ".join(
                        f"{short(name)} ×{count}" for name, count in pc.places.most_common(4)
                    )
                )
                continue
            evidence.append(
                f"{describe(history[-1])}: {len(distinct)} different stacks in "
                f"{len(history)} samples; on top: "
                + ", ".join(f"{name} ×{count}" for name, count in on_top.most_common(4))
                + (f" ({activity_text(activity)})" if activity else "")
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
                        if (f := user_frame(t.frames)) and f.function
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
            groups.setdefault(brief_stack(history[-1]), []).append(history[-1])
        evidence = []
        for members in list(groups.values())[:8]:
            last = members[0]
            kind = last.wait.kind if last.wait else (last.wchan or last.state or "?")
            who = (
                describe(last)
                if len(members) == 1
                else f"{len(members)} threads like {describe(last)}"
            )
            evidence.append(f"{who} [{last.state or '?'}] wait ({kind}): {brief_stack(last)}")
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


def _spin_finding(
    tid: int,
    history: list[ThreadStack],
    activity: ThreadActivity | None,
    pc: PcEvidence | None,
) -> Finding:
    """A thread running in one place: hung when its program counters show a tight loop that
    changes nothing the registers hold, else a loop or a long computation, undecided."""
    last = history[-1]
    frame = user_frame(last.frames) or (last.frames[0] if last.frames else None)
    name = frame.function if frame and frame.function else "??"
    evidence = [
        f"always running ({activity_text(activity)})" if activity else "running",
        "stack: " + " ← ".join(short(n) for n in last.functions()[:8]),
    ]
    same_stack = (
        f"{describe(last)} ran in {short(name)} with the same stack in all {len(history)} samples"
    )
    still = (
        pc.still if pc is not None and activity is not None and activity.always_running() else None
    )
    if pc is None or still is None:
        return Finding(
            kind="spin",
            summary=same_stack
            + (f" and its program counter stayed in {places(pc)}" if pc else "")
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
        f"{pc.addresses} address(es) within {high - low + 1} bytes of code in {places(pc)}"
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
            summary=f"{describe(last)} spins in {short(name)} without progress: a tight loop "
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
        "that never ends; program counters cannot tell which. " + more_samples(len(history)),
        hung=None,
        functions=[name],
        threads=[tid],
        evidence=evidence,
    )
