"""A build outlives its supervisor: `kill -9` of the supervisor mid-build leaves the build
running, its output kept and its own exit status recorded.

Before: the supervisor held the only reading end of the build's output pipe, so ninja died of
SIGPIPE within seconds of `kill -9` of the supervisor (exit 141), and the build was `lost`. Now
the supervisor's parent, its keeper (workbench/supervision/keeper.py), holds the pipe and
reaps the build, and starts a supervisor that adopts it: `status` says "adopted" and names the
time nobody observed, progress and samples resume, and the build ends with its own status.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest
from monitor.cxx_project import needs_cxx_tools
from supervised import Bench, build_id_from, keeper_pid, ninja_log_outputs, ninja_steps

from workbench.history.records import BuildRecord


def _running(bench: Bench, lines: int) -> BuildRecord | None:
    if not (bench.state / "history.sqlite3").exists():
        return None
    with bench.history() as history:
        builds = history.builds(limit=1)
    if builds and builds[0].state == "running" and builds[0].lines >= lines:
        return builds[0]
    return None


def _kill_9(bench: Bench, record: BuildRecord) -> None:
    assert record.supervisor_pid is not None
    os.kill(record.supervisor_pid, signal.SIGKILL)


def _adopted(bench: Bench, build_id: int) -> BuildRecord | None:
    record = bench.record(build_id)
    return record if record.adopted else None


@pytest.mark.slow
@needs_cxx_tools
def test_kill_9_of_the_supervisor_mid_ninja_build_loses_nothing(
    bench: Bench, cxx_project: tuple[Path, Path]
) -> None:
    checkout, build = cxx_project
    cli = bench.start("run", "--name", "k9s", "--", "ninja", "-C", str(build), "-j1", cwd=checkout)
    record = bench.wait_for("ninja's first steps", lambda: _running(bench, 2), timeout=90)
    steps_before = ninja_steps(Path(record.log_path).read_text())
    lost_pid = record.supervisor_pid
    _kill_9(bench, record)
    adopted = bench.wait_for("the build's adoption", lambda: _adopted(bench, record.id), 60)
    (entry,) = adopted.adopted
    assert entry["lost_pid"] == lost_pid and entry["pid"] == adopted.supervisor_pid
    assert keeper_pid(adopted) not in (None, lost_pid, adopted.supervisor_pid)
    assert entry["unobserved_s"] >= 0
    status = bench.run("status", timeout=60)
    assert f"adopted once after its supervisor was lost (pid {lost_pid})" in status.stdout
    assert "unobserved (sampled figures miss it)" in status.stdout

    _out, err = cli.communicate(timeout=180)
    assert cli.returncode == 0, err  # ninja's own exit status, not SIGPIPE's 141
    assert build_id_from(err) == record.id
    done = bench.record(record.id)
    assert (done.state, done.exit_status, done.signal) == ("succeeded", 0, None), done.note
    assert "adopted once" in (done.note or "")
    log = Path(done.log_path).read_text()
    total = len(ninja_log_outputs(build))
    assert len(steps_before) < total, "the supervisor was killed after ninja had finished"
    # Every step, in order, once: nothing lost, nothing written twice.
    assert ninja_steps(log) == [(n, total) for n in range(1, total + 1)]
    assert log.rstrip().endswith("Linking CXX executable fixture_main")
    assert done.lines == len(log.splitlines())
    assert done.progress["step"]["done"] == total  # progress resumed from the log
    with bench.history() as history:
        samples = history.samples(record.id)
    assert any(sample.t >= entry["adopted_at"] - 1.0 for sample in samples)  # samples resumed
    keeper = keeper_pid(done) or 0

    def keeper_gone() -> bool:
        try:
            return psutil.Process(keeper).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    bench.wait_for("the keeper to leave once the end is recorded", keeper_gone, 30)
    history_text = bench.run("history", timeout=60).stdout
    assert "adopted once after its supervisor was lost" in history_text


def test_the_builds_own_exit_status_reaches_the_cli_after_the_supervisor_died(
    bench: Bench, tmp_path: Path
) -> None:
    script = (
        "echo started; while [ ! -e go ]; do sleep 0.05; done; "
        "i=0; while [ $i -lt 2000 ]; do echo after $i; i=$((i+1)); done; exit 3"
    )
    cli = bench.start("run", "--name", "held", "--", "sh", "-c", script, cwd=tmp_path)
    record = bench.wait_for("the build to start", lambda: _running(bench, 1), timeout=60)
    _kill_9(bench, record)
    bench.wait_for("the build's adoption", lambda: _adopted(bench, record.id), 60)
    status = bench.json("status", "--json")
    (running,) = status["running"]
    assert running["adopted"][0]["lost_pid"] == record.supervisor_pid
    (tmp_path / "go").touch()
    _out, err = cli.communicate(timeout=120)
    assert cli.returncode == 3, err
    done = bench.record(record.id)
    assert (done.state, done.exit_status) == ("failed", 3)
    log = Path(done.log_path).read_text().splitlines()
    assert log == ["started"] + [f"after {i}" for i in range(2000)]
    assert done.lines == 2001


@pytest.mark.slow  # a real supervisor, its keeper and the adopting one: about 5 s
def test_adopted_and_its_keeper_killed_the_end_is_lost_without_its_status(
    bench: Bench, tmp_path: Path
) -> None:
    """The adopting supervisor outlives the keeper that held the build's exit status: once the
    build's root is gone it records the end as lost, saying why, instead of waiting for ever."""
    started = bench.run(
        "run", "-d", "--name", "orphaned", "--", "sh", "-c",
        "echo held; while [ ! -e go ]; do sleep 0.05; done; echo went", cwd=tmp_path,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    record = bench.wait_for("the build to run", lambda: _running(bench, 1), 60)
    _kill_9(bench, record)
    adopted = bench.wait_for("the build's adoption", lambda: _adopted(bench, build_id), 60)
    keeper = psutil.Process(keeper_pid(adopted) or 0)
    keeper.kill()
    bench.wait_for(
        "the keeper to be gone",
        lambda: not psutil.pid_exists(keeper.pid) or keeper.status() == psutil.STATUS_ZOMBIE,
        30,
    )
    (tmp_path / "go").touch()
    ended = bench.wait_ended(build_id, timeout=60)
    assert ended.state == "lost" and ended.exit_status is None, ended
    assert "neither its supervisor nor its keeper was there" in (ended.note or ""), ended.note
    assert Path(ended.log_path).read_text().splitlines()[-1] == "went"
