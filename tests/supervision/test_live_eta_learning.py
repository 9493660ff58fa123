"""The ETA that learns (issue 16): real ninja builds recorded through the real supervisor, then
each one's progress replayed and the estimate held against how long it really took.

The manifest's edges sleep for a known number of "units" each, a unit's length read from a
file at run time: changing the file makes the host slower without changing a command (so ninja
does not rebuild anything because of it) and without burning the CI machine's two cores.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from needed_tools import needs_ninja
from supervised import Bench

from workbench.analysis import eta_model
from workbench.reading.follow import status_line
from workbench.supervision import live_eta

pytestmark = needs_ninja

UNITS = (1, 1, 1, 2, 2, 3, 4, 4)  # per edge: the heavy ones last, as a build's slow files
EDGE_SCRIPT = 'sleep "$(awk -v u="$2" \'{ print $1 * u }\' unit_s)"\n: > "$1"\n'


def write_work(directory: Path, unit_s: float) -> None:
    """Eight sleeping edges over their own inputs and one `all` edge after them."""
    (directory / "in").mkdir(parents=True, exist_ok=True)
    lines = [
        "rule work",
        "  command = sh edge.sh $out $units",
        "rule join",
        # A test holds the build at its last edge with a file named `hold` (see set_hold).
        "  command = while [ -e hold ]; do sleep 0.05; done; cat $in > $out",
    ]
    for n, units in enumerate(UNITS):
        (directory / "in" / f"part_{n}").write_text(f"{n}\n")
        lines += [f"build part_{n}: work in/part_{n}", f"  units = {units}"]
    lines.append("build all: join " + " ".join(f"part_{n}" for n in range(len(UNITS))))
    (directory / "build.ninja").write_text("\n".join(lines) + "\n")
    (directory / "edge.sh").write_text(EDGE_SCRIPT)
    set_unit(directory, unit_s)


def set_unit(directory: Path, unit_s: float) -> None:
    (directory / "unit_s").write_text(f"{unit_s}\n")


def set_hold(directory: Path, held: bool) -> None:
    """While held, the join edge waits: the build stays running whatever the machine's load."""
    hold = directory / "hold"
    if held:
        hold.touch()
    else:
        hold.unlink()


def clean(directory: Path) -> None:
    subprocess.run(["ninja", "-C", str(directory), "-t", "clean"], check=True, capture_output=True)


def touch(path: Path) -> None:
    """A newer mtime than ninja's log saw, whatever the file system's resolution."""
    future = time.time() + 2
    path.write_text(path.read_text() + "x\n")
    import os

    os.utime(path, (future, future))


def build(bench: Bench, directory: Path, *args: str, name: str | None = None) -> int:
    naming = ["--name", name] if name else []
    done = bench.run("run", *naming, "--", "ninja", "-C", str(directory), *args, cwd=directory)
    assert done.returncode == 0, done.stderr
    return bench.latest_id()


def errors(replay: live_eta.Replay, method: str) -> list[float]:
    """Relative error of `method`'s ETA at 50% and 75% of the build's real duration."""
    found = []
    for share in (0.5, 0.75):
        at = share * replay.duration_s
        estimate = getattr(replay, method)(at)
        assert estimate is not None, f"{method}: no ETA at {share:.0%} of #{replay.build_id}"
        truth = replay.duration_s - at
        found.append((estimate.remaining_s - truth) / truth)
    return found


def test_a_slower_host_is_followed_by_the_pace_of_the_build(bench: Bench, tmp_path: Path) -> None:
    directory = tmp_path / "work"
    write_work(directory, unit_s=0.2)
    first = build(bench, directory, "-j2")
    clean(directory)
    # The host is now three times as slow: far enough that each edge's fixed cost (a shell,
    # awk, sleep, ninja's bookkeeping: more on a loaded machine, and the same in both runs)
    # does not bring the two runs' times close (at 2.25x, load average 13 left the earlier
    # run's estimate only 35% short).
    set_unit(directory, 0.6)
    slower = build(bench, directory, "-j2")
    with bench.history() as history:
        replay = live_eta.Replay.of(history, slower)
        assert [r.build_id for r in replay.live.pace.references] == [first]
        assert replay.edge_total == len(UNITS) + 1
        learned = errors(replay, "learned")
        by_progress = errors(replay, "by_progress")
        late = replay.learned(0.75 * replay.duration_s)
    # The earlier run alone says a third of what is left; this run's pace corrects it.
    assert all(abs(error) <= 0.3 for error in learned), learned
    assert all(error <= -0.4 for error in by_progress), by_progress
    pace = re.search(r"this run ([0-9.]+)× their time", late.basis)
    assert pace is not None and float(pace.group(1)) >= 2.0, late.basis
    assert late.low_s <= late.remaining_s <= late.high_s


def test_an_incremental_build_is_estimated_from_incremental_runs_only(
    bench: Bench, tmp_path: Path
) -> None:
    directory = tmp_path / "work"
    write_work(directory, unit_s=0.3)
    full = build(bench, directory, "-j1")  # about 6 s
    set_unit(directory, 0.6)  # long enough that start-up noise is small beside it
    rebuilt = []
    for _ in range(2):
        touch(directory / "in" / "part_7")  # the heaviest edge and the join again: 2.4 s
        rebuilt.append(build(bench, directory, "-j1"))
    with bench.history() as history:
        replay = live_eta.Replay.of(history, rebuilt[-1])
        references = replay.live.pace.references
        assert {r.build_id for r in references} == {full, rebuilt[0]}
        assert replay.edge_total == 2
        assert eta_model.kind_of(replay.edge_total, references) == eta_model.INCREMENTAL
        assert [r.build_id for r in eta_model.matching(2, references)] == [rebuilt[0]]
        assert [r.build_id for r in eta_model.matching(9, references)] == [full]
        estimate = replay.learned(0.5 * replay.duration_s)
        learned = errors(replay, "learned")
        by_progress = errors(replay, "by_progress")
        # The first method took the full build too (same name, same command).
        assert {run.build_id for run in replay.live.earlier} == {full, rebuilt[0]}
    assert f"#{full}" not in estimate.basis and "incremental" in estimate.basis
    assert all(abs(error) <= 0.3 for error in learned), learned
    assert all(error >= 0.4 for error in by_progress), by_progress


def test_an_unnamed_run_with_other_jobs_matches_by_what_it_builds(
    bench: Bench, tmp_path: Path
) -> None:
    directory = tmp_path / "work"
    write_work(directory, unit_s=0.15)
    named = build(bench, directory, "-j2", name="parts")
    clean(directory)
    unnamed = build(bench, directory, "-j1")
    with bench.history() as history:
        replay = live_eta.Replay.of(history, unnamed)
        assert replay.live.earlier == []  # another name and command: the first ETA is blind
        assert [r.build_id for r in replay.live.pace.references] == [named]
        assert history.edge_build_info(named)[1] == history.edge_build_info(unnamed)[1]
        estimate = replay.learned(0.5 * replay.duration_s)
    assert estimate is not None and f"#{named}" in estimate.basis


@pytest.mark.slow
def test_the_live_eta_shows_a_range_and_learns_a_found_ninja(bench: Bench, tmp_path: Path) -> None:
    directory = tmp_path / "work"
    write_work(directory, unit_s=0.3)
    # Like the sample project: a program that becomes ninja, so only the sampler finds it.
    wrapper = [
        sys.executable,
        "-c",
        f"import os; os.execvp('ninja', ['ninja', '-C', {str(directory)!r}, '-j2'])",
    ]
    assert bench.run("run", "--", *wrapper, cwd=directory).returncode == 0
    first = bench.latest_id()
    clean(directory)
    # Held at its last edge until the ETA is seen: a quick build (3 s) on a loaded machine
    # could end before the sampler found its ninja and the ETA learned from it.
    set_hold(directory, True)
    process = bench.start("run", "-d", "--", *wrapper, cwd=directory)
    assert process.wait(timeout=60) == 0
    second = bench.latest_id()

    def ranged() -> object:
        record = bench.record(second)
        live = record.live or {}
        if live.get("eta_low_s") is not None and "of this tree" in (live.get("eta_basis") or ""):
            return record
        return None if record.active else record

    record = bench.wait_for("a learned ETA with a range", ranged, timeout=60)
    live = record.live
    assert record.active, "the build ended before the ETA learned from the found ninja"
    assert live["eta_low_s"] <= live["eta_s"] <= live["eta_high_s"]
    assert f"#{first}" in live["eta_basis"]
    line = status_line(record)
    assert "ETA " in line and "–" in line
    set_hold(directory, False)
    assert bench.wait_ended(second).state == "succeeded"
    with bench.history() as history:
        assert history.edge_build_info(first)[1] is not None
        assert history.edge_build_info(first)[1] == history.edge_build_info(second)[1]
