"""`workbench bt`'s speed work, on real gdb and real programs: gdb started before the command
line is parsed (and adopted by the capture), and gdb's index cache, written for the libraries
and the program a capture reads so that the next capture reads an index instead of DWARF."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from debug_programs import BRIDGE, FIXTURES, run_tool

from workbench.debugging.capture import proc_threads
from workbench.debugging.capture.activity_tracker import ActivityTracker
from workbench.debugging.capture.loop import _watch_and_sample, capture
from workbench.debugging.capture.options import IDLE_LOOK_S, CaptureOptions
from workbench.debugging.capture.symbols import read_elf
from workbench.debugging.diagnosis.verdict import diagnose
from workbench.debugging.gdb import gdb_start
from workbench.debugging.gdb.gdb_session import GdbSession, find_gdb


def _workbench(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _gdbs_using(directory: Path) -> list[int]:
    """gdb processes whose command line names `directory` (this test's index cache)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z" and any(str(directory).encode() in word for word in words):
            found.append(int(entry.name))
    return found


def test_bt_words_that_start_gdb_early() -> None:
    def read(*words: str) -> tuple[int | None, str | None, tuple[str, ...]]:
        found = gdb_start.bt_words(list(words))
        return found.pid, found.gdb, found.debug_dirs

    assert read("1234") == (1234, None, ())
    assert read("1234", "--gdb", "cuda-gdb") == (1234, "cuda-gdb", ())
    assert read("--gdb=/opt/gdb", "--json", "77") == (77, "/opt/gdb", ())
    assert read("--debug-dir", "/d1", "5", "--debug-dir=~/d2") == (
        5,
        None,
        ("/d1", os.path.expanduser("~/d2")),
    )
    assert read("1234", "--help") == (None, None, ())
    assert read("--samples", "x") == (None, None, ())
    assert read("1234", "--gdb")[0] is None
    assert read("1234", "--debug-dir")[0] is None


def test_index_cache_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WORKBENCH_GDB_INDEX_CACHE", str(tmp_path / "c"))
    argv = gdb_start.gdb_command("gdb")
    assert argv[-4:] == [
        "-iex",
        f"set index-cache directory {tmp_path / 'c'}",
        "-iex",
        "set index-cache enabled on",
    ]
    # --readnever reads no DWARF: nothing to index.
    readnever = gdb_start.gdb_command("gdb", symbols_only=True)
    assert not any("index-cache" in word for word in readnever)
    monkeypatch.setenv("WORKBENCH_GDB_INDEX_CACHE", "off")
    assert not any("index-cache" in word for word in gdb_start.gdb_command("gdb"))
    monkeypatch.delenv("WORKBENCH_GDB_INDEX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gdb_start.index_cache_directory() == str(tmp_path / "xdg" / "workbench" / "gdb-index")


def test_early_gdb_is_adopted_only_when_it_is_the_gdb_wanted(tmp_path: Path) -> None:
    gdb = find_gdb()
    gdb_start.start_early(["4242", "--gdb", gdb])
    early = gdb_start.take_early(gdb)
    assert early is not None and early.process.poll() is None
    assert early.preloaded is None or not Path("/proc/4242").exists()
    process = early.process
    with GdbSession(gdb, started=process) as session:
        assert session.pid == process.pid
        assert session.command("-list-features").ok
    assert process.poll() is not None
    assert gdb_start.take_early(gdb) is None  # taken once
    # Another gdb wanted (a different --gdb): the early one is ended, not adopted.
    other = tmp_path / "other-gdb"
    other.symlink_to("/bin/true")
    gdb_start.start_early(["4242", "--gdb", gdb])
    early = gdb_start._early
    assert early is not None
    assert gdb_start.take_early(str(other)) is None
    assert early.process.poll() is not None


class RecordingSession(GdbSession):
    """A real gdb session that keeps every MI command sent to it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[str] = []

    def send(self, commands: list[str]) -> dict[int, str]:
        self.sent += commands
        return super().send(commands)


def _gdb_argv(pid: int) -> list[str]:
    """gdb's argv, once the kernel shows it (right after the start it may read empty)."""
    deadline = time.monotonic() + 10
    while not (words := Path(f"/proc/{pid}/cmdline").read_bytes()):
        assert time.monotonic() < deadline, "gdb's command line stayed empty"
        time.sleep(0.01)
    return [word.decode() for word in words.rstrip(b"\0").split(b"\0")]


def test_the_early_gdb_reads_the_program_and_the_capture_does_not_ask_again(
    start, programs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As `gdb -p PID` does, the early gdb is given the program on its command line, with the
    # debug directories the capture would give it: it reads the symbols while Python imports.
    monkeypatch.setenv("NIX_DEBUG_INFO_DIRS", str(tmp_path / "nix-debug"))
    program = start("bridge_o2", "2", settle=0.3)
    gdb = find_gdb()
    gdb_start.start_early([str(program.pid), "--debug-dir", str(tmp_path / "given")])
    early = gdb_start.take_early(gdb)
    assert early is not None
    executable = str(programs["bridge_o2"].resolve())
    directories = (str(tmp_path / "given"), str(tmp_path / "nix-debug"), "/usr/lib/debug")
    assert early.preloaded == (executable, directories)
    argv = _gdb_argv(early.process.pid)
    assert argv[-1] == executable
    assert f"set debug-file-directory {':'.join(directories)}" in argv
    session = RecordingSession(gdb, started=early.process, preloaded=early.preloaded)
    options = CaptureOptions(samples=1, debug_dirs=(str(tmp_path / "given"),))
    captured = capture(program.pid, options, session=session)
    assert not any(command.startswith("-file-exec-and-symbols") for command in session.sent)
    assert not any("debug-file-directory" in command for command in session.sent)
    assert diagnose(captured).primary.kind == "call-cycle"
    assert captured.samples[0].threads[0].frames[0].file  # DWARF read: file:line known

    # Told other directories than the capture's (here: none given on the command line), the
    # capture tells gdb its own and has the program read again.
    gdb_start.start_early([str(program.pid)])
    early = gdb_start.take_early(gdb)
    assert early is not None and early.preloaded is not None
    session = RecordingSession(gdb, started=early.process, preloaded=early.preloaded)
    captured = capture(program.pid, options, session=session)
    assert f"-gdb-set debug-file-directory {':'.join(directories)}" in session.sent
    assert any(command.startswith("-file-exec-and-symbols") for command in session.sent)
    assert diagnose(captured).primary.kind == "call-cycle"


def test_no_program_to_read_when_the_pid_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    gdb_start.start_early([str(gone.pid)])
    early = gdb_start.take_early(find_gdb())
    assert early is not None and early.preloaded is None
    assert _gdb_argv(early.process.pid)[-1].startswith("set ")  # no program named
    early.process.kill()
    early.process.wait()


def test_bt_writes_and_then_reads_the_index_cache(start, programs, tmp_path: Path) -> None:
    cache = tmp_path / "index-cache"
    env = {**os.environ, "WORKBENCH_GDB_INDEX_CACHE": str(cache)}
    program = start("bridge_o2", "2", settle=0.3)
    facts = read_elf(programs["bridge_o2"])
    assert facts is not None and facts.build_id
    done = _workbench("bt", str(program.pid), env=env)
    assert done.returncode == 0, done.stderr
    assert "Diagnosis: call cycle (tail-calls) — HUNG" in done.stdout
    written = {path.name for path in cache.iterdir()}
    # The program's own index is there, and its libraries' (libc's, at least).
    assert f"{facts.build_id}.gdb-index" in written
    assert len(written) >= 2
    # The next capture reads them: the same diagnosis, no index rewritten.
    stamps = {path.name: path.stat().st_mtime_ns for path in cache.iterdir()}
    again = _workbench("bt", str(program.pid), env=env)
    assert again.returncode == 0, again.stderr
    assert "Diagnosis: call cycle (tail-calls) — HUNG" in again.stdout
    assert {path.name: path.stat().st_mtime_ns for path in cache.iterdir()} == stamps
    assert program.state() in ("R", "S")  # left running (its main thread waits in a join)
    # bt leaves without the interpreter's teardown and without waiting for its detached
    # gdb, which was told to exit: it does, by itself.
    deadline = time.monotonic() + 10
    while _gdbs_using(cache) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gdbs_using(cache) == []


def test_bt_with_the_index_cache_off_writes_none(start, tmp_path: Path) -> None:
    env = {**os.environ, "WORKBENCH_GDB_INDEX_CACHE": "off", "XDG_CACHE_HOME": str(tmp_path)}
    program = start("lock_order", settle=0.3)
    done = _workbench("bt", str(program.pid), env=env)
    assert done.returncode == 0, done.stderr
    assert "Diagnosis: deadlock — HUNG" in done.stdout
    assert not (tmp_path / "workbench").exists()


def test_a_bad_option_after_the_early_start_leaves_no_gdb(start, tmp_path: Path) -> None:
    cache = tmp_path / "unique-cache-name"
    env = {**os.environ, "WORKBENCH_GDB_INDEX_CACHE": str(cache)}
    program = start("lock_order", settle=0.1)
    done = _workbench("bt", str(program.pid), "--no-such-option", env=env)
    assert done.returncode == 2
    assert "unrecognized arguments: --no-such-option" in done.stderr
    deadline = time.monotonic() + 10
    while _gdbs_using(cache) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gdbs_using(cache) == []
    assert program.state() in ("S", "R")


def test_the_bridges_other_side_is_read_from_the_binary_not_stepped(start) -> None:
    # Eight threads in the loop: their counters show the stub calling Provider_GetHost; the
    # host method (a single jump, never sampled) is disassembled instead of stepping one
    # thread through the loop.
    program = start("bridge_o2", "8", settle=0.4)
    for _ in range(2):
        captured = capture(program.pid, CaptureOptions(samples=1))
        diagnosis = diagnose(captured)
        assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, diagnosis.summary
        assert "8 threads are caught in this loop" in diagnosis.summary
        if not captured.bridge_code:  # no thread's counters caught the stub's call: stepped
            assert any(thread.trail for thread in captured.samples[0].threads)
            continue
        read = captured.bridge_code["onnxruntime::DataTypeImpl::GetType<float>"]
        assert read["host_method"] == "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float"
        assert not any(thread.trail for thread in captured.samples[0].threads)
        bridge = diagnosis.primary.bridge
        assert (bridge.host_method, bridge.counterpart) == (
            "ProviderHostImpl::DataTypeImpl__GetType_float",
            "DataTypeImpl::GetType<float>",
        )
        assert "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float" in (
            diagnosis.primary.functions
        )
        assert any(
            "is `jmp 0x" in line and "in the binary (read with gdb, not stepped)" in line
            for line in diagnosis.primary.evidence
        ), diagnosis.primary.evidence
    assert program.state() in ("R", "S")


def test_a_stack_stopped_in_provider_gethost_is_read_from_the_binary_not_stepped(
    start, tmp_path: Path
) -> None:
    # The counters show the stub's call only where one thread was read in the stub and in
    # Provider_GetHost in one run of the loop; two rounds of 64 threads on a busy machine
    # are often one moment read twice, and no thread showed it: one thread was stepped
    # (half a second under cuda-gdb). gdb's stack of a thread stopped in Provider_GetHost
    # shows the same call. Here Provider_GetHost spins a while each call (SLOW_HOST), so
    # the threads are nearly always there: their counters never see the stub, their stacks
    # show it calling Provider_GetHost, and the host method is read instead of stepped.
    binary = tmp_path / "bridge_o2_slow_host"
    run_tool(
        "g++", "-O2", "-DSLOW_HOST", "-g", "-pthread", f"-I{FIXTURES}",
        *(str(FIXTURES / source) for source in BRIDGE), "-o", str(binary),
    )  # fmt: skip
    program = start(str(binary), "2", settle=0.3)
    captured = capture(program.pid, CaptureOptions(samples=1))
    in_host = [
        thread
        for thread in captured.samples[0].threads
        if thread.frames and thread.frames[0].function == "onnxruntime::Provider_GetHost"
    ]
    assert in_host, [t.frames[:2] for t in captured.samples[0].threads]
    assert in_host[0].frames[1].function == "onnxruntime::DataTypeImpl::GetType<float>"
    read = captured.bridge_code.get("onnxruntime::DataTypeImpl::GetType<float>")
    assert read is not None, captured.bridge_code
    assert read["host_method"] == "onnxruntime::ProviderHostImpl::DataTypeImpl__GetType_float"
    assert not [thread.tid for thread in captured.samples[0].threads if thread.trail]
    diagnosis = diagnose(captured)
    assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, diagnosis.summary
    assert diagnosis.primary.bridge is not None
    assert diagnosis.primary.bridge.counterpart == "DataTypeImpl::GetType<float>"
    assert "2 threads are caught in this loop" in diagnosis.summary
    assert any(
        "in the binary (read with gdb, not stepped)" in line for line in diagnosis.primary.evidence
    ), diagnosis.primary.evidence


@pytest.mark.slow
def test_64_threads_in_the_bridge_loop_step_one_thread(start) -> None:
    # Two program-counter rounds of 64 threads: a few threads are caught in Provider_GetHost
    # both times (no stub seen above it), and were a group of their own, stepped as well; on
    # a busy machine both rounds can be one moment, and no thread's counters show the bridge:
    # the groups by place (the stub, Provider_GetHost) were stepped each. Now a stack stopped
    # in Provider_GetHost shows the stub's call too, and the host method is read instead; one
    # thread is stepped only where neither did. Each step of a thread among 64 spinning ones
    # costs a share of two cores.
    program = start("bridge_o2", "64", settle=1.0)
    for _ in range(2):
        captured = capture(program.pid, CaptureOptions(samples=1))
        diagnosis = diagnose(captured)
        assert diagnosis.kind == "call-cycle" and diagnosis.hung is True, diagnosis.summary
        assert "64 threads are caught in this loop" in diagnosis.summary
        assert diagnosis.primary.bridge.counterpart == "DataTypeImpl::GetType<float>"
        stepped = [thread for thread in captured.samples[0].threads if thread.trail]
        # One stepped; none where the bridge's other side was read from the binary.
        assert len(stepped) == (0 if captured.bridge_code else 1), [t.tid for t in stepped]
    assert program.state() in ("R", "S")


def test_while_only_gdb_is_awaited_proc_is_looked_at_seldom(start) -> None:
    # A look at /proc reads every thread's stat and wchan (64 threads: 128 files), and was
    # taken every 7.5 ms for as long as gdb loaded: CPU taken from gdb on a busy machine.
    # Once nothing is left to sample, the watch waits on gdb's answer between looks.
    program = start("many_threads", "8", settle=0.2)
    tracker = ActivityTracker(program.pid, proc_threads.PROC)
    with GdbSession(find_gdb()) as session:
        loading = session.send(['-interpreter-exec console "shell sleep 0.4"'])
        began = time.monotonic()
        alive, _ = _watch_and_sample(
            tracker,
            0.12,
            CaptureOptions(),
            partial(session.answered, loading),
            partial(session.wait_answered, loading),
        )
        waited = time.monotonic() - began
        assert session.answered(loading)  # it ended because gdb answered, not before
    assert alive and waited >= 0.4
    looks = max(entry.observations for entry in tracker.activity.values())
    assert 3 <= looks <= waited / IDLE_LOOK_S + 6, (looks, waited)  # before: over 300


def test_the_spawned_process_acts_as_popen_where_the_session_uses_it() -> None:
    # The early gdb is spawned without subprocess (its import delayed gdb's start by up to
    # 14 ms): its stand-in for Popen must pipe, poll, wait, time out and kill as Popen does.
    echo = gdb_start.SpawnedProcess(["/bin/sh", "-c", "read line; echo got $line; exit 3"])
    assert echo.poll() is None
    echo.stdin.write(b"words\n")
    assert echo.stdout.read(64) == b"got words\n"
    assert echo.wait(timeout=10) == 3 and echo.poll() == 3
    sleeper = gdb_start.SpawnedProcess(["/bin/sleep", "30"])
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.05)
    sleeper.kill()
    assert sleeper.wait(timeout=10) == -9
    for process in (echo, sleeper):
        for stream in (process.stdin, process.stdout, process.stderr):
            stream.close()
    with pytest.raises(FileNotFoundError):
        gdb_start.SpawnedProcess(["/no/such/gdb"])
