"""A supervised build stores its exact edges; report and trace use them (real CLI, real ninja)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis.test_edges_real_ninja import MANIFEST
from needed_tools import needs, needs_ninja
from supervision.supervised import Bench

from workbench.history.records import cpu_measured

pytestmark = needs_ninja


def test_run_report_and_trace_use_exact_edges(bench: Bench, tmp_path: Path) -> None:
    directory = tmp_path / "chain"
    directory.mkdir()
    (directory / "build.ninja").write_text(MANIFEST)
    built = bench.run("run", "--", "ninja", "-C", str(directory), "-j3", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    build_id = bench.latest_id()
    report = bench.json("report", str(build_id), "--format", "json")
    edges = report["builds"][0]["edges"]
    assert edges["ninja_log"] == str(directory / ".ninja_log")
    assert edges["count"] == 8
    chain = [edge["output"] for edge in edges["critical_path"]["edges"]]
    assert chain == ["chain_1", "chain_2", "chain_3", "final"]
    logged = (directory / ".ninja_log").read_text().splitlines()[1:]
    exact = {line.split("\t")[3]: line.split("\t") for line in logged}
    for edge in edges["slowest"]:
        start, end = int(exact[edge["output"]][0]), int(exact[edge["output"]][1])
        assert edge["seconds"] == pytest.approx((end - start) / 1000, abs=1e-6)
    text = bench.run("report", str(build_id), cwd=tmp_path).stdout
    assert "Critical path of" in text and "| chain_2 |" in text
    # A second, incremental build: per-output change, and the first build's edges stay.
    (directory / "wide_1").unlink()
    assert bench.run("run", "--", "ninja", "-C", str(directory), cwd=tmp_path).returncode == 0
    both = bench.json("report", str(build_id), str(build_id + 1), "--format", "json")
    statuses = {c["output"]: c["status"] for c in both["edge_changes"]}
    assert statuses["chain_1"] == "gone" and "wide_1" in statuses
    trace = tmp_path / "t.json"
    done = bench.run("trace", str(build_id), "-o", str(trace), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(trace.read_text())
    assert sum(1 for e in document["traceEvents"] if e["ph"] == "X") == 8
    # The supervisor's 1 Hz samples as counters on the build's time axis (t >= 0 from its
    # start, within it): one RSS counter per stored sample, one CPU counter per sample that
    # measured CPU (not the sampler's first reading nor the exit sample: `cpu_measured`).
    with bench.history() as history:
        samples = history.samples(build_id)
        duration = bench.record(build_id).duration_s or 0.0
    assert samples, "a build of about 2 s not sampled"
    counters = {
        name: [e for e in document["traceEvents"] if e["ph"] == "C" and e["name"] == name]
        for name in ("build memory (RSS, sampled)", "build CPU (cores, sampled)")
    }
    assert len(samples) >= 2, samples  # the first reading and the exit sample at least
    assert cpu_measured(samples) == [False, *[True] * (len(samples) - 2), False], samples
    measured = len(samples) - 2
    for name, events in counters.items():
        shown = len(samples) if name.startswith("build memory") else measured
        assert len(events) == shown, (name, events)
        assert all(0 <= e["ts"] <= (duration + 1) * 1e6 for e in events), events
    memory = [e["args"]["MiB"] for e in counters["build memory (RSS, sampled)"]]
    assert max(memory) > 0 and min(memory) >= 0, memory  # the last may see nothing left
    assert all(e["args"]["cores"] >= 0 for e in counters["build CPU (cores, sampled)"])
    assert trace.stat().st_mode & 0o077 == 0


@needs("cmake", "g++")
def test_the_supervisor_stores_each_compiles_sampled_cpu_beside_its_exact_time(
    bench: Bench,
    cxx_project: tuple[Path, Path],
) -> None:
    """The sample project (real g++) under `workbench run`: the heavy units compile for seconds,
    so the supervisor's 1 Hz samples see them; their edges keep the CPU their compilers used,
    never more than the edge's exact wall time allows on one core, and the report shows it."""
    checkout, build = cxx_project
    built = bench.run("run", "--", "ninja", "-C", str(build), "-j2", cwd=checkout)
    assert built.returncode == 0, built.stderr
    build_id = bench.latest_id()
    with bench.history() as history:
        rows = history.edges(build_id)
    sampled = {row.outputs[0]: row for row in rows if row.cpu_s is not None}
    assert any("heavy_" in output for output in sampled), [r.outputs for r in rows]
    for output, row in sampled.items():
        # One compiler process at a time per edge (cc1plus after its driver): its CPU fits
        # in the edge's wall time, give or take a clock tick and the log's millisecond.
        assert 0 <= row.cpu_s <= row.ended - row.started + 0.05, (output, row)
        assert row.peak_rss is not None
    report = bench.json("report", str(build_id), "--format", "json")
    slowest = report["builds"][0]["edges"]["slowest"]
    shown = {edge["output"]: edge["cpu_s_sampled"] for edge in slowest}
    assert any(cpu is not None for cpu in shown.values())
    text = bench.run("report", str(build_id), cwd=checkout).stdout
    assert "| CPU (sampled) |" in text
