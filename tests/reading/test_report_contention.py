"""The report's advice on jobs reads the host contention the supervisor recorded over the
build's life: "more jobs would help" on a 2-core host that other builds kept busy is false."""

from __future__ import annotations

from pathlib import Path

from recorded_builds import new_build

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
    assert "10 other build process(es)" in contention_line(facts)


def test_an_idle_host_keeps_the_advice(tmp_path: Path) -> None:
    idle = Contention(0.1, 0.1, 0, "", 600)
    assert "more jobs would help" in more_jobs_advice(_facts(tmp_path, idle, utilisation=40.0))


def test_a_build_recorded_before_contention_was_kept_says_nothing_of_it(tmp_path: Path) -> None:
    facts = _facts(tmp_path, None, utilisation=40.0)
    assert contention_line(facts) == ""
    assert "more jobs would help" in more_jobs_advice(facts)
