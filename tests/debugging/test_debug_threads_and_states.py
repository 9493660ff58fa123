"""Every thread's verdict, and the process states told apart: real programs, real gdb.

- 1, 8 and 64 threads spinning in the bridge loop: the headline and every spinning
  thread's verdict say the same (call cycle, hung), with stepping and without it;
- a stopped process is "stopped", not "waits for something outside it";
- a program that exits as gdb attaches, run many times: never a ptrace refusal, exit 1;
- debug-bt tells a program that ended by itself from one the workbench stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from workbench.cli.main import main
from workbench.debugging import procfs
from workbench.debugging.capture import CaptureOptions, _raise_attach_error, capture
from workbench.debugging.diagnosis import diagnose
from workbench.debugging.errors import ProcessExitedError


def _spinning_verdicts(program, **options):
    """Capture and diagnose; every spinning thread must carry the headline's verdict."""
    captured = capture(program.pid, CaptureOptions(samples=1, **options))
    diagnosis = diagnose(captured)
    assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, diagnosis.summary
    assert diagnosis.primary.bridge is not None
    verdicts = diagnosis.thread_verdicts()
    main_tid = program.pid
    spinning = [t.tid for t in captured.samples[0].threads if t.tid != main_tid]
    assert spinning
    for tid in spinning:
        finding = verdicts.get(tid)
        assert finding is diagnosis.primary, (tid, finding and finding.summary)
    # The main thread waits in pthread_join: never called busy, never "not hung".
    assert all(finding.hung is not False for finding in diagnosis.findings)
    return captured, diagnosis


@pytest.mark.parametrize("threads", [1, 8])
def test_every_spinning_thread_gets_the_headlines_verdict(start, threads: int) -> None:
    program = start("bridge_o2", str(threads), settle=0.4)
    captured, diagnosis = _spinning_verdicts(program)
    assert captured.pc_rounds >= 4
    assert len(captured.pc_samples) >= threads
    assert f"{threads} threads are caught in this loop" in diagnosis.summary or threads == 1
    time.sleep(0.05)
    assert program.state() in ("S", "R")  # left running, not stopped (T) or traced (t)


@pytest.mark.slow
def test_64_threads_in_one_loop_without_stepping(start) -> None:
    # Stepping off: the program counters alone (registers, not stacks) must find the loop
    # in every thread; before, 8 were stepped and the rest were called "busy… not hung".
    program = start("bridge_o2", "64", settle=1.0)
    captured, diagnosis = _spinning_verdicts(program, step_probe=0)
    assert not any(thread.trail for thread in captured.samples[0].threads)
    assert len(diagnosis.primary.threads) == 64
    assert "64 threads are caught in this loop" in diagnosis.summary
    assert diagnosis.primary.bridge.counterpart == "DataTypeImpl::GetType<float>"


def test_cycle_without_stepping_is_still_a_cycle(start) -> None:
    # Four threads in the loop, no stepping: once their program counters catch
    # Provider_GetHost entered from the stub (at a steady stack depth) the bridge is named
    # for all four; without it, never "not hung".
    program = start("bridge_o2", "4", settle=0.4)
    for _ in range(3):
        captured = capture(program.pid, CaptureOptions(samples=1, step_probe=0))
        diagnosis = diagnose(captured)
        assert all(finding.hung is not False for finding in diagnosis.findings)
        caught = any(
            hit.function == "onnxruntime::Provider_GetHost"
            for hits in captured.pc_samples.values()
            for hit in hits
        )
        if caught:
            assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, diagnosis.summary
            assert len(diagnosis.primary.threads) == 4
        else:  # gdb's stacks may still show the host method; never a verdict of progress
            assert diagnosis.kind in ("spin", "call-cycle"), diagnosis.summary


def test_one_thread_without_stepping_is_never_called_not_hung(start) -> None:
    # One thread's samples may never leave the stub (the host method is a single jump):
    # then it is a spin that cannot be judged, or the cycle, but never "not hung".
    program = start("bridge_o2", settle=0.3)
    for _ in range(3):
        diagnosis = diagnose(capture(program.pid, CaptureOptions(samples=1, step_probe=0)))
        assert diagnosis.kind in ("call-cycle", "spin"), diagnosis.summary
        assert all(finding.hung is not False for finding in diagnosis.findings)


def test_a_stopped_process_is_said_to_be_stopped(start, capsys) -> None:
    program = start("many_threads", "2")
    os.kill(program.pid, signal.SIGSTOP)
    time.sleep(0.1)
    assert main(["bt", str(program.pid)]) == 0
    out = capsys.readouterr().out
    assert "Diagnosis: process stopped by a signal — cannot tell" in out
    assert f"kill -CONT {program.pid}" in out
    assert "waits for something outside it" not in out
    assert program.state() == "T"
    os.kill(program.pid, signal.SIGCONT)


def test_an_exit_during_the_attach_is_not_a_ptrace_refusal() -> None:
    # What the kernel answers when the task is gone by the time gdb attaches.
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(ProcessExitedError) as error:
        _raise_attach_error(gone.pid, "ptrace: Operation not permitted.", procfs.PROC)
    assert "exited while gdb was attaching" in str(error.value)


@pytest.mark.slow
def test_programs_exiting_around_the_attach_many_times(start, capsys) -> None:
    # Lifetimes spread across the watch and the attach: each run ends in one of the true
    # outcomes (captured, or exited: exit 1 saying so), never a ptrace or SELinux story.
    outcomes = []
    for lifetime in [20, 40, 60, 80, 100, 120, 140, 160, 200, 260, 320, 400] * 2:
        program = start("short_lived", str(lifetime))
        status = main(["bt", str(program.pid), "--json"])
        captured = capsys.readouterr()
        text = captured.out + captured.err
        assert status in (0, 1), text
        assert "ptrace not permitted" not in text and "SELinux" not in text, text
        document = json.loads(captured.out)
        if status == 1:
            assert document["exited"] is True
        outcomes.append(status)
        program.process.wait(timeout=10)
    assert 1 in outcomes  # some really did exit part-way


def test_debug_bt_tells_a_program_that_ended_by_itself(programs, capsys) -> None:
    argv = ["debug-bt", "--after", "0.05", "--samples", "40", "--interval", "0.05", "--json"]
    status = main([*argv, "--", str(programs["short_lived"]), "1500"])
    document = json.loads(capsys.readouterr().out)
    assert status == 1
    assert document["program"]["ended_by_itself"] is True
    assert document["program"]["status"] == "exit status 0"
    assert document["exited"] is True
