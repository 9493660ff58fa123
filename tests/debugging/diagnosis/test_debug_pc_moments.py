"""Which program-counter reads count as moments of their own (`PcEvidence.ran_between`).

Reads of one thread at one address with the same registers are a loop that stood still only
when the thread ran its own code between them; CPU time the kernel spent for it (the
sampler's own stop, page faults, a system call) runs none of its instructions. The reads
here are built by hand; tests/debugging/diagnosis/test_debug_spin_verdict.py drives the same
rules through real programs.
"""

from __future__ import annotations

from workbench.debugging.diagnosis.evidence import MIN_RAN_BETWEEN_NS, pc_evidence
from workbench.debugging.model import PcHit

READS = 8
STEP_NS = 1_000_000  # 1 ms of CPU time between reads: a thread scheduled between rounds


def _hits(**changes: object) -> tuple[PcHit, ...]:
    """Eight reads at one address with the same registers, 1 ms of CPU time apart; each
    keyword gives, per read index, a field's value (a function of the index)."""
    hits = []
    for index in range(READS):
        fields: dict[str, object] = {
            "ran_ns": index * STEP_NS,
            "timeslices": None,
            "timeslices_asked": None,
            "faults": None,
            "in_syscall": None,
        }
        for name, value in changes.items():
            fields[name] = value(index) if callable(value) else value
        hits.append(
            PcHit(
                0x401000,
                0x7FFD0000,
                "wait_for_release",
                "/tmp/spin",
                state=0xABC,
                at=index * 0.02,
                **fields,
            )
        )
    return tuple(hits)


def _still(hits: tuple[PcHit, ...]) -> bool | None:
    evidence = pc_evidence(hits)
    assert evidence is not None
    return evidence.still


def test_a_thread_that_ran_its_own_code_between_reads_stood_still() -> None:
    # Recordings from before the kernel's signs were kept (None) are judged as before.
    assert _still(_hits()) is True
    # Switched in (once, or a few times) between each read and the next round's ask.
    assert (
        _still(_hits(timeslices=lambda i: 10 + 2 * i, timeslices_asked=lambda i: 9 + 2 * i)) is True
    )
    assert _still(_hits(faults=7, in_syscall=False)) is True


def test_the_stops_own_cost_is_not_time_it_ran() -> None:
    # Asked to stop before it was switched in again after the read before (it was not
    # scheduled between rounds): the millisecond it was charged came with the stop, in the
    # kernel. Switched in only once it was asked: its one timeslice is the stop.
    unscheduled = _hits(timeslices=lambda i: 10 + i, timeslices_asked=lambda i: 9 + i)
    evidence = pc_evidence(unscheduled)
    assert evidence is not None and len(evidence.ran_between()) == 1
    assert evidence.still is None
    # Less than MIN_RAN_BETWEEN_NS run, switched in or not: one moment too.
    brief = _hits(ran_ns=lambda i: i * (MIN_RAN_BETWEEN_NS - 1))
    evidence = pc_evidence(brief)
    assert evidence is not None and len(evidence.ran_between()) == 1


def test_page_faults_or_a_system_call_between_reads_are_the_kernels_time() -> None:
    faulting = pc_evidence(_hits(faults=lambda i: 100 + i * 16))
    assert faulting is not None and len(faulting.ran_between()) == 1 and faulting.still is None
    in_calls = pc_evidence(_hits(in_syscall=True))
    assert in_calls is not None and len(in_calls.ran_between()) == 1 and in_calls.still is None
    # One fault in one interval drops that read only.
    once = pc_evidence(_hits(faults=lambda i: 3 if i >= 4 else 2))
    assert once is not None and len(once.ran_between()) == READS - 1 and once.still is True
