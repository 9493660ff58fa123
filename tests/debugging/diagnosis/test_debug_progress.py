"""Issue 29: `bt` says "busy, making progress" and "livelock" for real programs, with real gdb."""

from __future__ import annotations

import os

from workbench.cli.main import main
from workbench.debugging.capture.loop import capture
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.diagnosis.verdict import diagnose


def test_a_prime_printer_is_busy_making_progress(start) -> None:
    """Computing primes and printing one every 0.1 s: was "call cycle (tail-calls) — HUNG" or
    "spinning — cannot tell"; its output advances between the looks at /proc."""
    program = start("primes")
    captured = capture(program.pid, CaptureOptions(samples=3, interval=0.2, observe=0.3))
    diagnosis = diagnose(captured)
    activity = captured.activity[program.pid]
    assert diagnosis.kind == "busy" and diagnosis.hung is False, (diagnosis.summary, activity)
    assert activity.io["wchar"] > 0 and activity.io["syscw"] > 0
    assert any(f"wrote {activity.io['wchar']} bytes" in line for line in diagnosis.primary.evidence)


def test_polite_threads_yielding_for_ever_are_a_livelock(start, capsys) -> None:
    """Two threads that try the other's lock, give way, unlock and yield, for ever: was
    "spinning — cannot tell" for each; through the real `workbench bt`."""
    program = start("livelock")
    workers = sorted(int(tid) for tid in os.listdir(f"/proc/{program.pid}/task"))[1:]
    assert len(workers) == 2
    assert main(["bt", str(program.pid), "--samples", "3"]) == 0
    out = capsys.readouterr().out
    assert "Diagnosis: livelock — HUNG" in out, out
    assert "without progress" in out.split("livelock: ", 1)[1].splitlines()[0]
    evidence = out.split("evidence:", 1)[1].split("Threads in sample", 1)[0]
    for tid in workers:
        assert f"LWP {tid}" in evidence, out
