"""Stall detection from plain values: no progress for long enough, and a process that spins, is
blocked, or every job idle the whole time."""

from __future__ import annotations

from workbench.supervision.stall import (
    ProcessRow,
    StallWatch,
    last_progress_change,
    stall_threshold,
)


def _row(pid: int, cpu: float, state: str = "R") -> ProcessRow:
    return ProcessRow(pid, "compiler", "cc1plus", f"/src/f{pid}.cc", cpu, 10**8, 5.0, state)


def test_stall_needs_no_progress_and_a_spinning_or_blocked_process() -> None:
    assert stall_threshold(None) == 600.0
    assert stall_threshold(10.0) == 120.0  # never sooner than two minutes
    assert stall_threshold(300.0) == 900.0
    watch = StallWatch(threshold_s=100.0)
    key = (0.5, 6, 12, None, None)
    assert watch.observe(0.0, key, [_row(1, 99.0), _row(2, 40.0)]) is None
    for t in range(1, 100, 5):
        assert watch.observe(float(t), key, [_row(1, 99.0), _row(2, 40.0)]) is None
    stall = watch.observe(101.0, key, [_row(1, 99.0), _row(2, 40.0)])
    assert stall is not None and stall.pid == 1 and stall.how == "spinning"
    assert "cc1plus 1 (f1.cc)" in stall.describe("Press d.")
    # Progress moves: no stall, and the clock starts again.
    assert watch.observe(102.0, (0.6, 7, 12, None, None), [_row(1, 99.0)]) is None
    assert watch.observe(150.0, (0.6, 7, 12, None, None), [_row(1, 99.0)]) is None
    # A process that only just started spinning is not to blame.
    watch = StallWatch(threshold_s=100.0, changed_at=0.0)
    watch.observe(10.0, key, [_row(1, 10.0)])
    assert watch.observe(120.0, key, [_row(1, 99.0)]) is None
    # Disk wait the whole time: blocked.
    watch = StallWatch(threshold_s=100.0)
    watch.observe(0.0, key, [_row(3, 0.0, "D")])
    stall = watch.observe(130.0, key, [_row(3, 0.0, "D")])
    assert stall is not None and stall.how == "blocked"
    # Everything idle the whole time.
    watch = StallWatch(threshold_s=100.0)
    watch.observe(0.0, key, [_row(4, 0.0, "S"), _row(5, 0.0, "S")])
    stall = watch.observe(130.0, key, [_row(4, 0.0, "S"), _row(5, 0.0, "S")])
    assert stall is not None and stall.how == "idle"


def test_last_progress_change_from_samples() -> None:
    from workbench.history.records import Sampled

    def sample(t: float, fraction: float | None) -> Sampled:
        return Sampled(t, 50.0, 1.0, t, 10**8, 10**9, 3, 1, 0, 0, fraction)

    assert last_progress_change([]) is None
    samples = [sample(0, 0.1), sample(1, 0.2), sample(2, 0.2), sample(3, 0.2)]
    assert last_progress_change(samples) == 1
