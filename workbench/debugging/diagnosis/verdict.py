"""The verdict: every detector over the samples, ranked; stopped, deadlocked, livelocked."""

from __future__ import annotations

from workbench.debugging.bridge.bridge_patch import propose
from workbench.debugging.diagnosis.activity import activity_findings
from workbench.debugging.diagnosis.cycles import (
    merge_by_code,
    recursion,
    tail_call_loop,
    without_symbols,
)
from workbench.debugging.diagnosis.evidence import (
    PcEvidence,
    activity_text,
    describe,
    pc_evidence,
    short,
    static_name,
    thread_list,
    user_name,
)
from workbench.debugging.diagnosis.locks import (
    RETRY_YIELD,
    deadlock_finding,
    guard_holder,
    lock_waits,
    retry_places,
)
from workbench.debugging.diagnosis.static_init import static_init
from workbench.debugging.model import (
    Capture,
    Diagnosis,
    Finding,
    ThreadStack,
)

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
        finding = recursion(tid, history, activity) or (
            None
            if activity is not None and activity.wrote()
            else tail_call_loop(
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
    findings = merge_by_code(findings, capture, pcs, histories, explained)
    stopped = _stopped(capture, histories)
    if stopped:
        findings.append(stopped)
        explained.update(stopped.threads)
    unnamed = without_symbols(capture, histories, pcs, explained)
    if unnamed:
        findings.append(unnamed)
        explained.update(unnamed.threads)

    deadlocks = _deadlocks(capture, histories)
    for finding in deadlocks:
        findings.append(finding)
        explained.update(finding.threads)

    for tid, history in histories.items():
        finding = static_init(tid, history, deadlocks, findings)
        if finding:
            findings.append(finding)
            explained.add(tid)

    livelock = _livelock(capture, histories, pcs, explained)
    if livelock:
        findings.append(livelock)
        explained.update(livelock.threads)
    findings += lock_waits(capture, histories, explained)
    findings += activity_findings(capture, histories, explained, pcs)
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
            holder = guard_holder(thread, list(last.threads))
            if holder:
                static = static_name(wait.symbol) or f"a static local of {short(holder[1])}"
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
        findings.append(deadlock_finding(cycle, edges, by_tid, still, len(capture.samples)))
    return findings


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
        places = retry_places(history, pcs.get(tid))
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
            f"{describe(history[-1])} in {short(user_name(history))}: caught in "
            + ", ".join(sorted(short(name) for name in caught[tid]))
            + f" ({activity_text(activity)}); wrote 0 bytes in 0 write calls over "
            f"{activity.io_seconds:.1f} s (/proc io counters)"
        )
    functions = sorted({user_name(histories[tid]) for tid in tids} - {"??"})
    return Finding(
        kind="livelock",
        summary=f"livelock: {thread_list(tids, histories)} keep running and giving way "
        f"(caught in {', '.join(sorted(short(name) for name in seen))}) without progress: "
        "no thread of the process wrote anything while watched; they back off and retry for ever "
        "(try a lock, unlock, yield)",
        hung=True,
        functions=functions[:12],
        threads=tids,
        evidence=evidence,
    )
