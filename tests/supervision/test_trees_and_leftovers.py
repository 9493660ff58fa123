"""Locks keyed on the trees a build writes and held while any of its processes lives; what
outlives a build is listed, kept true, and ended by `stop`; `report` of a lost build.

Real `workbench run` against real ninja and sh; the supervisor is killed with SIGKILL where a
test needs a lost build.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from needed_tools import needs_ninja
from supervised import Bench, build_id_from, lose_supervision

from workbench.history.records import LOST, SUCCEEDED
from workbench.supervision import build_cgroup


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _runs(bench: Bench, build_id: int, name: str) -> bool:
    """Whether a process called `name` runs below the build's root."""
    try:
        root = psutil.Process(bench.record(build_id).build_pid or 0)
        return any(child.name() == name for child in root.children(recursive=True))
    except psutil.Error:
        return False


def _slow_ninja_tree(root: Path) -> Path:
    """A checkout whose build/ holds a build.ninja with one edge that takes 60 s."""
    (root / ".git").mkdir(parents=True)
    build = root / "build"
    build.mkdir()
    (build / "build.ninja").write_text(
        "rule slow\n  command = sleep 60 && touch $out\nbuild out: slow\n"
    )
    return build


def _kill_supervisor(bench: Bench, build_id: int) -> None:
    """Lose the build: its keeper and its supervisor (the supervisor alone is replaced)."""
    lose_supervision(bench, build_id)


@needs_ninja
def test_a_build_tree_named_with_dash_c_is_locked_from_anywhere(
    bench: Bench, tmp_path: Path
) -> None:
    checkout = tmp_path / "other"
    build = _slow_ninja_tree(checkout)
    first = bench.run("run", "-d", "--name", "first", "--", "ninja", "-C", "build", cwd=checkout)
    assert first.returncode == 0, first.stderr
    first_id = build_id_from(first.stderr)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = bench.run("run", "--", "ninja", "-C", str(build), cwd=elsewhere, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("workbench: error: ")
    assert f"build #{first_id} (first) is already building" in refused.stderr
    # An unrelated tree is free.
    free = bench.run("run", "--", "true", cwd=elsewhere, timeout=60)
    assert free.returncode == 0, free.stderr
    assert bench.run("stop", str(first_id), "--grace", "2").returncode == 0


@needs_ninja
def test_two_build_trees_named_with_dash_c_from_one_checkout_both_build(
    bench: Bench, tmp_path: Path
) -> None:
    """From one shell in a checkout, `ninja -C` of two build trees outside it are two builds of
    two trees: the second starts (it was refused, the shell's checkout locked by the first),
    and a third of the first tree is still refused."""
    shell = tmp_path / "shell"
    (shell / ".git").mkdir(parents=True)
    first_tree = _slow_ninja_tree(tmp_path / "one")
    second_tree = _slow_ninja_tree(tmp_path / "two")
    started = []
    for tree in (first_tree, second_tree):
        done = bench.run("run", "-d", "--", "ninja", "-C", str(tree), cwd=shell, timeout=60)
        assert done.returncode == 0, done.stderr
        started.append(build_id_from(done.stderr))
    refused = bench.run("run", "--", "ninja", "-C", str(first_tree), cwd=shell, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert f"build #{started[0]} " in refused.stderr and "is already building" in refused.stderr
    for build_id in started:
        assert bench.run("stop", str(build_id), timeout=60).returncode == 0


@needs_ninja
def test_a_lost_build_whose_processes_run_keeps_its_tree_until_stopped(
    bench: Bench, tmp_path: Path
) -> None:
    """The supervisor is killed; ninja and its `sleep` hold copies of the lock descriptors, so
    the tree stays locked (two ninjas never write the same objects) until `stop` ends them."""
    checkout = tmp_path / "checkout"
    _slow_ninja_tree(checkout)
    first = bench.run("run", "-d", "--name", "first", "--", "ninja", "-C", "build", cwd=checkout)
    assert first.returncode == 0, first.stderr
    build_id = build_id_from(first.stderr)
    bench.wait_for("the compile step to run", lambda: _runs(bench, build_id, "sleep"), 30)
    _kill_supervisor(bench, build_id)
    refused = bench.run("run", "--", "ninja", "-C", "build", cwd=checkout, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert f"build #{build_id} (first) has ended (lost), but" in refused.stderr
    assert "still run and hold" in refused.stderr and "ninja (" in refused.stderr
    assert bench.record(build_id).state == LOST

    stop = bench.run("stop", str(build_id), "--grace", "2", timeout=60)
    assert stop.returncode == 0, stop.stderr
    record = bench.record(build_id)
    assert "still run" not in (record.note or ""), record.note
    accepted = bench.run("run", "--", "true", cwd=checkout, timeout=60)
    assert accepted.returncode == 0, accepted.stderr


def test_a_daemon_that_outlives_the_build_is_listed_and_stopped(
    bench: Bench, tmp_path: Path
) -> None:
    """A build that succeeds leaving a daemon (its own session, output closed): the note names
    it, the checkout stays locked while it runs, and `stop` ends it."""
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    # The build ends once its daemon is `sleep` (setsid has exec'd it): the supervisor names
    # what outlived the build as it finds it, and under load it could still be `setsid`. The
    # shell waits for that, bounded only against a daemon that never execs (about 2 min).
    script = (
        "setsid sleep 61 </dev/null >/dev/null 2>&1 & pid=$!; n=0; "
        'while [ "$(cat /proc/$pid/comm 2>/dev/null)" != sleep ] && [ $n -lt 12000 ]; '
        "do n=$((n+1)); sleep 0.01; done; exit 0"
    )
    result = bench.run("run", "--name", "daemonic", "--", "sh", "-c", script, cwd=checkout)
    assert result.returncode == 0, result.stderr
    build_id = build_id_from(result.stderr)
    record = bench.record(build_id)
    assert record.state == SUCCEEDED
    assert len(record.outlived) == 1 and record.outlived[0]["name"] == "sleep"
    daemon = record.outlived[0]["pid"]
    assert _alive(daemon)
    assert f"1 of its processes still run: sleep ({daemon})" in (record.note or "")
    assert f"`workbench stop {build_id}` ends them" in (record.note or "")

    refused = bench.run("run", "--", "true", cwd=checkout, timeout=60)
    assert refused.returncode == 2
    assert f"build #{build_id} (daemonic) has ended (succeeded), but sleep ({daemon})" in (
        refused.stderr
    )

    stop = bench.run("stop", str(build_id), "--grace", "2", timeout=60)
    assert stop.returncode == 0, stop.stderr
    # It lists what it ends, and never says "nothing to stop" while it ends something.
    assert f"1 of its processes outlived it: sleep ({daemon}); ending them" in stop.stderr
    assert "nothing to stop" not in stop.stderr
    assert not _alive(daemon)
    record = bench.record(build_id)
    assert record.outlived == () and "still run" not in (record.note or "")
    assert bench.run("run", "--", "true", cwd=checkout, timeout=60).returncode == 0


def _release(bench: Bench, fifo: Path) -> None:
    """Write a line to a FIFO a shell of the build reads: an open without blocking succeeds
    once the shell has opened its end (ENXIO until then)."""

    def opened() -> int | None:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return None

    writer = bench.wait_for("the build's shell to open the FIFO", opened, timeout=30)
    os.write(writer, b"go\n")
    os.close(writer)


def test_a_lost_builds_note_stops_saying_processes_run_once_they_exited(
    bench: Bench, tmp_path: Path
) -> None:
    # The build waits on a FIFO until the test lets it go (a fixed `sleep 3` could end on a
    # loaded machine before the status below looked at it).
    hold = tmp_path / "hold"
    os.mkfifo(hold)
    script = f"read line < {hold}"
    started = bench.run("run", "-d", "--name", "brief", "--", "sh", "-c", script, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    waiter = bench.record(build_id).build_pid or 0
    try:
        _kill_supervisor(bench, build_id)
        status = bench.json("status", "--json")
        lost = next(b for b in status["recent"] if b["id"] == build_id)
        assert lost["state"] == LOST and f"sh ({waiter})" in lost["note"]
        assert _alive(waiter)
        _release(bench, hold)
        bench.wait_for("the waiting shell to exit", lambda: not _alive(waiter), timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            if _alive(waiter):
                os.kill(waiter, signal.SIGKILL)
    status = bench.json("status", "--json")
    lost = next(b for b in status["recent"] if b["id"] == build_id)
    assert "still run" not in lost["note"] and "no build process is left" not in lost["note"]
    assert lost["outlived"] == []


def test_report_of_a_lost_build_uses_its_stored_samples(bench: Bench, tmp_path: Path) -> None:
    started = bench.run("run", "-d", "--name", "sampled", "--", "sleep", "30", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)

    def sampled() -> bool:
        with bench.history() as history:
            return len(history.samples(build_id)) >= 2

    bench.wait_for("two samples", sampled, timeout=30)
    _kill_supervisor(bench, build_id)
    bench.json("status", "--json")  # marks it lost
    report = bench.run("report", str(build_id), timeout=60)
    assert report.returncode == 0, report.stderr
    assert "nothing measured" not in report.stdout
    assert "measured from its" in report.stdout and "stored samples" in report.stdout
    document = bench.json("report", str(build_id), "--format", "json")
    build = document["builds"][0]
    assert build["measurements_from"] == "samples"
    assert build["measurements"]["samples"] >= 2 and build["measurements"]["peak_rss"] > 0
    assert bench.run("stop", str(build_id), "--grace", "1").returncode == 0
    time.sleep(0)  # nothing left to wait for: stop ended the sleeper


def _cgroup_of(bench: Bench, build_id: int) -> Path | None:
    return build_cgroup.recorded(Path(bench.record(build_id).log_path))


def _supervisor_log(bench: Bench, build_id: int) -> str:
    return Path(bench.record(build_id).log_path).with_name("supervisor.log").read_text()


def _is_sleep(pid: int) -> bool:
    try:
        return psutil.Process(pid).name() == "sleep"
    except psutil.Error:
        return False


needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0, reason="making a cgroup needs root (the suite runs as root in CI)"
)


@needs_cgroups
def test_a_process_that_escapes_everything_but_its_cgroup_is_found_and_stopped(
    bench: Bench, tmp_path: Path
) -> None:
    """A daemon that leaves the session (setsid), clears its environment (env -i, so no marker)
    and is re-parented away once the supervisor is killed: only the build's cgroup still knows
    it. The lost build keeps its checkout locked, and `stop` lists and ends it."""
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    pid_file = tmp_path / "daemon.pid"
    script = (
        f"( setsid env -i /bin/sh -c 'echo $$ > {pid_file}; exec sleep 62' "
        "</dev/null >/dev/null 2>&1 & ); exec sleep 60"
    )
    started = bench.run("run", "-d", "--name", "escaper", "--", "sh", "-c", script, cwd=checkout)
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    bench.wait_for("the daemon to start", lambda: pid_file.exists() and pid_file.read_text(), 30)
    daemon = int(pid_file.read_text())
    try:
        bench.wait_for("the daemon to be sleep", lambda: _is_sleep(daemon), 30)
        cgroup = _cgroup_of(bench, build_id)
        if cgroup is None:
            pytest.skip("no cgroup could be made here: " + _supervisor_log(bench, build_id))
        assert daemon in build_cgroup.members(cgroup)
        assert "WORKBENCH_BUILD" not in psutil.Process(daemon).environ()  # no marker
        # Double-forked: an orphan, re-parented to the supervisor (the subreaper), and to
        # whatever reaps orphans above it once the supervisor is gone.
        supervisor = bench.record(build_id).supervisor_pid
        assert psutil.Process(daemon).ppid() == supervisor
        _kill_supervisor(bench, build_id)
        bench.wait_for(
            "the daemon's re-parenting", lambda: psutil.Process(daemon).ppid() != supervisor, 30
        )

        refused = bench.run("run", "--", "true", cwd=checkout, timeout=60)
        assert refused.returncode == 2, refused.stderr
        assert f"sleep ({daemon})" in refused.stderr

        stop = bench.run("stop", str(build_id), "--grace", "2", timeout=60)
        assert stop.returncode == 0, stop.stderr
        assert f"sleep ({daemon})" in stop.stderr
        assert not _alive(daemon)
        assert not cgroup.exists()  # removed once empty
        assert bench.run("run", "--", "true", cwd=checkout, timeout=60).returncode == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)


@needs_cgroups
def test_a_build_that_leaves_nothing_leaves_no_cgroup(bench: Bench, tmp_path: Path) -> None:
    result = bench.run("run", "--", "sh", "-c", "cat /proc/self/cgroup", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    build_id = build_id_from(result.stderr)
    log = Path(bench.record(build_id).log_path)
    name = build_cgroup._name(log)
    if name not in log.read_text():
        pytest.skip("no cgroup could be made here: " + _supervisor_log(bench, build_id))
    # The build ran inside its cgroup; once it ended with nothing left, the cgroup is gone.
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{name}")) + list(
        Path("/sys/fs/cgroup").glob(name)
    )
    assert not log.with_name(build_cgroup.RECORD_NAME).exists()


@needs_cgroups
def test_a_workbench_build_inside_a_workbench_build_is_still_the_outer_ones(
    bench: Bench, tmp_path: Path
) -> None:
    """The inner build's cgroup is nested in the outer build's: the outer one's members
    include it (a stop of the outer build must reach the inner build's processes too)."""
    inner_state = tmp_path / "inner-state"
    script = (
        f"{sys.executable} -m workbench --state-dir {inner_state} run -d -- sleep 63; exec sleep 64"
    )
    started = bench.run("run", "-d", "--name", "outer", "--", "sh", "-c", script, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    outer_id = build_id_from(started.stderr)
    outer = _cgroup_of(bench, outer_id)
    if outer is None:
        pytest.skip("no cgroup could be made here: " + _supervisor_log(bench, outer_id))
    inner_sleep = bench.wait_for(
        "the inner build's sleep",
        lambda: next(
            (
                p.pid
                for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] == ["sleep", "63"]
            ),
            None,
        ),
        60,
    )
    try:
        nested = [d for d in outer.iterdir() if d.is_dir() and d.name.startswith("workbench-")]
        assert nested, "the inner build's cgroup is not below the outer one's"
        assert inner_sleep in build_cgroup.members(outer)
        stop = bench.run("stop", str(outer_id), "--grace", "2", timeout=60)
        assert stop.returncode == 0, stop.stderr
        bench.wait_for("the inner build's sleep to end", lambda: not _alive(inner_sleep), 30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(inner_sleep, signal.SIGKILL)


@needs_cgroups
def test_an_empty_cgroup_a_killed_supervisor_left_is_removed_by_the_next_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing else would remove it (its build's row may never be looked at again); one that
    still holds a process, or that is too young to be abandoned, stays.

    The test names its cgroups with a prefix of its own: with the age limit at 0 the cleanup
    would otherwise remove every empty build cgroup of this user, including the one a
    concurrent build's supervisor has just made and not entered yet (other test runs on this
    host run as the same user). Other builds' cleanups, which match the real prefix, leave
    the test's cgroups alone in turn."""
    monkeypatch.setattr(build_cgroup, "PREFIX", f"workbench-test{os.getpid()}-")

    def log(number: int) -> Path:
        folder = tmp_path / "builds" / str(number)
        folder.mkdir(parents=True, exist_ok=True)
        return folder / "build.log"

    abandoned, why = build_cgroup.create(log(1))
    if abandoned is None:
        pytest.skip(f"no cgroup could be made here: {why}")
    busy, _ = build_cgroup.create(log(2))
    assert busy is not None
    sleeper = subprocess.Popen(["sleep", "30"])
    fresh: Path | None = None
    try:
        (busy / "cgroup.procs").write_text(str(sleeper.pid))
        young, _ = build_cgroup.create(log(3))
        assert abandoned.exists() and busy.exists()  # not a minute old yet: kept
        monkeypatch.setattr(build_cgroup, "ABANDONED_AFTER_S", 0.0)
        fresh, _ = build_cgroup.create(log(4))
        assert fresh is not None and fresh.exists()
        assert not abandoned.exists() and young is not None and not young.exists()
        assert busy.exists()  # its process is still in it
    finally:
        sleeper.kill()
        sleeper.wait()
        for directory in (busy, fresh):
            for _ in range(50):
                if directory is None or not directory.exists():
                    break
                with contextlib.suppress(OSError):
                    directory.rmdir()
                time.sleep(0.1)
