"""The ETA recordings keep what the sampler measured of CPU (benchmarks/eta_recordings.py), and
benchmarks/eta_accuracy.py scores a first build's ETA costed in CPU seconds against the shipped
one costed in wall seconds. A real history (SQLite) with builds, edges and samples written as
the supervisor writes them; the recordings' files are plain JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workbench.history.records import SUCCEEDED, EdgeRow, NewBuild, Sampled
from workbench.history.store import History


def _record(state: Path, durations: list[float]) -> None:
    """Builds named "tree", each of 4 compiles then a link, with the sampler's CPU: the
    compiles' CPU (the link none: no sample saw it) and the build's CPU each second."""
    with History(state) as history:
        for index, duration in enumerate(durations):
            start = 1_000.0 + index * 10_000.0
            record = history.create(
                NewBuild("tree", "run", ("ninja",), "/", "/", {}, "tree", False), now=start
            )
            history.mark_running(record.id, 1, 1, start)
            rows = [
                EdgeRow(
                    (f"CMakeFiles/t.dir/u{n}.cc.o",),
                    start + 2.0 * n,
                    start + 2.0 * n + 2.0,
                    0,
                    "0",
                    cpu_s=1.5 + n,
                )
                for n in range(4)
            ]
            rows.append(EdgeRow(("bin/t",), start + 8.0, start + duration, 0, "0"))
            history.record_edges(record.id, None, rows, "ninja:tree")
            for second in range(int(duration) + 1):
                history.update_live(
                    record.id,
                    0,
                    {},
                    None,
                    Sampled(start + second, 0.0, 0.0, 0.7 * second, 0, 0, 0, 0, 0, 0, None),
                )
            history.finish(
                record.id,
                SUCCEEDED,
                start + duration,
                duration,
                0,
                None,
                None,
                0,
                {"step": {"tool": "ninja", "done": 5, "total": 5}},
            )


def test_add_cpu_restores_what_export_keeps_and_refuses_another_history(
    tmp_path: Path, recordings_module: tuple[Any, Any]
) -> None:
    eta_recordings, _ = recordings_module
    state = tmp_path / "state"
    _record(state, [10.0, 12.0])
    exported = eta_recordings.export(state, "tree", {"project": "tree"}, ["first", "again"])
    first = exported["runs"][0]
    # Each compile's sampled CPU as a fourth value; the link, which no sample saw, without.
    assert [edge[3] for edge in first["edges"][:4]] == [1.5, 2.5, 3.5, 4.5]
    assert len(first["edges"][4]) == 3
    assert first["cpu"][:3] == [[0.0, 0.0], [1.0, 0.7], [2.0, 1.4]]
    # A recording exported before the CPU was kept: add-cpu gives it back, nothing else moves.
    older = {
        **exported,
        "runs": [
            {**{k: v for k, v in run.items() if k != "cpu"}, "edges": [e[:3] for e in run["edges"]]}
            for run in exported["runs"]
        ],
    }
    assert eta_recordings.add_cpu(older, state, "tree") == exported
    # Another history (other durations) is not the one that recorded it.
    other = tmp_path / "other"
    _record(other, [10.0, 13.0])
    with pytest.raises(SystemExit, match=r"ran 13\.00 s"):
        eta_recordings.add_cpu(older, other, "tree")
    # The loader takes the fourth value into the history's edges.
    loaded = tmp_path / "loaded"
    [(build_id, _), _] = eta_recordings.load(exported, loaded)
    with History(loaded) as history:
        cpu = sorted(edge.cpu_s for edge in history.edges(build_id) if edge.cpu_s is not None)
    assert cpu == [1.5, 2.5, 3.5, 4.5]


def test_cpu_costing_scores_both_ways_and_splits_the_error(
    tmp_path: Path, recordings_module: tuple[Any, Any]
) -> None:
    """A constructed first build at -j1: 40 compiles of 2 CPU seconds each; the build gets a
    whole core for its first 40 s (2 s an edge) and half a core after (4 s an edge), 120 s in
    all. Costed in wall seconds the edges left cost what the edges done took, at the host's
    speed then; costed in CPU seconds over the build's CPU rate of the last 30 s, the same
    edges left take what they will at the speed now. Each way as eta_model computes a first
    build's ETA; the decomposition says the wall way's miss is the work it counted left."""
    _, eta_accuracy = recordings_module
    edges = []
    t = 0.0
    for n in range(40):
        took = 2.0 if t < 40.0 else 4.0
        edges.append([t, t + took, f"CMakeFiles/t.dir/u{n}.cc.o", 2.0])
        t += took
    duration = t
    cpu = []
    for second in range(int(duration) + 1):
        cpu.append([float(second), min(second, 40) * 1.0 + max(0, second - 40) * 0.5])
    run = {
        "label": "first build",
        "duration_s": duration,
        "edge_total": 40,
        "jobs": 1,
        "edges": edges,
        "fractions": [],
        "cpu": cpu,
    }
    directory = tmp_path / "runs"
    directory.mkdir()
    (directory / "tree.json").write_text(json.dumps({"project": "tree", "runs": [run]}))
    scored = eta_accuracy.cpu_costed(directory)
    assert duration == 120.0
    points = {p["at"]: p for p in scored["checkpoints"]}
    at_half = points[0.5]  # 60 s in: 20 edges of 2 s and 5 of 4 s done; 15 of 4 s left
    assert at_half["truth_s"] == 60.0
    split = at_half["decomposition"]
    assert split["work_left_true_s"] == 60.0
    # The 25 edges done took 2.4 s each: 15 x 2.4 = 36 s counted, at one edge at a time.
    assert split["work_left_counted_s"] == pytest.approx(36.0)
    assert split["edges_running_so_far"] == split["edges_running_after"] == 1.0
    assert at_half["wall_error"] == pytest.approx(-0.4)
    late = points[0.75]  # 90 s in: 32 done, one 2 s into its 4 s, 7 not started; 30 s left
    assert late["truth_s"] == 30.0
    # Wall: 8 edges left at about 2.76 s (the running one at least half its age again).
    assert late["wall_error"] == pytest.approx(-0.32, abs=0.01)
    # CPU: 15 CPU s left (7 x 2 and the running one's 1), at half a core: 30 s.
    assert late["cpu_rate_recent_error"] == pytest.approx(0.0, abs=1e-3)
    # Over the CPU rate so far (65 CPU s in 90 s) the same work says 20.8 s: the rate moved.
    assert late["cpu_rate_so_far_error"] == pytest.approx(-0.31, abs=0.01)
    assert late["exact_cpu_left_rate_so_far_error"] == pytest.approx(-0.31, abs=0.01)
    assert late["exact_cpu_left_rate_recent_error"] == pytest.approx(0.0, abs=1e-3)
    assert scored["first_builds"]["checkpoints"] == 3
    assert scored["first_builds"]["wall"]["with_eta"] == 3
    # Checkpoint by checkpoint: at 25% (30 s in, the host unchanged so far) all ways say the
    # same 50 s; at 50% and 75% the recent rate is closer than the wall costs.
    recent = scored["first_builds"]["cpu_rate_recent"]
    assert (recent["closer_than_wall"], recent["further_than_wall"]) == (2, 0)


def test_what_is_left_is_scheduled_as_ninja_runs_it(recordings_module: tuple[Any, Any]) -> None:
    """`schedule_left`: the edges running hold their jobs, one not started waits for the
    edges it depends on and for a free job. Two compiles (3 s running, 1 s to start), a link
    of both (0.5 s), on 2 jobs and on 1."""
    _recordings, accuracy = recordings_module
    waits = {"a.o": [], "b.o": [], "lib.a": ["a.o", "b.o"]}
    running = {"a.o": 3.0}
    to_start = {"b.o": 1.0, "lib.a": 0.5}
    assert accuracy.schedule_left(waits, running, to_start, set(), 2) == 3.5
    assert accuracy.schedule_left(waits, running, to_start, set(), 1) == 4.5
    assert accuracy.schedule_left(waits, {}, {"lib.a": 0.5}, {"a.o", "b.o"}, 2) == 0.5
