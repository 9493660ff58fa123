"""A sample that measured no CPU says so: the sampler's first reading (no interval behind it) and
the supervisor's exit sample (no process left: the CPU the last ones used went with them) store
`cpu_interval` 0, the live view's CPU is None rather than 0%, and the trace and the graphs leave
them out. Before, both stored 0% and every reader drew or printed it as measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from supervised import Bench, build_id_from

from workbench.history.records import SUCCEEDED, Sampled, cpu_measured
from workbench.monitor.sampler import BuildSample, Sample
from workbench.progress.live_view import LiveView
from workbench.reading.follow import status_line
from workbench.supervision.live_writer import LiveWriter

# Two edges that keep a core busy for a few seconds each: every sample between the first and
# the exit sample sees CPU used.
BUSY = """
rule busy
  command = timeout 3 sh -c 'while :; do :; done'; touch $out
build one: busy
build two: busy
"""


@pytest.mark.slow  # a real ninja build of a few seconds through the supervisor
def test_the_first_reading_and_the_exit_sample_store_no_cpu_measurement(
    bench: Bench, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "build.ninja").write_text(BUSY)
    result = bench.run("run", "--name", "busy", "--", "ninja", "-C", str(tree), "-j1", timeout=120)
    assert result.returncode == 0, result.stderr
    build_id = build_id_from(result.stderr)
    assert bench.record(build_id).state == SUCCEEDED
    with bench.history() as history:
        samples = history.samples(build_id)
    assert len(samples) >= 4, samples
    first, *middle, last = samples
    assert first.cpu_interval == 0.0 and last.cpu_interval == 0.0, (first, last)
    assert last.processes == 0
    assert all(s.cpu_interval is not None and s.cpu_interval > 0 for s in middle), middle
    # A core kept busy: the samples that measured saw it.
    assert max(s.cpu_cores for s in middle) > 0.5, middle
    assert cpu_measured(samples) == [False, *([True] * len(middle)), False]

    # The trace's CPU counter has a point for each sample that measured, none for the others.
    document = json.loads(bench.run("trace", str(build_id), "-o", "-", timeout=60).stdout)
    cpu = [e for e in document["traceEvents"] if e.get("name") == "build CPU (cores, sampled)"]
    memory = [e for e in document["traceEvents"] if e.get("name", "").startswith("build memory")]
    assert len(memory) == len(samples) and len(cpu) == len(middle), (len(cpu), len(samples))
    # Every CPU point is one a sample measured (none is the first reading's 0 or the exit's).
    assert min(e["args"]["cores"] for e in cpu) == min(round(s.cpu_cores, 2) for s in middle)


def _sample(interval: float, cores: float) -> Sample:
    build = BuildSample(
        t=1000.0 + interval,
        interval=interval,
        processes=2,
        cpus=4,
        cpu_percent=25.0 * cores,
        cpu_cores=cores,
        cpu_seconds=0.0,
        rss=100 << 20,
        memory_available=1 << 30,
        memory_total=2 << 30,
        compile_jobs=1,
        cuda_jobs=0,
        link_jobs=0,
    )
    return Sample(build, ())


def test_the_live_view_of_a_sample_that_measured_no_cpu_says_not_measured() -> None:
    writer = LiveWriter()
    first = writer.view(_sample(0.0, 0.0), None, {})
    assert (first.cpu_percent, first.cpu_cores) == (None, None)
    assert first.peak.cpu_cores == 0.0 and first.peak.rss == 100 << 20
    assert LiveView.from_json(json.loads(json.dumps(first.to_json()))) == first
    then = writer.view(_sample(1.0, 2.0), None, {})
    assert (then.cpu_percent, then.cpu_cores) == (50.0, 2.0)
    # The exit sample: its CPU is not a measurement, and moves no peak.
    ended = writer.view(_sample(1.0, 3.5), None, {}, cpu_measured=False)
    assert ended.cpu_cores is None and ended.peak.cpu_cores == 2.0


def test_an_older_history_s_samples_are_told_apart_as_they_can_be() -> None:
    def stored(cpu_seconds: float, processes: int, interval: float | None) -> Sampled:
        return Sampled(0.0, 10.0, 0.4, cpu_seconds, 1, 1, processes, 1, 0, 0, None, interval)

    # Kept: it says.
    kept = [stored(0.5, 2, 0.0), stored(1.0, 2, 1.0), stored(1.4, 0, 0.0)]
    assert cpu_measured(kept) == [False, True, False]
    # Not kept (before it was): the first reading counted no CPU yet, the exit sample had no
    # process left.
    older = [stored(0.0, 2, None), stored(1.0, 2, None), stored(1.4, 0, None)]
    assert cpu_measured(older) == [False, True, False]
    assert cpu_measured([stored(0.0, 0, None)]) == [True]  # one sample: nothing to tell apart


def test_attach_s_line_says_cpu_not_measured_yet(tmp_path: Path) -> None:
    """The status line of a build whose only sample so far measured no CPU."""
    import os

    from recorded_builds import running_build

    from workbench.history.store import History

    live = LiveView(t=1000.0, cpus=4, rss=1 << 20, memory_available=1 << 30)
    with History(tmp_path / "state") as history:
        record = running_build(history, pid=os.getpid())
        history.update_live(record.id, 1, {}, live.to_json())
        line = status_line(history.get(record.id))
    assert "CPU not measured yet" in line and "CPU 0.0" not in line, line
