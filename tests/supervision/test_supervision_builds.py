"""Real builds through the real CLI: the fixture C++ project built by cmake's ninja files.

What must hold: progress counts equal ninja's; `kill -9` of the launching CLI (or a closed
terminal) leaves the build running to the end with every line of its log and a finished row;
`stop` leaves no process behind; a second launch in the same checkout is refused unless
`--force`; an OOM-like kill is told apart; two builds compare in `report`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import subprocess
import termios
import threading
from pathlib import Path

import psutil
import pytest
from monitor.cxx_project import needs_cxx_tools
from supervised import (
    Bench,
    build_id_from,
    lose_supervision,
    ninja_log_outputs,
    ninja_steps,
    token_processes,
)

from workbench.history.records import KILLED, LOST, STOPPED, SUCCEEDED
from workbench.supervision.lock import is_held

pytestmark = [needs_cxx_tools]


def _compiling(bench: Bench, build_id: int) -> list[dict]:
    """The compile jobs the supervisor's live view shows now."""
    live = bench.record(build_id).live or {}
    return [job for job in live.get("jobs", []) if job["kind"] == "compiler" and job["file"]]


def _tree(record) -> dict[int, float]:
    """PID -> start time of every process of a build now (root, descendants, group)."""
    found: dict[int, float] = {}
    root = psutil.Process(record.build_pid)
    for process in [root, *root.children(recursive=True)]:
        try:
            found[process.pid] = process.create_time()
        except psutil.Error:
            continue
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == record.pgid:
                found[process.pid] = process.create_time()
        except (OSError, psutil.Error):
            continue
    return found


def _alive(pid: int, started: float) -> bool:
    try:
        process = psutil.Process(pid)
        return (
            abs(process.create_time() - started) < 0.05 and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


@pytest.mark.slow
def test_two_builds_measured_and_compared(bench: Bench, cxx_project: tuple[Path, Path]) -> None:
    checkout, build = cxx_project
    first = bench.run(
        "run", "--name", "fixture", "--", "ninja", "-C", str(build), "-j1", cwd=checkout
    )
    assert first.returncode == 0, first.stderr
    one = build_id_from(first.stderr)
    log_one = bench.record(one).log_path
    outputs = ninja_log_outputs(build)

    clean = subprocess.run(
        ["ninja", "-C", str(build), "-t", "clean"], capture_output=True, check=False
    )
    assert clean.returncode == 0
    second = bench.run(
        "run", "--name", "fixture", "--", "ninja", "-C", str(build), "-j2", cwd=checkout
    )
    assert second.returncode == 0, second.stderr
    two = build_id_from(second.stderr)

    # The CLI printed the log while following; the file holds the same, byte for byte.
    assert Path(log_one).read_text() == first.stdout
    # Progress counts equal ninja's: every edge ninja ran, [1/N] .. [N/N].
    steps = ninja_steps(first.stdout)
    total = len(outputs)
    assert steps == [(n, total) for n in range(1, total + 1)]
    for build_id in (one, two):
        record = bench.record(build_id)
        assert record.state == SUCCEEDED and record.exit_status == 0
        step = record.progress["step"]
        assert (step["tool"], step["done"], step["total"]) == ("ninja", total, total)
        assert record.progress["fraction"] == 1.0

    history = bench.json("history", "--json")
    by_id = {b["id"]: b for b in history["builds"]}
    assert by_id[one]["jobs"] == 1 and by_id[two]["jobs"] == 2
    for build_id in (one, two):
        measured = by_id[build_id]["measurements"]
        assert measured["peak_rss"] > 10 * 1024**2
        assert measured["peak_job_rss"]["compiler"] > 10 * 1024**2
        assert measured["cpu_seconds"] > 1.0
        slowest = [job["file"] for job in measured["slowest"]]
        assert any("heavy_" in file for file in slowest[:3]), slowest
        seen = {(group["kind"], group["tool"]) for group in measured["processes_seen"]}
        assert ("compiler", "cc1plus") in seen and ("driver", "ninja") in seen
    assert by_id[one]["measurements"]["most_jobs"] == 1
    assert by_id[two]["measurements"]["most_jobs"] == 2

    status = bench.json("status", "--json")
    assert status["running"] == []
    assert [b["id"] for b in status["recent"][:2]] == [two, one]

    table = bench.run("report", str(one), str(two), timeout=60)
    assert table.returncode == 0, table.stderr
    assert f"| Metric | #{one} fixture (j1) | #{two} fixture (j2) | Change |" in table.stdout
    assert "| Build time |" in table.stdout and "| Compile jobs at once (most) | 1 | 2 | +1 |" in (
        table.stdout
    )
    (bench.state / "report.md").write_text(table.stdout)  # kept for the closing note
    as_json = bench.json("report", str(one), str(two), "--format", "json")
    assert [row["key"] for row in as_json["table"]][:4] == ["command", "jobs", "outcome", "wall_s"]


@pytest.mark.slow
def test_kill_9_of_the_cli_leaves_the_build_running(
    bench: Bench, cxx_project: tuple[Path, Path]
) -> None:
    checkout, build = cxx_project
    cli = bench.start("run", "--name", "k9", "--", "ninja", "-C", str(build), "-j1", cwd=checkout)
    build_id = bench.wait_for(
        "the build to run",
        lambda: (r := _first(bench)) is not None and r.state == "running" and r.lines > 1 and r.id,
        timeout=60,
    )
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait(timeout=10)
    assert cli.returncode == -signal.SIGKILL
    assert bench.record(build_id).active  # still building without its CLI
    record = bench.wait_ended(build_id, timeout=180)
    assert record.state == SUCCEEDED and record.exit_status == 0, record.note
    log = Path(record.log_path).read_text()
    total = len(ninja_log_outputs(build))
    assert ninja_steps(log) == [(n, total) for n in range(1, total + 1)]
    assert log.rstrip().endswith("Linking CXX executable fixture_main")
    assert record.lines == len(log.splitlines())
    # The supervisor held the checkout's lock; it is free once the supervisor exits.
    bench.wait_for("the lock to be free", lambda: not is_held(bench.state, record.checkout), 20)
    assert bench.json("history", "--json")["builds"][0]["measurements"]["samples"] >= 2


def _first(bench: Bench):
    if not (bench.state / "history.sqlite3").exists():
        return None
    with bench.history() as history:
        builds = history.builds(limit=1)
    return builds[0] if builds else None


def test_closing_the_terminal_loses_no_line(bench: Bench, tmp_path: Path) -> None:
    """The CLI runs on a pseudo-terminal as its session leader; the terminal goes away."""
    # The build holds after line 5 until the terminal is gone: on a loaded machine it could
    # otherwise end first, and its CLI exit 0 before the terminal closed.
    script = (
        "i=0; while [ $i -lt 30 ]; do echo line $i; "
        "if [ $i -eq 5 ]; then while [ ! -e go ]; do sleep 0.05; done; fi; "
        "i=$((i+1)); sleep 0.05; done; "
        "printf 'no newline at the end'"
    )
    master, slave = pty.openpty()

    def controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    cli = bench.start(
        "run",
        "--name",
        "hup",
        "--",
        "sh",
        "-c",
        script,
        cwd=tmp_path,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        text=False,
        preexec_fn=controlling_terminal,
    )
    os.close(slave)
    build_id = bench.wait_for(
        "the build to run", lambda: (r := _first(bench)) is not None and r.lines > 2 and r.id, 60
    )
    os.close(master)  # the terminal is gone: the kernel sends SIGHUP to the session
    cli.wait(timeout=20)
    # SIGHUP ends it (or, racing it, a write to the vanished terminal): either way it is gone.
    assert cli.returncode != 0
    assert bench.record(build_id).active
    (tmp_path / "go").touch()
    record = bench.wait_ended(build_id, timeout=60)
    assert record.state == SUCCEEDED
    expected = "".join(f"line {i}\n" for i in range(30)) + "no newline at the end"
    assert Path(record.log_path).read_text() == expected
    logs = bench.run("logs", str(build_id), timeout=60)
    assert logs.stdout == expected + "\n"


@pytest.mark.slow
def test_stop_leaves_no_process_behind(bench: Bench, cxx_project: tuple[Path, Path]) -> None:
    checkout, build = cxx_project
    started = bench.run(
        "run",
        "-d",
        "--name",
        "stopme",
        "--",
        "ninja",
        "-C",
        str(build),
        "-j2",
        cwd=checkout,
        timeout=60,
    )
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    bench.wait_for("compilers to run", lambda: _compiling(bench, build_id), timeout=60)
    record = bench.record(build_id)
    processes = _tree(record)
    assert len(processes) >= 3  # ninja, g++ (or c++), cc1plus
    supervisor = (record.supervisor_pid, psutil.Process(record.supervisor_pid).create_time())

    result = bench.run("stop", str(build_id), "--grace", "5", timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"no process of build #{build_id} is left" in result.stderr
    record = bench.record(build_id)
    assert record.state == STOPPED and "stop requested" in (record.note or "")
    assert not any(_alive(pid, t) for pid, t in processes.items()), processes
    assert not [p for p in psutil.process_iter() if _in_group(p, record.pgid)]
    bench.wait_for("the supervisor to exit", lambda: not _alive(*supervisor), timeout=20)
    assert token_processes(bench.token) == []


def _in_group(process: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE
    except (OSError, psutil.Error):
        return False


@pytest.mark.slow
def test_second_launch_is_refused_unless_forced(bench: Bench, tmp_path: Path) -> None:
    # The first build holds its one edge until the test removes `hold`, so it is still running
    # when the second and the forced launch look, however slow the machine (a real build of the
    # fixture project could end before a loaded machine had started the second CLI).
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)  # a checkout root, as the lock sees it
    (checkout / "src").mkdir()
    hold = checkout / "hold"
    hold.touch()
    (checkout / "build.ninja").write_text(
        "rule held\n  command = while [ -e hold ]; do sleep 0.05; done; : > $out\n"
        "build done: held\n"
    )
    first = bench.run("run", "-d", "--name", "first", "--", "ninja", "-j1", cwd=checkout)
    assert first.returncode == 0, first.stderr
    first_id = build_id_from(first.stderr)
    bench.wait_for("ninja to run", lambda: bench.record(first_id).build_pid, timeout=60)
    try:
        refused = bench.run("run", "--name", "second", "--", "true", cwd=checkout / "src")
        assert refused.returncode == 2
        assert f"build #{first_id} (first) is already building {checkout}" in refused.stderr
        assert "--force" in refused.stderr

        forced = bench.run(
            "run", "--force", "--verbose", "--name", "second", "--", "true", cwd=checkout
        )
        assert forced.returncode == 0, forced.stderr
        # The preflight says it in one line; --verbose names the first build's processes.
        assert "other build process(es) run on this host" in forced.stderr
        ninja_pid = bench.record(first_id).build_pid
        # It lists the first eight: on a host busy with other builds ninja may be past them.
        assert f"pid {ninja_pid} ninja (driver, user " in forced.stderr or re.search(
            r"^  \.\.\. and \d+ more$", forced.stderr, re.MULTILINE
        ), forced.stderr
        second_id = build_id_from(forced.stderr.split("starting anyway")[-1])
        assert bench.record(second_id).state == SUCCEEDED
        assert bench.record(first_id).active  # held all along
    finally:
        hold.unlink()
    assert bench.wait_ended(first_id, timeout=120).state == SUCCEEDED


def test_oom_like_kill_is_told_apart(bench: Bench, tmp_path: Path) -> None:
    result = bench.run("run", "--name", "oom", "--", "sh", "-c", "kill -9 $$", cwd=tmp_path)
    assert result.returncode == 128 + signal.SIGKILL
    record = bench.record(build_id_from(result.stderr))
    assert record.state == KILLED and record.signal == signal.SIGKILL
    assert record.note is not None and record.note.startswith("killed (OOM?)")
    assert "peak" in record.note and record.note.endswith(("MiB", "GiB"))


def test_a_failure_says_what_failed(bench: Bench, tmp_path: Path) -> None:
    script = "echo 'FAILED: CMakeFiles/t.dir/conv.cc.o'; exit 3"
    result = bench.run("run", "--name", "broken", "--", "sh", "-c", script, cwd=tmp_path)
    assert result.returncode == 3
    assert "failed after" in result.stderr and "FAILED: CMakeFiles/t.dir/conv.cc.o" in (
        result.stderr
    )


def test_a_vanished_supervisor_is_reported_lost(bench: Bench, tmp_path: Path) -> None:
    started = bench.run(
        "run", "-d", "--name", "orphan", "--", "sleep", "60", cwd=tmp_path, timeout=60
    )
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    record = bench.record(build_id)
    sleeper = (record.build_pid, psutil.Process(record.build_pid).create_time())
    # Its keeper too: the supervisor alone is replaced (test_outlives_supervisor.py).
    lose_supervision(bench, build_id)

    status = bench.json("status", "--json")
    lost = next(b for b in status["recent"] if b["id"] == build_id)
    assert lost["state"] == LOST
    assert f"supervisor (pid {record.supervisor_pid}) is gone" in lost["note"]
    assert "1 of its processes still run: sleep (" in lost["note"]
    assert _alive(*sleeper)
    # `stop` still ends what it left behind.
    stop = bench.run("stop", str(build_id), "--grace", "2", timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert not _alive(*sleeper)


def test_stop_kills_what_ignores_term_and_what_escaped_the_group(
    bench: Bench, tmp_path: Path
) -> None:
    """TERM is ignored (and inherited as ignored by sleep); a grandchild left the group with
    setsid and was orphaned: KILL after the grace period reaches both."""
    script = "trap '' TERM; (setsid sleep 61 &); sleep 60"
    started = bench.run(
        "run", "-d", "--name", "stubborn", "--", "sh", "-c", script, cwd=tmp_path, timeout=60
    )
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)

    def named(*argv: str) -> list[psutil.Process]:
        found = []
        for process in token_processes(bench.token):
            with contextlib.suppress(psutil.Error):  # it may end between listing and asking
                if process.cmdline()[: len(argv)] == list(argv):
                    found.append(process)
        return found

    def escaped() -> list[psutil.Process]:
        return named("sleep", "61")

    orphan = bench.wait_for("the escaped sleep", escaped, timeout=30)[0]
    record = bench.record(build_id)
    assert os.getpgid(orphan.pid) != record.pgid  # outside the build's process group
    # Orphaned: re-parented to the supervisor, its child subreaper, not to init.
    assert orphan.ppid() == record.supervisor_pid

    result = bench.run("stop", str(build_id), "--grace", "1", timeout=60)
    assert result.returncode == 0, result.stderr
    record = bench.record(build_id)
    assert record.state == STOPPED
    assert "ended by KILL after the grace period" in (record.note or "")
    assert not escaped()
    assert not named("sleep")


@pytest.mark.slow  # the real CLI in a pty, its supervisor and build, then `attach`: 5 s
def test_ctrl_c_detaches_and_attach_follows_to_the_end(bench: Bench, tmp_path: Path) -> None:
    # The build holds after step 10 until the test lets it go: on a loaded machine the CLI may
    # take seconds to show the first lines and to act on Ctrl-C, and a build that ran on by
    # itself could end before the CLI detached from it.
    script = (
        'i=1; while [ $i -le 40 ]; do echo "[$i/40] step $i"; '
        "if [ $i -eq 10 ]; then while [ ! -e go ]; do sleep 0.05; done; fi; "
        "i=$((i+1)); sleep 0.1; done"
    )
    cli = bench.start("run", "--name", "detach", "--", "sh", "-c", script, cwd=tmp_path)
    assert cli.stdout is not None and cli.stderr is not None
    shown: list[str] = []
    reader = threading.Thread(target=lambda: shown.extend(cli.stdout), daemon=True)
    reader.start()
    build_id = bench.wait_for(
        "the build to run", lambda: (r := _first(bench)) is not None and r.lines > 2 and r.id, 30
    )
    # What the CLI printed, not a time: it shows the log's lines as it polls them.
    bench.wait_for("the CLI to show two lines", lambda: len(shown) >= 2, 60)
    cli.send_signal(signal.SIGINT)  # what Ctrl-C in its terminal does
    cli.wait(timeout=20)
    reader.join(timeout=20)
    out, err = "".join(shown), cli.stderr.read()
    assert out.startswith("[1/40] step 1\n[2/40] step 2\n"), out  # it followed live
    assert cli.returncode == 0, err
    assert f"detached; build #{build_id} keeps running" in err
    assert f"attach {build_id}`" in err
    assert bench.record(build_id).active
    (tmp_path / "go").touch()

    attached = bench.run("attach", str(build_id), timeout=60)
    assert attached.returncode == 0, attached.stderr
    assert attached.stdout.rstrip().endswith("[40/40] step 40")
    assert f"build #{build_id} (detach) succeeded" in attached.stderr
    logs = bench.run("logs", str(build_id), "--follow", timeout=60)
    assert logs.stdout == "".join(f"[{i}/40] step {i}\n" for i in range(1, 41))
    assert logs.stdout.startswith(out)  # before Ctrl-C the CLI showed the log's first lines


def _attached_live(bench: Bench, build_id: int) -> tuple[subprocess.Popen[str], list[str]]:
    """`attach ID` of a running build, started and seen following (its first line said) before
    anything ends the build; returns it and what it says on stderr, read as it comes."""
    attach = bench.start("attach", str(build_id))
    assert attach.stderr is not None
    said: list[str] = []
    threading.Thread(target=lambda: said.extend(attach.stderr), daemon=True).start()
    bench.wait_for(
        "attach to follow the running build",
        lambda: any(f"attached to build #{build_id}" in line for line in said),
        60,
    )
    return attach, said


@pytest.mark.slow  # eight CLIs and four supervised builds: about 10 s
def test_attach_after_the_end_exits_as_following_it_live(bench: Bench, tmp_path: Path) -> None:
    """Each way a build ends: `attach` of the ended build exits with what following it live
    exited with (before: 0 whatever the end, a failed build's included)."""
    live: dict[str, tuple[int, int]] = {}  # end -> (build id, the live follow's exit status)
    for end, script in (("succeeded", "true"), ("failed", "exit 3"), ("killed", "kill -9 $$")):
        followed = bench.run("run", "--name", end, "--", "sh", "-c", script, cwd=tmp_path)
        live[end] = (build_id_from(followed.stderr), followed.returncode)
    for end in ("stopped", "lost"):
        started = bench.run("run", "-d", "--name", end, "--", "sleep", "60", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        build_id = build_id_from(started.stderr)
        bench.wait_for("the build to run", lambda i=build_id: bench.record(i).build_pid, 60)
        attach, said = _attached_live(bench, build_id)
        if end == "stopped":
            stopped = bench.run("stop", str(build_id), "--grace", "5", timeout=60)
            assert stopped.returncode == 0, stopped.stderr
        else:
            lose_supervision(bench, build_id)
        live[end] = (build_id, attach.wait(timeout=60))
        assert f"build #{build_id} ({end})" in "".join(said)
    assert {end: code for end, (_, code) in live.items()} == {
        "succeeded": 0,
        "failed": 3,
        "killed": 128 + signal.SIGKILL,
        "stopped": live["stopped"][1],
        "lost": live["lost"][1],
    }
    assert live["stopped"][1] != 0 and live["lost"][1] != 0
    for end, (build_id, code) in live.items():
        assert bench.record(build_id).state == end
        attached = bench.run("attach", str(build_id), timeout=60)
        assert attached.returncode == code, (end, attached.stderr)
        assert f"build #{build_id} ({end}) {end}" in attached.stderr, attached.stderr


@pytest.mark.slow  # two supervised builds, four CLIs: about 8 s
def test_logs_follow_of_an_ended_build_exits_as_following_it_live(
    bench: Bench, tmp_path: Path
) -> None:
    """`logs --follow` of a build that already ended: its whole log, then how it ended and its
    exit status, as following it live gives (before: 0 whatever the end, where following the
    same build live exited 3). Without --follow, `logs` reports: the log and 0."""
    # The build holds after its first line until the test lets it go: `logs --follow` is seen
    # following it live (the line shown) before it can end.
    script = 'echo "[1/2] one"; while [ ! -e go ]; do sleep 0.05; done; echo "[2/2] two"; exit 3'
    started = bench.run("run", "-d", "--name", "failing", "--", "sh", "-c", script, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    live = bench.start("logs", str(build_id), "--follow")
    assert live.stdout is not None
    shown: list[str] = []
    reader = threading.Thread(target=lambda: shown.extend(live.stdout), daemon=True)
    reader.start()
    bench.wait_for("`logs --follow` to show the running build's first line", lambda: shown, 60)
    (tmp_path / "go").touch()
    assert live.wait(timeout=60) == 3
    reader.join(timeout=10)
    assert "".join(shown) == "[1/2] one\n[2/2] two\n"

    after = bench.run("logs", str(build_id), "--follow", timeout=60)
    assert after.returncode == 3, after.stderr
    assert after.stdout == "".join(shown)
    assert f"build #{build_id} (failing) failed" in after.stderr, after.stderr
    plain = bench.run("logs", str(build_id), timeout=60)
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, after.stdout, "")

    killed = bench.run("run", "--name", "killed", "--", "sh", "-c", "kill -9 $$", cwd=tmp_path)
    assert killed.returncode == 128 + signal.SIGKILL, killed.stderr
    killed_id = build_id_from(killed.stderr)
    followed = bench.run("logs", str(killed_id), "--follow", timeout=60)
    assert followed.returncode == 128 + signal.SIGKILL, followed.stderr
    assert f"build #{killed_id} (killed) killed" in followed.stderr, followed.stderr
    assert bench.run("logs", str(killed_id), timeout=60).returncode == 0


@pytest.mark.slow  # one supervised build, two CLIs: about 4 s
def test_logs_follow_raw_of_a_running_build_gives_the_bytes_as_written(
    bench: Bench, tmp_path: Path
) -> None:
    """`logs --follow --raw` of a running build: the log's bytes as the build wrote them (a Nix
    @nix line, an escape, a byte that is not UTF-8), not the readable lines `logs --follow`
    shows (before: --raw was ignored while the build ran, and the readable form came out)."""
    (tmp_path / "first").write_bytes(
        b'@nix {"action":"msg","level":0,"msg":"evaluating"}\n'
        b"plain \x1b[31mred\x1b[0m and \xff not UTF-8\n"
    )
    script = 'cat first; while [ ! -e go ]; do sleep 0.05; done; echo "[2/2] two"'
    started = bench.run("run", "-d", "--name", "raw", "--", "sh", "-c", script, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    live = bench.start("logs", str(build_id), "--follow", "--raw", text=False)
    assert live.stdout is not None
    shown: list[bytes] = []
    reader = threading.Thread(target=lambda: shown.extend(live.stdout), daemon=True)
    reader.start()
    bench.wait_for("`logs --follow --raw` to show the running build's first lines", lambda: shown)
    assert bench.record(build_id).active  # followed live, not read after its end
    (tmp_path / "go").touch()
    assert live.wait(timeout=60) == 0
    reader.join(timeout=10)
    log = bench.record(build_id).log_path
    assert b"".join(shown) == Path(log).read_bytes()
    assert b"".join(shown).startswith((tmp_path / "first").read_bytes())
