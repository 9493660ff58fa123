"""A full disk under the state directory: the build survives and the loss is recorded.

Before: `OSError: [Errno 28]` in the log pump killed the supervisor, the build died of SIGPIPE on
its next write, and the loss was nowhere. Now the pump keeps reading, counts what it could not
write and where, writes again once there is room, and `status`, `history` and the build's row
say what was lost and why.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from pathlib import Path

import pytest
from supervised import Bench, build_id_from

from workbench.progress import ProgressTracker
from workbench.supervision.pipeline import LogPipeline, describe_loss

LINE = "line %g of the build's output, padded to about eighty bytes ......................"
LINES = 50_000  # about 4 MB: more than the small_disk tmpfs (tests/conftest.py) holds


def _expected_output() -> bytes:
    return (
        subprocess.run(["seq", "-f", LINE, "1", str(LINES)], check=True, capture_output=True).stdout
        + b"after-the-gap\n"
    )


def test_the_pump_counts_what_dev_full_refuses_and_resumes(tmp_path: Path) -> None:
    """/dev/full answers every write with ENOSPC: the pipeline counts, the tracker still folds."""
    full = os.open("/dev/full", os.O_WRONLY)
    log = tmp_path / "build.log"
    told: list[str] = []
    tracker = ProgressTracker()
    pipeline = LogPipeline(full, tracker, told.append)
    pipeline.feed(b"[1/3] first\n[2/3] sec")
    pipeline.feed(b"ond\n")
    assert pipeline.loss.bytes == 25
    assert pipeline.loss.gaps == [(0, 25)]
    assert pipeline.loss.reason == "ENOSPC: No space left on device"
    assert tracker.snapshot().step.done == 2  # the tracker lost nothing
    # Room again: the same descriptor now points at a regular file.
    regular = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(regular, full)
    pipeline.feed(b"[3/3] third\n")
    pipeline.close()
    os.close(regular)
    os.close(full)
    text = log.read_text()
    assert text == (
        "workbench: 25 bytes of the build's output are missing here: they could not be written "
        "to this log (ENOSPC: No space left on device)\n[3/3] third\n"
    )
    assert tracker.snapshot().step.done == 3
    assert pipeline.loss.gap_count == 1 and pipeline.bytes == 37
    assert any("cannot write" in line for line in told)
    assert "25 bytes" in describe_loss(pipeline.loss.to_json())


@pytest.mark.slow
def test_a_build_that_fills_the_state_disk_ends_with_its_own_exit_code(
    small_disk: Path, tmp_path: Path
) -> None:
    bench = Bench(small_disk)
    signals = tmp_path / "signals"
    signals.mkdir()
    # Room the test gives back once the disk is full: "space returns".
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (1 << 20))
    script = (
        f'seq -f "{LINE}" 1 {LINES}; '
        'touch "$1/written"; '
        'while [ ! -e "$1/go" ]; do sleep 0.05; done; '
        "echo after-the-gap; exit 7"
    )
    try:
        cli = bench.start(
            "run",
            "--name",
            "fills-the-disk",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            str(signals),
            cwd=tmp_path,
        )
        bench.wait_for("the build's output", lambda: (signals / "written").exists(), 120)
        assert os.statvfs(small_disk).f_bavail == 0, "the tmpfs never filled up"
        filler.unlink()
        (signals / "go").touch()
        _, err = cli.communicate(timeout=120)
        assert cli.returncode == 7, err  # its own exit code, not SIGPIPE's 141
        build_id = build_id_from(err)
        # The CLI may have read the outcome the supervisor kept beside the log (outcome.py)
        # before the row was written (one CI run beside two CPU hogs read "running" here): the
        # row is final once the supervisor, or the next reader, has written it.
        bench.run("status", timeout=60)
        record = bench.wait_ended(build_id, timeout=60)
        assert (record.exit_status, record.signal, record.state) == (7, None, "failed")
        lost = record.progress["output_lost"]
        assert lost["bytes"] > 1 << 20
        assert lost["reason"] == "ENOSPC: No space left on device"
        assert lost["gap_count"] == 1
        assert "output lost" in (record.note or "") and "ENOSPC" in record.note
        log = Path(record.log_path).read_bytes()
        where = lost["gaps"][0][0]
        marker = re.compile(rb"\n?workbench: [\d,]+ bytes of the build's output are missing here")
        assert marker.match(log, where), log[where - 80 : where + 200]
        assert log.endswith(b"after-the-gap\n")
        # Every byte is either in the file or counted as lost.
        gap_line_end = log.index(b"\n", where + 2) + 1
        kept = len(log) - (gap_line_end - where)
        assert kept + lost["bytes"] == len(_expected_output())
        assert log[:where] + log[gap_line_end:] != _expected_output()
        status = bench.run("status", timeout=60)
        assert status.returncode == 0, status.stderr
        assert "output lost" in status.stdout and "ENOSPC" in status.stdout, status.stdout
        history = bench.run("history", timeout=60)
        assert "output lost" in history.stdout, history.stdout
    finally:
        bench.cleanup()


def _fill(directory: Path, leave: int = 0) -> Path:
    """Fill the file system of `directory`, leaving `leave` bytes free; the filler's path."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)

    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def _bench(state: Path, tmp_path: Path) -> Bench:
    # An off-disk outcome (outcome.py) goes to this test's own runtime folder, not /dev/shm.
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return Bench(state, env={"XDG_RUNTIME_DIR": str(runtime)})


def _no_traceback(record_log: str) -> None:
    supervisor_log = (Path(record_log).parent / "supervisor.log").read_text()
    assert "Traceback" not in supervisor_log, supervisor_log


@pytest.mark.slow
def test_a_build_that_fills_the_disk_for_good_keeps_its_exit_status(
    small_disk: Path, tmp_path: Path
) -> None:
    """Issue 29: a chatty build exits 3 on a small state disk that stays full. Before: `run`
    exited 2 ("disk ... is full"), the row said `lost` with no exit status, `status` and
    `history` refused to read, and supervisor.log ended in a traceback."""
    bench = _bench(small_disk, tmp_path)
    script = f'seq -f "{LINE}" 1 100000; exit 3'  # about 8 MB of output
    try:
        run = bench.run("run", "--name", "chatty", "--", "sh", "-c", script, cwd=tmp_path)
        assert run.returncode == 3, run.stderr  # the build's own exit status
        assert os.statvfs(small_disk).f_bavail == 0, "the tmpfs never filled up"
        build_id = build_id_from(run.stderr)
        assert f"build #{build_id} (chatty) failed" in run.stderr
        for command in ("status", "history"):
            shown = bench.run(command, timeout=60)
            assert shown.returncode == 0, shown.stderr  # read-only on the full disk
            assert "failed" in shown.stdout and "exit 3" in shown.stdout, shown.stdout
            assert "output lost" in shown.stdout and "ENOSPC" in shown.stdout, shown.stdout
        (row,) = [b for b in bench.json("history", "--json")["builds"] if b["id"] == build_id]
        assert (row["state"], row["exit_status"]) == ("failed", 3)
        assert "samples lost" in row["note"] or "measurements lost" in row["note"]
        assert bench.run("logs", str(build_id), timeout=60).returncode == 0
        report = bench.run("report", str(build_id), timeout=60)
        assert report.returncode == 0 and "output lost" in report.stdout, report.stdout
        _no_traceback(row["log"])
        # Space returns (the log is cut: its supervisor still holds it open, so removing it
        # would free nothing): the outcome reaches the history itself.
        os.truncate(small_disk / "builds" / str(build_id) / "build.log", 0)
        assert bench.run("status", timeout=60).returncode == 0
        record = bench.record(build_id)
        assert (record.state, record.exit_status) == ("failed", 3)
        assert "output lost" in (record.note or "")
    finally:
        bench.cleanup()


@pytest.mark.slow
def test_a_build_started_on_a_nearly_full_disk_keeps_its_exit_status(
    small_disk: Path, tmp_path: Path
) -> None:
    """Room for the row and little else: before, the build ran and its exit 4 was lost."""
    bench = _bench(small_disk, tmp_path)
    try:
        assert bench.run("status", timeout=60).returncode == 0  # the history exists
        _fill(small_disk, leave=96 * 1024)
        script = f'seq -f "{LINE}" 1 5000; exit 4'
        run = bench.run("run", "--name", "late", "--", "sh", "-c", script, cwd=tmp_path)
        assert run.returncode == 4, run.stderr
        build_id = build_id_from(run.stderr)
        shown = bench.run("history", timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "exit 4" in shown.stdout and "output lost" in shown.stdout, shown.stdout
        record = bench.json("status", "--json")["recent"][0]
        assert (record["id"], record["exit_status"], record["state"]) == (build_id, 4, "failed")
        _no_traceback(record["log"])
    finally:
        bench.cleanup()


def test_readers_work_read_only_on_a_full_disk(small_disk: Path, tmp_path: Path) -> None:
    """Before: with the disk full, `history`, `status` and `logs` refused to read ("disk I/O
    error": SQLite's WAL mode could not size its -shm file)."""
    bench = _bench(small_disk, tmp_path)
    try:
        done = bench.run("run", "--name", "small", "--", "sh", "-c", "echo hello", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        _fill(small_disk)
        for args in (("history",), ("status",), ("logs", "1"), ("report", "1")):
            shown = bench.run(*args, timeout=60)
            assert shown.returncode == 0, (args, shown.stderr)
        assert "hello" in bench.run("logs", "1", timeout=60).stdout
        assert "succeeded" in bench.run("history", timeout=60).stdout
        refused = bench.run("run", "--", "true", cwd=tmp_path, timeout=60)
        assert refused.returncode == 2
        assert refused.stderr.startswith("workbench: error: ") and "is full" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    finally:
        bench.cleanup()
