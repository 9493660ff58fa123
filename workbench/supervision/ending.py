"""How a build ended, from what its supervisor saw: its state and the words of its note."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

from workbench.history.records import (
    FAILED,
    KILLED,
    LOST,
    STOPPED,
    SUCCEEDED,
    BuildRecord,
    BuildState,
)
from workbench.host.units import duration

if TYPE_CHECKING:
    from workbench.progress import Progress
    from workbench.supervision.pipeline import LogPipeline


def gaps_note(gaps: list[tuple[float, float]], ended_in_gap: float) -> str:
    """The time this supervisor did not observe, in words ("" when none)."""
    if not gaps:
        return ""
    total = sum(seconds for _, seconds in gaps)
    count = "1 pause" if len(gaps) == 1 else f"{len(gaps)} pauses"
    said = (
        f"not observed for {duration(total)} in {count} (its supervisor did not run: "
        "stopped or starved; no samples then, so sampled figures miss it)"
    )
    if ended_in_gap:
        said += (
            f"; the build ended during a pause: its wall time may be up to "
            f"{duration(ended_in_gap)} too long"
        )
    return said


def samples_note(samples_lost: int, samples_taken: int) -> str:
    """What of the samples the history lacks, in words ("" when none)."""
    if not samples_lost:
        return ""
    return (
        f"samples lost: {samples_lost} of {samples_taken} could not be written to "
        "the history (its disk was full); the measurements include them"
    )


def outcome(
    stop_reason: str | None,
    stop_phase: str | None,
    root_unknown: bool,
    exit_status: int | None,
    signum: int | None,
    summary: Any,
    pipeline: LogPipeline,
    progress: Progress,
) -> tuple[BuildState, str | None]:
    from workbench.analysis.build_peaks import oom_note

    if stop_reason is not None:
        how = "KILL after the grace period" if stop_phase == "kill" else "TERM"
        return STOPPED, f"{stop_reason}; ended by {how}"
    if root_unknown:
        return LOST, (
            "it ended while neither its supervisor nor its keeper was there: its exit "
            "status was not seen"
        )
    if exit_status == 0:
        return SUCCEEDED, None
    if signum == signal.SIGKILL or exit_status == 137:
        return KILLED, oom_note(summary)
    if pipeline.killed_compilers:
        # ninja/make exit 1 when a compiler dies; gcc says why.
        killed = pipeline.killed_compilers[-1].strip()
        return (
            FAILED,
            f"exit {exit_status}: a compiler was killed ({killed}): {oom_note(summary)}",
        )
    if signum is not None:
        return KILLED, f"killed by {signal.Signals(signum).name}"
    # The failure's summary first: Nix's own `error:` line, else the compiler's first error
    # (what a person scrolls the log for); then which derivations or targets failed.
    parts = [progress.first_error] if progress.first_error else []
    if progress.failed_derivations:
        parts.append("failed derivations: " + ", ".join(progress.failed_derivations[:3]))
    elif progress.step_failures:
        parts.append("FAILED: " + ", ".join(progress.step_failures[-3:]))
    return FAILED, f"exit {exit_status}" + (": " + "; ".join(parts) if parts else "")


def adoption_text(record: BuildRecord) -> str:
    """What became of lost supervisors, in words ("" when one saw the whole build): "adopted
    after its supervisor (pid 123) was lost; 1.2s unobserved (sampled figures miss it)"."""
    if not record.adopted:
        return ""
    lost = ", ".join(str(entry.get("lost_pid")) for entry in record.adopted)
    times = "once" if len(record.adopted) == 1 else f"{len(record.adopted)} times"
    return (
        f"adopted {times} after its supervisor was lost (pid {lost}); "
        f"{duration(record.unobserved_s)} unobserved (sampled figures miss it)"
    )
