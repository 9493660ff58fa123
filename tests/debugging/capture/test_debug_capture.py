"""Capture and diagnosis of real hung (and not hung) programs, with real gdb."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_states import wait_for_state

from workbench.debugging.capture.loop import capture
from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.debug_errors import (
    GdbNotFoundError,
    ProcessGoneError,
    PtraceDeniedError,
    ZombieError,
)
from workbench.debugging.diagnosis.verdict import diagnose
from workbench.debugging.gdb.gdb_session import GdbSession, find_gdb

FAST = {"samples": 3, "interval": 0.1, "observe": 0.1}


def test_bridge_loop_at_o2_is_a_tail_call_loop_named_in_the_bridges_terms(start) -> None:
    program = start("bridge_o2", settle=0.2)
    captured = capture(program.pid, CaptureOptions(**FAST))
    diagnosis = diagnose(captured)

    # It really is a flat loop at -O2: every sample has the same shallow stack depth range
    # beneath main, and both sides of the bridge were seen: the host method read from the
    # binary (a jump to the stub its counters showed calling Provider_GetHost), or, where
    # the counters did not show that, stepping went through both.
    depths = {len(sample.threads[0].frames) for sample in captured.samples}
    assert max(depths) <= 4
    trail = set(captured.samples[-1].threads[0].trail)
    read = captured.bridge_code.get("onnxruntime::DataTypeImpl::GetType<float>")
    if read:
        assert read["host_method"] == "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float"
        assert read["instruction"].startswith("jmp 0x")
        assert read["instruction"].endswith(" <onnxruntime::DataTypeImpl::GetType<float>>")
        assert not trail
    else:
        assert "onnxruntime::DataTypeImpl::GetType<float>" in trail
        assert "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float" in trail

    assert diagnosis.kind == "call-cycle"
    assert diagnosis.primary.pattern == "tail-calls"
    assert diagnosis.hung is True
    assert diagnosis.primary.bridge is not None
    assert diagnosis.primary.bridge.host_method == "ProviderHostImpl::DataTypeImpl__GetType_float"
    assert diagnosis.primary.bridge.counterpart == "DataTypeImpl::GetType<float>"
    assert diagnosis.summary.startswith(
        "ProviderHostImpl::DataTypeImpl__GetType_float calls DataTypeImpl::GetType<float> "
        "which calls back through Provider_GetHost(): the provider bridge loops on itself"
    )
    assert diagnosis.proposed_patch is not None
    assert "#ifndef ORT_STATIC_PROVIDERS" in diagnosis.proposed_patch.snippet
    assert diagnosis.proposed_patch.file.endswith("provider_bridge_provider.cc")
    # Left running, as found.
    assert program.state() == "R"


def test_bridge_loop_at_o0_is_deep_recursion(start) -> None:
    program = start("bridge_o0", settle=0.3)
    captured = capture(program.pid, CaptureOptions(**FAST))
    diagnosis = diagnose(captured)

    assert diagnosis.kind == "call-cycle"
    assert diagnosis.primary.pattern == "recursion"
    assert diagnosis.hung is True
    loop_thread = captured.samples[-1].thread(diagnosis.primary.threads[0])
    assert loop_thread is not None and loop_thread.truncated
    assert set(diagnosis.primary.functions) == {
        "onnxruntime::DataTypeImpl::GetType<float>",
        "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float",
    }
    assert diagnosis.primary.bridge is not None
    assert any("repeats" in item for item in diagnosis.primary.evidence)
    assert any("grew from" in item for item in diagnosis.primary.evidence)


def test_static_initialisation_deadlock(start) -> None:
    program = start("static_init_deadlock", ready=False, settle=0.3)
    captured = capture(program.pid, CaptureOptions(**FAST))
    diagnosis = diagnose(captured)

    assert diagnosis.kind == "static-init"
    assert diagnosis.hung is True
    assert len(diagnosis.primary.threads) == 2
    assert diagnosis.summary.startswith("static-initialisation deadlock before main")
    assert "registry_instance()::instance" in diagnosis.summary
    assert "pthread_join" in diagnosis.summary
    assert {"Registry::Registry", "registry_instance"} <= set(diagnosis.primary.functions)
    assert program.state() == "S"


def test_lock_order_deadlock_names_both_threads_and_mutexes(start) -> None:
    program = start("lock_order", settle=0.3)
    captured = capture(program.pid, CaptureOptions(**FAST))
    diagnosis = diagnose(captured)

    assert diagnosis.kind == "deadlock"
    assert diagnosis.hung is True
    workers = [t.tid for t in captured.samples[-1].threads if t.wait and t.wait.kind == "mutex"]
    assert sorted(diagnosis.primary.threads) == sorted(workers) and len(workers) == 2
    assert set(diagnosis.primary.functions) == {
        "update_cache_then_session",
        "update_session_then_cache",
    }
    summary = diagnosis.summary
    assert "holds mutex cache_mutex and waits for mutex session_mutex" in summary
    assert "holds mutex session_mutex and waits for mutex cache_mutex" in summary


def test_busy_program_is_not_called_hung(start) -> None:
    program = start("busy", settle=0.2)
    captured = capture(program.pid, CaptureOptions(**FAST))
    diagnosis = diagnose(captured)

    assert diagnosis.kind == "busy"
    assert diagnosis.hung is False
    assert not any(finding.hung for finding in diagnosis.findings)
    assert len(diagnosis.primary.threads) >= 3


def test_process_exiting_mid_capture_keeps_partial_samples(start) -> None:
    program = start("short_lived", "1000")
    captured = capture(program.pid, CaptureOptions(samples=30, interval=0.1, observe=0.05))

    assert not captured.complete and captured.exited
    assert 1 <= len(captured.samples) < 30
    assert any("exited during the capture" in note for note in captured.notes)
    diagnosis = diagnose(captured)
    assert any(finding.kind == "exited" for finding in diagnosis.findings)


def test_a_stopped_process_stays_stopped_and_a_running_one_keeps_running(start) -> None:
    stopped = start("many_threads", "2")
    running = start("many_threads", "2")
    os.kill(stopped.pid, signal.SIGSTOP)
    # The stop takes effect when the kernel delivers it: wait for state T, not a pause.
    assert wait_for_state(stopped.pid, {"T"}) == "T"

    result = capture(stopped.pid, CaptureOptions(samples=2, interval=0.05, observe=0.05))
    assert any("left stopped" in note for note in result.notes)
    assert len(result.samples[-1].threads) == 3
    capture(running.pid, CaptureOptions(samples=2, interval=0.05, observe=0.05))

    # Left as found: the stopped one stays T (a SIGCONT would have made it S or R at once),
    # the running one goes back to waiting for its threads (S): a process left stopped (T)
    # or traced (t) never gets there. Its state is waited for, as the detach's wake-up may
    # show it runnable (R) for a moment.
    assert stopped.state() == "T"
    assert wait_for_state(running.pid, {"S"}) == "S"
    assert stopped.state() == "T"
    os.kill(stopped.pid, signal.SIGCONT)


def test_zombie_is_refused_naming_its_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import os, sys, time
                child = os.fork()
                if child == 0:
                    os._exit(0)
                print(child, flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None
        zombie = int(parent.stdout.readline())
        deadline = time.monotonic() + 5
        while Path(f"/proc/{zombie}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with pytest.raises(ZombieError) as error:
            capture(zombie, CaptureOptions(samples=1))
        message = str(error.value)
        assert "zombie" in message and f"process {parent.pid} (python" in message
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


def test_ptrace_refused_by_the_kernel_is_explained(start, tmp_path: Path) -> None:
    setpriv = subprocess.run(["which", "setpriv"], capture_output=True, text=True).stdout.strip()
    if not setpriv or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to run gdb as another user")
    # gdb as `nobody` may not trace our (root's) process: a real EPERM from the kernel.
    wrapper = tmp_path / "gdb-as-nobody"
    wrapper.write_text(
        f'#!/bin/sh\nexec {setpriv} --reuid=65534 --regid=65534 --clear-groups {find_gdb()} "$@"\n'
    )
    wrapper.chmod(0o755)
    program = start("many_threads", "2")
    with pytest.raises(PtraceDeniedError) as error:
        capture(program.pid, CaptureOptions(samples=1, gdb=str(wrapper), observe=0.0))
    message = str(error.value)
    assert "ptrace not permitted" in message
    assert "gdb said: ptrace: Operation not permitted." in message
    assert "to allow it:" in message
    assert program.state() == "S"


def test_a_failed_attach_is_read_from_the_mi_error_record() -> None:
    # gdb answers ^error and keeps running (and would exit 0): the error must be read from MI.
    gone = subprocess.Popen(["true"])
    gone.wait()
    with GdbSession(find_gdb()) as session:
        result = session.command(f"-target-attach {gone.pid}", check=False)
    assert not result.ok
    assert "No such process" in result.error
    with pytest.raises(ProcessGoneError):
        capture(gone.pid, CaptureOptions(samples=1))


def test_missing_gdb_says_how_to_install_and_cuda_gdb_is_accepted(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GdbNotFoundError) as error:
        find_gdb()
    assert "apt-get install gdb" in str(error.value)
    cuda_gdb = tmp_path / "cuda-gdb"
    cuda_gdb.write_text("#!/bin/sh\n")
    cuda_gdb.chmod(0o755)
    assert find_gdb() == str(cuda_gdb)
    with pytest.raises(GdbNotFoundError):
        find_gdb("/no/such/gdb")


def test_slow_gdb_falls_back_to_symbols_only(start) -> None:
    program = start("lock_order", settle=0.3)
    # A limit no attach can meet stands in for a huge binary whose DWARF takes minutes.
    captured = capture(program.pid, CaptureOptions(samples=1, attach_timeout=0.01, observe=0.05))

    assert captured.symbols_only
    assert any("fell back to ELF symbols only" in note for note in captured.notes)
    frames = [frame for thread in captured.samples[0].threads for frame in thread.frames]
    assert frames and all(frame.line is None for frame in frames)
    assert diagnose(captured).kind == "deadlock"
    # Not left stopped (T) or traced (t) by the killed gdb: back to waiting (S), which a
    # process left stopped never reaches (its wake-up may show R for a moment first).
    assert wait_for_state(program.pid, {"S"}) == "S"


def test_interactive_gdb_command_loads_no_init_files() -> None:
    from workbench.debugging.gdb.gdb_session import interactive_command

    argv = interactive_command(1234)
    assert argv[0] == find_gdb() and argv[-2:] == ["-p", "1234"]
    assert "--nx" in argv and "set auto-load off" in argv


def test_a_deep_steady_stack_asleep_is_asleep_not_a_hung_recursion(start) -> None:
    """Issue 29: f↔g recursion 20,000 deep, then sleep(): "call cycle (recursion) — HUNG,
    unbounded recursion" at 0% CPU in nanosleep, with the stack steady across samples."""
    program = start("deep_sleep")
    assert wait_for_state(program.pid, {"S"}) == "S"
    captured = capture(program.pid, CaptureOptions(samples=3, interval=0.1, observe=0.3))
    diagnosis = diagnose(captured)
    assert diagnosis.kind == "asleep", (
        diagnosis.summary,
        [(t.state, t.stack_bytes, t.functions()[:3]) for s in captured.samples for t in s.threads],
        captured.activity,
    )
    assert diagnosis.hung is False
    assert diagnosis.summary.startswith("asleep at depth more than "), diagnosis.summary
    assert "not hung" in diagnosis.summary
    assert set(diagnosis.primary.functions) == {"f", "g"}
    assert not any("More samples" in line for line in diagnosis.primary.evidence)
