"""The report's advice on jobs reads the host contention the supervisor recorded over the
build's life: "more jobs would help" on a 2-core host that other builds kept busy is false."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from needed_tools import needs_ninja
from recorded_builds import new_build
from supervision.supervised import Bench

from workbench.history.records import Measured
from workbench.history.store import History
from workbench.progress.live_view import Contention, LiveView
from workbench.reading.report import BuildFacts, contention_line, more_jobs_advice


def _facts(tmp_path: Path, other: Contention | None, utilisation: float) -> BuildFacts:
    with History(tmp_path) as history:
        record = history.create(
            new_build("fmt", argv=("ninja",), cwd="/src", eta_key="fmt", jobs=2)
        )
        live = LiveView(t=1.0, cpus=2, other=other)
        history.update_live(record.id, 1, {}, live.to_json())
        record = history.get(record.id)
    measured = Measured(
        build_id=record.id,
        wall_s=600.0,
        cpu_seconds=utilisation / 100 * 2 * 600,
        cpu_utilisation=utilisation,
        cpus=2,
        peak_rss=1 << 30,
        min_memory_available=1 << 32,
        memory_total=1 << 33,
        most_jobs=2,
        samples=600,
        peak_job_rss={},
        peak_process_rss={},
        census=[],
    )
    return BuildFacts(record, measured)


def test_a_busy_host_gets_no_more_jobs_advice(tmp_path: Path) -> None:
    busy = Contention(1.4, 1.3, 10, "10 other build process(es) run on this host", 600)
    facts = _facts(tmp_path, busy, utilisation=40.0)
    advice = more_jobs_advice(facts)
    assert "more jobs would help" not in advice
    assert "host was busy" in advice and "1.3 of 2 cores" in advice
    assert contention_line(facts).startswith("Host contention (sampled over the build)")
    assert "10 other build processes ran on this host" in contention_line(facts)


def test_an_idle_host_keeps_the_advice(tmp_path: Path) -> None:
    idle = Contention(0.1, 0.1, 0, "", 600)
    assert "more jobs would help" in more_jobs_advice(_facts(tmp_path, idle, utilisation=40.0))


def test_a_build_recorded_before_contention_was_kept_says_nothing_of_it(tmp_path: Path) -> None:
    facts = _facts(tmp_path, None, utilisation=40.0)
    assert contention_line(facts) == ""
    assert "more jobs would help" in more_jobs_advice(facts)


def _held_ninja(tree: Path) -> Path:
    """A ninja tree whose one edge runs until `hold` is removed; returns `hold`."""
    tree.mkdir()
    hold = tree / "hold"
    hold.touch()
    (tree / "build.ninja").write_text(
        f"rule held\n  command = while [ -e {hold} ]; do sleep 0.05; done; : > $out\n"
        "build done: held\n"
    )
    return hold


@needs_ninja
def test_other_builds_are_counted_in_words_that_agree_and_the_report_speaks_of_the_past(
    bench: Bench, tmp_path: Path
) -> None:
    """With one other ninja on the host, `status` said "1 other build processes on this host",
    and the report of an ended build "...; this build will compete with them for cores and
    memory", the launch's warning in the future tense. Real ninja, a second one beside it."""
    other_hold = _held_ninja(tmp_path / "other")
    other = subprocess.Popen(["ninja", "-C", str(tmp_path / "other")], stdout=subprocess.DEVNULL)
    hold = _held_ninja(tmp_path / "mine")
    try:
        started = bench.run(
            "run", "-d", "--name", "mine", "--", "ninja", "-C", "mine", cwd=tmp_path
        )
        assert started.returncode == 0, started.stderr
        build_id = bench.latest_id()
        counted = re.compile(r"(\d+) other build process(es)? on this host")

        def said() -> re.Match[str] | None:
            return counted.search(bench.run("status").stdout)

        found = bench.wait_for("the other build counted", said, timeout=60, every=0.5)
        many = int(found.group(1)) != 1
        assert bool(found.group(2)) == many, found.group(0)
    finally:
        hold.unlink()
        other_hold.unlink()
        other.wait(timeout=30)
    assert bench.run("attach", str(build_id)).returncode == 0
    report = bench.run("report", str(build_id))
    assert report.returncode == 0, report.stderr
    line = next(line for line in report.stdout.splitlines() if "Host contention" in line)
    assert "will compete" not in line and "(es)" not in line, line
    assert re.search(r"\d+ other build process(es)? ran on this host", line), line
