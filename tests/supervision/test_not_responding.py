"""A supervisor that does not report is shown as not responding, never with live figures.

Before (issue 29): `kill -STOP` of the supervisor for ~40 s and `status` kept showing "running
... 61% · ETA 13.6s" with the elapsed time growing; the build's end, reaped only after SIGCONT,
was recorded with the stopped time in its wall time and no word on it. Now `status` says "not
responding: no report for Ns (its supervisor, pid N, is stopped)" without an ETA or CPU and
memory figures, `--json` carries `responding` and `silent_s`, and the note names the time the
supervisor did not observe and that the build ended within it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
from supervised import Bench

from workbench.history.records import BuildRecord

REPORT_STALE_S = 5.0  # workbench.history.records.REPORT_STALE_S: after this long without a report


def _running(bench: Bench) -> BuildRecord | None:
    if not (bench.state / "history.sqlite3").exists():
        return None
    with bench.history() as history:
        builds = history.builds(limit=1)
    if builds and builds[0].state == "running" and builds[0].live:
        return builds[0]
    return None


def test_a_stopped_supervisor_is_not_responding_and_its_pause_is_named(
    bench: Bench, tmp_path: Path
) -> None:
    script = "echo started; while [ ! -e go ]; do sleep 0.05; done; echo done; exit 5"
    cli = bench.start("run", "--name", "stopped", "--", "sh", "-c", script, cwd=tmp_path)
    record = bench.wait_for("the build's first sample", lambda: _running(bench), 60)
    assert record.supervisor_pid is not None and record.build_pid is not None
    os.kill(record.supervisor_pid, signal.SIGSTOP)
    try:

        def silent() -> str | None:
            line = bench.run("status", timeout=60).stdout.splitlines()[0]
            return line if "not responding" in line else None

        line = bench.wait_for("status to say it does not respond", silent, 60, every=0.5)
        assert "not responding: no report for" in line, line
        assert f"(its supervisor, pid {record.supervisor_pid}, is stopped)" in line, line
        assert "ETA" not in line and "CPU" not in line, line
        (running,) = bench.json("status", "--json")["running"]
        assert running["responding"] is False and running["silent_s"] >= REPORT_STALE_S
        # The build ends while nobody watches: its root waits as a zombie until SIGCONT.
        (tmp_path / "go").touch()

        def zombie() -> bool:
            try:
                return psutil.Process(record.build_pid).status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return False

        bench.wait_for("the build's root to end", zombie, 60)
    finally:
        os.kill(record.supervisor_pid, signal.SIGCONT)
    _out, err = cli.communicate(timeout=120)
    assert cli.returncode == 5, err
    done = bench.record(record.id)
    assert (done.state, done.exit_status) == ("failed", 5)
    note = done.note or ""
    assert "not observed for" in note and "stopped or starved" in note, note
    assert "the build ended during a pause: its wall time may be up to" in note, note
