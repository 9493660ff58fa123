"""A build no sample saw (a no-op rebuild, `ninja: no work to do`, ends in milliseconds, before
the 1 Hz sampler meets a process of it): its memory peak is not known, and the report, the
history screen and the build screen say so instead of a peak of 0 MiB. Real ninja under the real
supervisor."""

from __future__ import annotations

from pathlib import Path

from needed_tools import needs_ninja
from supervision.supervised import Bench

pytestmark = needs_ninja


def _no_op(bench: Bench, tmp_path: Path) -> int:
    """A real build of one edge, then the same command with nothing to do: the no-op's id."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "build.ninja").write_text("rule made\n  command = : > $out\nbuild a: made\n")
    for _ in range(2):
        done = bench.run("run", "--", "ninja", "-C", str(work), cwd=work)
        assert done.returncode == 0, done.stderr
    assert "no work to do" in done.stdout + done.stderr
    return bench.latest_id()


def _unsampled_no_op(bench: Bench, tmp_path: Path) -> int | None:
    """`_no_op`'s id, or None where a sample met ninja after all (its peak is a true figure)."""
    build_id = _no_op(bench, tmp_path)
    with bench.history() as history:
        measured = history.measured(build_id, slowest=0)
    assert measured is not None
    return None if measured.peak_rss else build_id


def test_a_no_op_rebuilds_peak_is_not_sampled_not_0_mib(bench: Bench, tmp_path: Path) -> None:
    build_id = _unsampled_no_op(bench, tmp_path)
    if build_id is None:
        return
    report = bench.run("report", str(build_id))
    assert report.returncode == 0, report.stderr
    row = next(line for line in report.stdout.splitlines() if "Memory peak" in line)
    assert "0 MiB" not in row and "not sampled" in row, row


def test_the_history_command_says_a_no_op_rebuilds_peak_is_not_known(
    bench: Bench, tmp_path: Path
) -> None:
    """`workbench history` agrees with the History screen: "-" where no sample met the build,
    not "0 MiB"."""
    build_id = _unsampled_no_op(bench, tmp_path)
    if build_id is None:
        return
    listed = bench.run("history")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    row = next(line for line in rows if line.split()[0] == str(build_id))
    column = header.index("peak RSS")
    assert row[column : column + 9].strip() == "-", (header, row)
