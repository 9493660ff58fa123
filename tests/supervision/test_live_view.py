"""The live view of a real supervised ninja build: what it says runs is what runs, its peak is
the build's own, it counts the other builds on the host for a build started from the CLI, and
every reader (`status`, `status --json`, the build screen's lines) says the same.

The build holds one compile open as long as the test wants: `slow.cc` is a FIFO, so its
`cc1plus` blocks reading it until the test writes the source, while a quick edge has already
finished and is ninja's last printed line."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from needed_tools import needs
from supervised import Bench, build_id_from

from workbench.history.records import SUCCEEDED
from workbench.progress.live_view import LiveView, ProcessView, ProgressView
from workbench.reading.build_text import head_lines, progress_line
from workbench.reading.follow import status_line
from workbench.supervision.live_writer import fold_jobs, running_edges

pytestmark = needs("ninja", "g++")

MANIFEST = """
rule cxx
  command = g++ -c -x c++ $in -o $out
  description = Building CXX object $out
rule quick
  command = touch $out
  description = Linking CXX static library $out
build libquick.a: quick
build slow.o: cxx slow.cc
"""

# Another build on the host: a ninja outside the build's session, busy in a sleep.
OTHER = """
rule wait
  command = sleep 600
build never: wait
"""


@pytest.mark.slow
def test_the_live_view_shows_what_runs_the_builds_peak_and_other_builds(
    bench: Bench, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "build.ninja").write_text(MANIFEST)
    fifo = tree / "slow.cc"
    os.mkfifo(fifo)
    other_tree = tmp_path / "other"
    other_tree.mkdir()
    (other_tree / "build.ninja").write_text(OTHER)
    other = subprocess.Popen(
        ["ninja", "-C", str(other_tree)], stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        cli = bench.start("run", "--name", "fifo", "--", "ninja", "-C", str(tree), "-j2")
        build_id = bench.wait_for("the build's row", lambda: _latest(bench), 60)

        def compiling() -> LiveView | None:
            record = bench.record(build_id)
            live = record.live_view
            progress = record.progress_view
            if progress.step is None or progress.step.done < 1:
                return None
            if not any(edge.what.endswith("slow.cc") for edge in live.running):
                return None
            if live.other is None or live.other.build_processes < 1:
                return None
            return live

        live = bench.wait_for("slow.cc compiling, libquick.a done, a census", compiling, 120)
        record = bench.record(build_id)
        # ninja's last line is the finished edge; what runs is the compile the sampler sees.
        assert record.progress_view.step is not None
        assert "libquick.a" in record.progress_view.step.description
        _, detail = head_lines(record)
        assert detail.startswith("running: slow.cc"), detail
        assert "libquick" not in detail
        line = status_line(record)
        assert "running: slow.cc" in line, line
        assert re.search(r"\b1 other build process on this host|other build processes on", line)
        # One row for the compile job: the g++ driver folded into its cc1plus.
        rows = [job for job in live.jobs if (job.file or "").endswith("slow.cc")]
        assert [(job.tool, job.driver) for job in rows] == [("cc1plus", "g++")], live.jobs
        # The build's peak, over every sample so far, is at least what any one sample held.
        assert live.peak.rss >= live.rss > 0
        assert f"peak {_size(live.peak.rss)}" in progress_line(record)
        # status --json prints the same typed record.
        status = bench.json("status", "--json")
        running = next(b for b in status["running"] if b["id"] == build_id)
        printed = LiveView.from_json(running["live"])
        assert any(edge.what.endswith("slow.cc") for edge in printed.running)
        assert printed.other is not None and printed.other.build_processes >= 1
        text = bench.run("status", timeout=60).stdout
        assert "running: slow.cc" in text, text
        assert re.search(r"\b1 other build process on this host|other build processes on", text)

        with open(fifo, "w") as source:  # the compile reads it and ends
            source.write("int answer() { return 42; }\n")
        _, err = cli.communicate(timeout=120)
        assert cli.returncode == 0, err
        assert build_id_from(err) == build_id
    finally:
        other.kill()
        other.wait()
    record = bench.record(build_id)
    assert record.state == SUCCEEDED
    with bench.history() as history:
        measured = history.measured(build_id)
    assert measured is not None
    # The peak the build screen and attach show is the one history and report show.
    assert record.live_view.peak.rss == measured.peak_rss
    assert json.loads(json.dumps(record.to_json()))["live"]["peak"]["rss"] == measured.peak_rss


def _latest(bench: Bench) -> int | None:
    with bench.history() as history:
        builds = history.builds(limit=1)
    return builds[0].id if builds else None


def _size(value: int) -> str:
    from workbench.host.units import byte_size

    return byte_size(value)


# -- pure parts ----------------------------------------------------------------------------------


def test_a_stored_view_of_an_older_or_broken_row_reads_as_not_known() -> None:
    assert LiveView.from_json(None) == LiveView()
    broken = LiveView.from_json({"t": "x", "cpus": True, "jobs": [None, 3], "eta_s": "soon"})
    assert broken.t is None and broken.cpus == 0 and broken.eta is None
    assert broken.jobs == (ProcessView.from_json(None), ProcessView.from_json(3))
    assert ProgressView.from_json({"step": {"tool": "ninja", "done": "1"}}).step is not None
    view = LiveView.from_json({"eta_s": 5.0, "eta_low_s": 1.0, "eta_high_s": 9.0})
    assert view.eta is not None and (view.eta.low_s, view.eta.high_s) == (1.0, 9.0)
    assert LiveView.from_json(view.to_json()) == view


def test_a_second_run_with_nothing_to_do_says_so_not_100_percent() -> None:
    from workbench.reading.follow import progress_text

    progress = ProgressView(lines=1, last_line="ninja: no work to do.")
    assert progress_text(progress) == "ninja: no work to do"


def test_running_edges_are_one_per_file_longest_first() -> None:
    from workbench.monitor.sampler import ProcessSample

    def process(pid: int, tool: str, file: str | None, job: int, cpu: float, started: float):
        return ProcessSample(
            pid, 1, "compiler", tool, file, cpu, 10 * pid, started, 0.0, "R", 1, job,
            "compiler", None,
        )  # fmt: skip

    sample = [
        process(10, "c++", "a.cc", 10, 0.0, 100.0),
        process(11, "cc1plus", "a.cc", 10, 97.0, 100.1),
        process(20, "c++", "b.cc", 20, 0.0, 90.0),
        process(21, "cc1plus", "b.cc", 20, 99.0, 90.2),
    ]
    jobs = fold_jobs(sample, 110.0, {})
    assert [(j.tool, j.driver, j.file, j.cpu_percent) for j in jobs] == [
        ("cc1plus", "c++", "b.cc", 99.0),
        ("cc1plus", "c++", "a.cc", 97.0),
    ]
    assert [edge.what for edge in running_edges(jobs)] == ["b.cc", "a.cc"]
