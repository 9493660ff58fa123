"""How right the ETA is, on recorded runs: the first method (by progress) against the learned one.

The sample project (`workbench.samples.sample_project`, generated with more units so a build has
a few dozen edges) is built several times through the real CLI and supervisor into a private
state directory, as a user would (`workbench run --name sample-project -- python -m
workbench.samples.sample_project build DIR --jobs N`): full builds with different -j (a
`ninja -t clean` between), one of them on a slowed host, then incremental rebuilds of one
touched source, then a full build with no name.

The slowed host: the whole `workbench run` (CLI, supervisor, build) in a CPU cgroup with a
quota of a fraction of one core (`--quota`; cgroup v1 `cpu.cfs_quota_us` or v2 `cpu.max`; the
benchmark runs as root), else pinned to one core with `taskset` beside busy-looping processes.
Busy loops alone hardly slow a build on a host whose scheduler groups processes by session
(autogroup): the build's session keeps its share. Either way the command line stays the same,
so the first method matches the slowed run with the earlier ones, as on a host that got loaded.

Every run is then played again from the history (`live_eta.Replay`): what each method would have
said at 25, 50 and 75% of the run's real duration, from what the history held before it,
against the time really left. Error = (estimate - truth) / truth; "none" when the method gave
no ETA. Both methods are measured in the same run on the same recordings.

Cost ("cost"): what the learned ETA adds to the supervisor on an ONNX Runtime-sized history
(20 earlier runs of 10k edges each): reading the references once at build start, against
`History.earlier_runs` (what the first method reads at start) on the same database, and one
tick (1k new edges, then the estimate) against the first method's estimate.

    python benchmarks/eta_accuracy.py [--units 24] [--quota 0.4] [--hogs 2] [--keep DIR]
    python benchmarks/eta_accuracy.py --replay DIR   # score a kept recording again
    python benchmarks/eta_accuracy.py --recordings [DIR]   # the third-party recordings

`--recordings` scores recorded real builds of third-party CMake projects
(`benchmarks/data/eta_runs/`, see `eta_recordings.py`): every run, first builds included, at
25, 50 and 75% of its real duration, what the supervisor's ETA would have said from what the
history held before it. Coverage = the share of checkpoints whose true time left lies inside the
range shown (low-high); a checkpoint with no ETA counts as outside. Error = (estimate - truth) /
truth. Printed per project and in all, and as a Markdown table ("table"). First builds (each
recording's first run) are reported apart ("first_builds", and per project
"first_builds_by_project"), and every recorded run is also played alone, as a first build of its
tree ("every_run_as_a_first_build"), with a leave-one-project-out check of the first-build range.
A run recorded with its contention (`eta_recordings.py watch`: the live view's other processes'
CPU, second by second) is played with it, as the supervisor read it, and again without it
("contention": the input's own effect). Baselines measured in the same run: the first method
(by progress, "baseline_*") and, for first builds, the edge-count-by-kind estimate the
first-build ETA was before it costed edges by source and running age ("by_kind_only_*").
Per condition ("by_condition", "conditions_table"): first builds and rebuilds, on a quiet host,
a shared one or with busy loops mid-build, and by how long the run took (`BUILD_LENGTHS`).
Recordings that keep their ninja graph ("dependencies") are also replayed by scheduling what
is left on the run's jobs, with every edge's true seconds and with the first-build model's
costs ("scheduled_with_the_graph").
"sampled_schedule": a first build's rest scheduled on the run's jobs with each edge's cost
drawn from the finished edges like it (the median of 16 seeded draws; `sampled_rest`, not
shipped) against the shipped estimate, per set of recordings (the six earlier ones from the
shared VM, its later ones, the H100 host's) and in all, with the spread over five seeds, and on
the recordings that keep their graph scheduled with its dependencies.
"censored_fit": a first build's rest scheduled on the run's jobs with its graph, each unknown
cost from a log-normal fitted per kind of edge to the finished edges with the running ones
censored at their age (so it can reach beyond the longest edge finished), with a weak prior on
the spread chosen by a rule stated before scoring and its weight chosen on the six earlier VM
recordings, the other sets held out (`censored_rest`, not shipped); with the expectations, with
draws, and with the running edges' rests or the costs of the edges not started at their truth
(where the error is). "pace_trust": the rebuilds replayed with their own pace trusted by
other rules (the one before this session's, the share of the work alone, the shipped one at
other evidence thresholds). "other_tree_prior": each first build of a tree another recording
also built, replayed with that recording in the history as another tree of the same sources
(shipped: `LiveEta.find_other_tree`; not the nothing-to-learn-from condition), by pairing: one
host's own recordings ("same host", what a user's history holds) or another host's.
"own_log_prior": each run recorded after another run of its tree (a clean rebuild) replayed as
the first run of its tree under workbench, the history empty but the tree's `.ninja_log` holding
the run before's edges (shipped: `LiveEta.before_build`, a tree ninja built before workbench
watched it), against the same runs with nothing to learn from and with their history.
"source_size_prior": each first build replayed with the units not started costed by their
source's bytes, with and without the tree's headers they include (`SizedCosts`: a slope fitted
to the finished units within their groups, shrunk by a ridge chosen on the earlier six; the
recordings keep the bytes, `eta_recordings.py source-bytes`), in the shipped formula and in the
censored fit's schedule (not shipped).
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import itertools
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.analysis import eta_model
from workbench.analysis.edges import source_of
from workbench.history.store import History
from workbench.samples import sample_project
from workbench.supervision import live_eta

CHECKPOINTS = (0.25, 0.5, 0.75)
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")


def make_cpu_cgroup(quota: float) -> Path | None:
    """A CPU cgroup limited to `quota` of one core; None where none can be made."""
    name = f"workbench-eta-accuracy-{os.getpid()}"
    try:
        if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
            group = CGROUP_V1 / name
            group.mkdir()
            (group / "cpu.cfs_period_us").write_text("100000\n")
            (group / "cpu.cfs_quota_us").write_text(f"{int(quota * 100000)}\n")
            return group
        if "cpu" in (CGROUP_V2 / "cgroup.controllers").read_text().split():
            group = CGROUP_V2 / name
            group.mkdir()
            (group / "cpu.max").write_text(f"{int(quota * 100000)} 100000\n")
            return group
    except OSError:
        return None
    return None


def remove_cgroup(group: Path) -> None:
    for _ in range(50):  # the supervisor may take a moment to leave after the CLI returned
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.2)


def workbench(
    state: Path, *args: str, prefix: tuple[str, ...] = (), cgroup: Path | None = None
) -> None:
    argv = [*prefix, sys.executable, "-m", "workbench", "--state-dir", str(state), *args]

    def join_cgroup() -> None:  # in the child before exec: everything it starts is inside
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")

    done = subprocess.run(argv, capture_output=True, text=True, check=False, preexec_fn=join_cgroup)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def build(
    state: Path,
    directory: Path,
    jobs: int,
    name: str | None,
    prefix: tuple[str, ...] = (),
    cgroup: Path | None = None,
) -> None:
    naming = ("--name", name) if name else ()
    command = sample_project.build_argv(directory, jobs)
    workbench(state, "run", *naming, "--", *command, prefix=prefix, cgroup=cgroup)


def clean(directory: Path) -> None:
    subprocess.run(
        ["ninja", "-C", str(directory / "build"), "-t", "clean"], check=True, capture_output=True
    )


def touch(path: Path) -> None:
    path.write_text(path.read_text() + "\n// touched\n")
    later = time.time() + 2  # newer than ninja's log, whatever the file system's resolution
    os.utime(path, (later, later))


def record_runs(
    state: Path,
    directory: Path,
    units: int,
    hogs: int,
    quota: float,
    depth: int = 6,
    quick: bool = False,
) -> list[dict[str, Any]]:
    """Build the plan; returns what each run was (in history order). `quick`: four runs, one of
    each kind (full, slowed, incremental, unnamed), instead of nine."""
    heavy = tuple(range(0, units, 5))
    sample_project.write_project(directory / "src", units=units, heavy=heavy, depth=depth)
    subprocess.run(
        sample_project.configure_argv(directory / "src", directory / "build"),
        check=True,
        capture_output=True,
    )
    plan: list[dict[str, Any]] = []

    def full(jobs: int, name: str | None = "sample-project", slowed: bool = False) -> None:
        clean(directory)
        group = make_cpu_cgroup(quota) if slowed else None
        how = None if not slowed else f"cgroup quota {quota} core" if group else "taskset+hogs"
        prefix = ("taskset", "-c", "0") if slowed and group is None else ()
        started: list[subprocess.Popen[bytes]] = []
        try:
            if prefix:
                for _ in range(hogs):
                    started.append(subprocess.Popen([*prefix, sys.executable, "-c", "while 1: 0"]))
            build(state, directory, jobs, name, prefix, group)
        finally:
            for hog in started:  # ours, by PID
                hog.kill()
                hog.wait()
            if group is not None:
                remove_cgroup(group)
        plan.append({"kind": "full", "jobs": jobs, "slowed": how, "named": name is not None})

    def incremental(jobs: int, source: str) -> None:
        touch(directory / "src" / source)
        build(state, directory, jobs, "sample-project")
        plan.append({"kind": "incremental", "jobs": jobs, "slowed": None, "named": True})

    if quick:
        full(2)
        full(2, slowed=True)
        incremental(2, "heavy_0.cc")
        full(2, name=None)
        return plan
    full(2)
    full(2)
    full(1)
    full(2, slowed=True)
    incremental(2, "heavy_5.cc")
    incremental(2, "heavy_10.cc")
    incremental(2, "heavy_0.cc")
    full(2)
    full(3, name=None)
    return plan


def cost(directory: Path, runs: int = 20, edges: int = 10_000) -> dict[str, Any]:
    """Start-up and per-tick cost of the learned ETA on a large synthetic history."""
    from workbench.analysis import eta_model
    from workbench.history.records import SUCCEEDED, EdgeRow, NewBuild

    key = "ninja:cost"
    with History(directory) as history:
        for run in range(runs + 1):
            record = history.create(
                NewBuild("cost", "run", ("ninja",), "/", "/", {}, "cost", False), now=run * 1e4
            )
            history.mark_running(record.id, 1, 1, run * 1e4)
            rows = [
                EdgeRow(
                    (f"CMakeFiles/t.dir/f{n}.cc.o",),
                    run * 1e4 + n * 0.1,
                    run * 1e4 + n * 0.1 + 1 + n % 7,
                    0,
                    "0",
                )
                for n in range(edges)
            ]
            if run < runs:
                history.record_edges(record.id, None, rows, key)
                history.finish(
                    record.id,
                    SUCCEEDED,
                    run * 1e4 + 1200,
                    1200.0,
                    0,
                    None,
                    None,
                    0,
                    {"step": {"tool": "ninja", "done": edges, "total": edges}},
                )
        current = runs + 1
        began = time.perf_counter()
        live = live_eta.LiveEta(history, current)
        live.learn(key)
        learn_s = time.perf_counter() - began
        began = time.perf_counter()
        live.earlier = history.earlier_runs("cost", current)
        earlier_s = time.perf_counter() - began
    assert live.pace is not None and len(live.pace.references) == runs
    ticks: list[float] = []
    old_ticks: list[float] = []
    done = 0
    while done < edges:
        batch = [
            (f"CMakeFiles/t.dir/f{n}.cc.o", 1.0, n * 0.1 + 1) for n in range(done, done + 1000)
        ]
        done += 1000
        began = time.perf_counter()
        live.pace.add(batch)
        live.estimate_at(done * 0.1, done / edges, (done, edges))
        ticks.append(time.perf_counter() - began)
        began = time.perf_counter()
        live_eta.estimate(done * 0.1, done / edges, live.earlier)
        old_ticks.append(time.perf_counter() - began)
    return {
        "history": f"{runs} earlier runs x {edges} edges",
        "learn_at_start_s": round(learn_s, 3),
        "baseline_earlier_runs_at_start_s (no samples stored)": round(earlier_s, 3),
        "tick_1k_new_edges_ms": round(statistics.median(ticks) * 1000, 2),
        "baseline_tick_ms": round(statistics.median(old_ticks) * 1000, 3),
        "references_used": len(eta_model.matching(edges, live.pace.references)),
    }


def find_other_tree_cost(edges: int = 12_000, trees: int = 10) -> dict[str, Any]:
    """What looking for another tree of the same sources costs the supervisor once, at a first
    build's start (`LiveEta.find_other_tree`), on a history of `trees` other ONNX Runtime-sized
    trees of `edges` edges each: where none covers the build (every candidate read) and where
    the newest does; against the way before session 9 in the same run (every candidate's rows
    read whole, `History.edges`, and every edge's tree key worked out)."""
    from workbench.analysis import eta_model
    from workbench.history.records import SUCCEEDED, EdgeRow, NewBuild

    def path(tree: str, n: int) -> str:
        return f"onnxruntime/CMakeFiles/{tree}.dir/core/d{n % 50}/f{n}.cc.o"

    work = Path(tempfile.mkdtemp(prefix="eta-find-cost-"))
    found: dict[str, Any] = {"history": f"{trees} other trees of {edges} edges each"}
    try:
        with History(work) as history:
            for tree in range(trees):
                record = history.create(
                    NewBuild(f"t{tree}", "run", ("ninja",), "/", "/", {}, f"k{tree}", False)
                )
                history.mark_running(record.id, 1, 1, 1000.0)
                rows = [
                    EdgeRow((path(f"t{tree}", n),), 1000.0 + n, 1001.5 + n, 0, "0")
                    for n in range(edges)
                ]
                history.record_edges(record.id, None, rows, f"ninja:tree{tree}")
                history.finish(record.id, SUCCEEDED, 2e4, 1e4, 0, None, None, 0, {})
            build = history.create(NewBuild("new", "run", ("ninja",), "/", "/", {}, "k", False))
            for case, stem in (("none covers", "g"), ("the newest covers", "f")):
                planned = [path("new", n).replace("/f", f"/{stem}") for n in range(edges)]
                eta_model.tree_key.cache_clear()
                eta_model.same_source.cache_clear()
                live = live_eta.LiveEta(history, build.id)
                live.learn("ninja:new")
                live.planned_outputs = tuple(planned)
                began = time.perf_counter()
                live.find_other_tree()
                shipped = time.perf_counter() - began
                assert (live.other is not None) == (stem == "f")
                eta_model.tree_key.cache_clear()
                eta_model.same_source.cache_clear()
                began = time.perf_counter()
                keys = {eta_model.tree_key(output) for output in planned}
                for other in history.runs_of_other_work("ninja:new", build.id, trees):
                    rows = [(e.outputs[0], e.ended - e.started) for e in history.edges(other)]
                    if eta_model._covering(keys, rows)[1] >= eta_model.OTHER_TREE_COVERS:
                        break
                before = time.perf_counter() - began
                found[f"{case}: find_ms"] = round(shipped * 1000, 1)
                found[f"{case}: before_session_9_ms"] = round(before * 1000, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return found


def first_build_cost(edges: int = 12_000, running: int = 16) -> dict[str, Any]:
    """What the first-build ETA costs the supervisor each second on an ONNX Runtime-sized
    graph (`edges` compiles, half done, `running` compilers seen): its tick with no new edge
    and with 1k new edges, against the by-kind-only estimate (a pass over the finished edges)."""
    from types import SimpleNamespace

    from workbench.analysis import eta_model
    from workbench.progress.live_view import RunningEdge

    outputs = [
        f"onnxruntime/CMakeFiles/onnxruntime_providers.dir/core/d{n % 50}/f{n}.cc.o"
        for n in range(edges)
    ]
    live = live_eta.LiveEta(None, 1)
    live.learn("ninja:first-build-cost")
    live.plan([(output, "CXX_COMPILER__onnxruntime_providers_Release") for output in outputs])
    half = edges // 2

    def finished(start: int, stop: int) -> list[SimpleNamespace]:
        return [
            SimpleNamespace(output=outputs[n], duration_s=1.0 + n % 7, end_s=n * 0.1)
            for n in range(start, stop)
        ]

    live.add_edges(finished(0, half - 1000))
    seen = [
        RunningEdge(f"/src/core/d{n % 50}/f{n}.cc", "cc1plus", "compiler", 3.0)
        for n in range(half, half + running)
    ]
    began = time.perf_counter()
    live.add_edges(finished(half - 1000, half))
    live.observe(1e6, 16, None, seen)
    live.estimate_at(half * 0.1 + 1, 0.5, (half, edges))
    with_new = time.perf_counter() - began
    ticks: list[float] = []
    baseline: list[float] = []
    assert live.pace is not None
    for tick in range(20):
        began = time.perf_counter()
        live.observe(1e6 + tick, 16, None, seen)
        live.estimate_at(half * 0.1 + 1 + tick, 0.5, (half, edges))
        ticks.append(time.perf_counter() - began)
        began = time.perf_counter()
        eta_model.extrapolate_by_kind(
            half * 0.1 + 1 + tick, edges, live.pace.finished, live.planned, live.pace.last_end_s
        )
        baseline.append(time.perf_counter() - began)
    # The sampled schedule (`sampled_rest`, scored in "sampled_schedule", not shipped) on the
    # same graph and moment: this benchmark's version passes over the graph each call.
    sampled: list[float] = []
    assert live.costs is not None
    for _tick in range(5):
        began = time.perf_counter()
        sampled_rest(live.costs, live.running_now() or {}, running, edges - half)
        sampled.append(time.perf_counter() - began)
    # The censored fit (`censored_rest`, scored in "censored_fit", not shipped), its expectations
    # scheduled on 16 jobs, on the same graph and moment (no dependencies: the list schedule).
    fitted: list[float] = []
    for _tick in range(5):
        began = time.perf_counter()
        censored_rest(live.costs, live.running_now() or {}, running, 1.0, 5.0)
        fitted.append(time.perf_counter() - began)
    # The shipped tick when another tree of the same sources is in the history
    # (`eta_model.from_other_tree`: each edge left costed and the rest scheduled on 16 jobs,
    # every compile before one link).
    live.other = eta_model.OtherTree(
        2, {eta_model.tree_key(o): 1.0 + n % 5 for n, o in enumerate(outputs)}, 1.0
    )
    live.waits = {"libonnxruntime.a": outputs}
    live.jobs = 16
    other: list[float] = []
    for tick in range(30):
        began = time.perf_counter()
        live.observe(1e6 + tick, 16, None, seen)
        said = live.estimate_at(half * 0.1 + 1 + tick, 0.5, (half, edges))
        other.append(time.perf_counter() - began)
        assert said is not None and "another tree" in said.basis
    computed: list[float] = []
    for _tick in range(5):
        began = time.perf_counter()
        eta_model.from_other_tree(live.costs, live.other, 16, live.running_now(), live.waits)
        computed.append(time.perf_counter() - began)
    return {
        "graph": f"{edges} edges, half done, {running} running",
        "first_build_tick_ms": round(statistics.median(ticks) * 1000, 3),
        "other_tree_schedule_ms": round(statistics.median(computed) * 1000, 2),
        "other_tree_tick_mean_ms (30 ticks a second apart: computed again at most 1% of the "
        "time, counted down between)": round(statistics.fmean(other) * 1000, 2),
        "sampled_schedule_call_ms (not shipped)": round(statistics.median(sampled) * 1000, 2),
        "censored_fit_scheduled_call_ms (not shipped)": round(statistics.median(fitted) * 1000, 2),
        "first_build_tick_1k_new_edges_ms": round(with_new * 1000, 2),
        "baseline_by_kind_only_tick_ms": round(statistics.median(baseline) * 1000, 3),
    }


def score(history: History, build_id: int) -> dict[str, Any]:
    replay = live_eta.Replay.of(history, build_id)
    scored: dict[str, Any] = {"duration_s": round(replay.duration_s, 2)}
    for method in ("by_progress", "learned"):
        errors: dict[str, Any] = {}
        inside = 0
        for share in CHECKPOINTS:
            at = share * replay.duration_s
            truth = replay.duration_s - at
            estimate = getattr(replay, method)(at)
            if estimate is None:
                errors[f"{share:.0%}"] = None
                continue
            errors[f"{share:.0%}"] = round((estimate.remaining_s - truth) / truth, 3)
            if estimate.holds(truth):
                inside += 1
        scored[method] = {"errors": errors, "truth_inside_range": inside}
        if method == "learned":
            final = replay.learned(0.5 * replay.duration_s)
            scored["learned_basis"] = final.basis if final else None
    return scored


def summary(runs: list[dict[str, Any]], method: str) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for share in CHECKPOINTS:
        key = f"{share:.0%}"
        errors = [run[method]["errors"][key] for run in runs]
        given = [abs(error) for error in errors if error is not None]
        table[key] = {
            "median_abs_error": round(statistics.median(given), 3) if given else None,
            "max_abs_error": round(max(given), 3) if given else None,
            "estimates": len(given),
            "none": len(errors) - len(given),
        }
    table["truth_inside_range"] = sum(run[method]["truth_inside_range"] for run in runs)
    table["checkpoints"] = len(runs) * len(CHECKPOINTS)
    return table


def replay_of(
    history: History,
    build_id: int,
    run: dict[str, Any] | None,
    waits: Mapping[str, Sequence[str]] | None = None,
) -> live_eta.Replay:
    """The run played again; with the contention its live view said when the recording kept it
    (`eta_recordings.py watch`), which the ETA reads as the supervisor's does."""
    watched = (run or {}).get("contention")
    contention = None
    if watched:
        contention = (
            int(watched["cpus"]),
            [(t, now, mean, int(samples)) for t, now, mean, samples in watched["other"]],
        )
    return live_eta.Replay.of(history, build_id, contention, (run or {}).get("jobs"), waits)


def checkpoints(
    history: History,
    build_id: int,
    run: dict[str, Any] | None = None,
    waits: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """What the supervisor's ETA says at each checkpoint of one recorded run, against the truth.
    A run recorded with its contention is also played without it ("without_contention_*"): the
    contention input's own effect, the same moment, the same edges."""
    replay = replay_of(history, build_id, run, waits)
    blind = (
        live_eta.Replay.of(history, build_id, None, None, waits)
        if replay.contention is not None
        else None
    )
    found: list[dict[str, Any]] = []
    for share in CHECKPOINTS:
        at = share * replay.duration_s
        truth = replay.duration_s - at
        said = replay.learned(at)
        # The baseline, measured in the same run: the first method (by progress: earlier
        # builds with the same ETA key, else the fraction so far extrapolated), which is what a
        # first build's ETA was before it was weighed by kind of edge.
        before = replay.by_progress(at)
        baseline = (
            {}
            if before is None
            else {
                "baseline_eta_s": round(before.remaining_s, 1),
                "baseline_inside": before.holds(truth),
                "baseline_error": round((before.remaining_s - truth) / truth, 3),
            }
        )
        if said is None:
            found.append(
                {
                    "at": share,
                    "duration_s": round(replay.duration_s, 1),
                    "truth_s": round(truth, 1),
                    "eta": None,
                    **baseline,
                }
            )
            continue
        inside = said.holds(truth)
        kind_only: dict[str, Any] = {}
        unloaded: dict[str, Any] = {}
        if blind is not None:
            without = blind.learned(at)
            if without is not None:
                unloaded["without_contention_eta_s"] = round(without.remaining_s, 1)
                unloaded["without_contention_error"] = round(
                    (without.remaining_s - truth) / truth, 3
                )
                unloaded["without_contention_inside"] = without.holds(truth)
        pace = replay.live.pace
        if said.first_build and pace is not None and replay.edge_total:
            # The first-build method before it costed edges by source: each kind of edge left
            # at its kind's mean (the same finished edges, the same moment).
            from workbench.analysis import eta_model

            by_kind = eta_model.extrapolate_by_kind(
                at, replay.edge_total, pace.finished, replay.live.planned, pace.last_end_s
            )
            if by_kind is not None:
                kind_only = {
                    "by_kind_only_eta_s": round(by_kind.remaining_s, 1),
                    "by_kind_only_error": round((by_kind.remaining_s - truth) / truth, 3),
                }
        found.append(
            {
                "at": share,
                "duration_s": round(replay.duration_s, 1),
                "truth_s": round(truth, 1),
                "eta_s": round(said.remaining_s, 1),
                "low_s": None if said.low_s is None else round(said.low_s, 1),
                "high_s": None if said.high_s is None else round(said.high_s, 1),
                "inside": inside,
                "error": round((said.remaining_s - truth) / truth, 3),
                "first_build": said.first_build,
                "basis": said.basis,
                **baseline,
                **kind_only,
                **unloaded,
            }
        )
    return found


def coverage(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage and point error over checkpoints (a checkpoint with no ETA counts as missed)."""
    given = [p for p in points if p.get("eta_s") is not None]
    errors = [abs(p["error"]) for p in given]
    before = [p for p in points if p.get("baseline_eta_s") is not None]
    before_errors = [abs(p["baseline_error"]) for p in before]
    kind_only = [abs(p["by_kind_only_error"]) for p in points if "by_kind_only_error" in p]
    return {
        "by_kind_only_median_abs_error": (
            round(statistics.median(kind_only), 3) if kind_only else None
        ),
        "baseline_coverage": (
            round(sum(1 for p in before if p["baseline_inside"]) / len(points), 3)
            if points
            else None
        ),
        "baseline_median_abs_error": (
            round(statistics.median(before_errors), 3) if before_errors else None
        ),
        "checkpoints": len(points),
        "with_eta": len(given),
        "truth_inside_range": sum(1 for p in given if p["inside"]),
        "coverage": (
            round(sum(1 for p in given if p["inside"]) / len(points), 3) if points else None
        ),
        "median_abs_error": round(statistics.median(errors), 3) if errors else None,
    }


def score_recordings(directory: Path) -> dict[str, Any]:
    """Every recorded third-party run scored (see the module docstring)."""
    import eta_recordings

    projects: dict[str, Any] = {}
    everything: list[dict[str, Any]] = []
    rows = ["| project | run | duration | at | truth left | ETA (range) | inside | error |"]
    rows.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    recorded = eta_recordings.recordings(directory)
    by_name = {recording["project"]: recording for recording in recorded}
    for recording in recorded:
        work = Path(tempfile.mkdtemp(prefix="eta-recorded-"))
        try:
            scored_runs = []
            with History(work) as history:
                # The second of a pair ran with the first in its history, as another tree of
                # the same sources (another release, one host, one state directory): so it is
                # played.
                before = built_before(recording, by_name)
                waits = recording.get("dependencies") or None
                for build_id, run in load_as_recorded(recording, work, recorded):
                    points = checkpoints(history, build_id, run, waits)
                    load = load_of(recording, run)
                    for point in points:
                        point["contention_kept"] = "contention" in run
                        point["load"] = load
                        point["another_tree"] = before is not None
                    everything += points
                    scored_runs.append({"label": run["label"], "points": points})
                    for point in points:
                        rows.append(_table_row(recording["project"], run, point))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        project_points = [p for run in scored_runs for p in run["points"]]
        projects[recording["project"]] = {
            "source": recording.get("source"),
            "shape": recording.get("shape"),
            **coverage(project_points),
            "runs": scored_runs,
        }
    by_share = {
        f"{share:.0%}": coverage([p for p in everything if p["at"] == share])
        for share in CHECKPOINTS
    }
    # A recording's first run is its tree's first build: its checkpoints count whatever the ETA
    # said, none included (counting only those where it said "first build" left those out).
    first = [p for project in projects.values() for p in project["runs"][0]["points"]]
    for project in projects.values():
        for index, run in enumerate(project["runs"]):
            for point in run["points"]:
                point["run"] = "first build" if index == 0 else "rebuild"
    for point in everything:
        if point["run"] == "first build":
            point["learned_from"] = ANOTHER_TREE if point["another_tree"] else NOTHING_TO_LEARN_FROM
    conditions = by_condition(everything)
    as_first = replayed_as_first_builds(directory)
    kept = [p for p in everything if p.get("contention_kept")]
    return {
        "all": coverage(everything),
        "by_condition": conditions,
        "conditions_table": conditions_table(conditions, projects),
        "by_checkpoint": by_share,
        "first_builds": coverage(first) if first else None,
        "first_builds_by_project": {
            name: coverage([p for p in project["runs"][0]["points"]])
            for name, project in projects.items()
        },
        "every_run_as_a_first_build": as_first,
        "contention": contention_scored(kept) if kept else None,
        "cpu_costing": cpu_costed(directory),
        "scheduled_with_the_graph": scheduled(directory),
        "sampled_schedule": sampled_schedule(directory),
        "censored_fit": censored_fit(directory),
        "pace_trust": pace_trust(directory),
        "source_size_prior": source_size_prior(directory),
        "other_tree_prior": other_tree_prior(directory),
        "own_log_prior": own_log_prior(directory),
        "projects": projects,
        "table": "\n".join(rows),
    }


QUIET = "quiet host"
SHARED = "shared host"
BUSY = "busy loops mid-build"


def load_of(recording: dict[str, Any], run: dict[str, Any]) -> str:
    """The load a run was recorded under: busy loops started and stopped mid-build (`watch`),
    else the recording's "load" (`eta_recordings.py record`: a quiet host when its load
    average was under a quarter of its cores before the plan), else a host shared with others'
    work (the 2-core VM's earlier recordings, which say so in their host notes)."""
    if run.get("contention", {}).get("hogs_from_s") is not None:
        return BUSY
    if recording.get("load") in (QUIET, SHARED):
        return str(recording["load"])
    if "nothing else running" in str(recording.get("host", "")):
        return QUIET  # `record` before it wrote "load" (847910b): run on the idle H100 host
    return SHARED


NOTHING_TO_LEARN_FROM = "nothing to learn from"
ANOTHER_TREE = "an earlier release built before on this host"


def built_before(
    recording: dict[str, Any], by_name: Mapping[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The recording built just before `recording` in its history (`pair`, "2 of 2"), if any."""
    pair = recording.get("pair")
    if pair is None or not str(recording.get("pair_order", "")).startswith("2 of 2"):
        return None
    return by_name.get(pair)


def load_as_recorded(
    recording: dict[str, Any], work: Path, recorded: Sequence[dict[str, Any]]
) -> list[tuple[int, dict[str, Any]]]:
    """`eta_recordings.load`, the recording built just before it in its history first
    (`built_before`: the second of a pair of releases ran with the first there)."""
    import eta_recordings

    before = built_before(recording, {r["project"]: r for r in recorded})
    if before is not None:
        eta_recordings.load(before, work)
    return eta_recordings.load(recording, work)


# How long a run took, in three bins: the recordings' H100 runs at -j16 last seconds, the
# VM's first builds of fmt and googletest half an hour; an ONNX Runtime build takes hours. The
# bins were set after the figures at 30 s, 1 min and 2 min had been looked at: say so.
BUILD_LENGTHS: tuple[tuple[str, float, float], ...] = (
    ("runs under 30 s", 0.0, 30.0),
    ("runs of 30 s to 2 min", 30.0, 120.0),
    ("runs of 2 min or more", 120.0, math.inf),
)


def by_condition(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage and error per condition: first builds and rebuilds, each per load
    (`load_of`), and each of those over all loads; first builds also by what their history
    held (nothing to learn from, or an earlier release of the tree: `built_before`); all runs
    and first builds with nothing to learn from also by how long the run took
    (`BUILD_LENGTHS`)."""
    found: dict[str, Any] = {}
    for run in ("first build", "rebuild"):
        mine = [p for p in points if p["run"] == run]
        found[f"{run}s"] = coverage(mine)
        if run == "first build":
            for held in (NOTHING_TO_LEARN_FROM, ANOTHER_TREE):
                chosen = [p for p in mine if p.get("learned_from") == held]
                if chosen:
                    found[f"first builds, {held}"] = coverage(chosen)
        for load in (QUIET, SHARED, BUSY):
            chosen = [p for p in mine if p["load"] == load]
            if chosen:
                found[f"{run}s, {load}"] = coverage(chosen)
    for load in (QUIET, SHARED, BUSY):
        chosen = [p for p in points if p["load"] == load]
        if chosen:
            found[f"all runs, {load}"] = coverage(chosen)
    for name, shortest, longest in BUILD_LENGTHS:
        chosen = [p for p in points if shortest <= p["duration_s"] < longest]
        if chosen:
            found[f"all {name}"] = coverage(chosen)
        alone = [p for p in chosen if p.get("learned_from") == NOTHING_TO_LEARN_FROM]
        if alone:
            found[f"first builds, nothing to learn from, {name}"] = coverage(alone)
    found["all"] = coverage(points)
    return found


def conditions_table(conditions: dict[str, Any], projects: dict[str, Any]) -> str:
    """Markdown: coverage and median error per condition, then per recording."""
    rows = [
        "| condition / recording | checkpoints | with an ETA | truth inside | coverage | "
        "median error |",
        "| --- | --- | --- | --- | --- | --- |",
    ]

    def row(name: str, c: dict[str, Any]) -> str:
        error = c["median_abs_error"]
        return (
            f"| {name} | {c['checkpoints']} | {c['with_eta']} | {c['truth_inside_range']} | "
            f"{100 * (c['coverage'] or 0):.0f}% | "
            f"{'-' if error is None else f'{100 * error:.1f}%'} |"
        )

    rows += [row(name, c) for name, c in conditions.items()]
    rows += [row(name, c) for name, c in projects.items()]
    return "\n".join(rows)


def schedule_left(
    waits: dict[str, list[str]],
    running: dict[str, float],
    to_start: dict[str, float],
    finished: set[str],
    jobs: int,
) -> float:
    """Seconds until the last edge ends when what is left runs as ninja would: the edges
    running (output → seconds still to run) hold their jobs, an edge not started (output → its
    seconds) starts, in the graph's order, once every edge it waits for (`waits`) has ended and
    a job is free."""
    done = set(finished)
    ends = [(rest, output) for output, rest in running.items()]
    heapq.heapify(ends)
    waiting = [output for output in waits if output in to_start]
    waiting += [output for output in to_start if output not in waits]
    now = 0.0
    while True:
        ready = [o for o in waiting if all(d in done for d in waits.get(o, ()))]
        for output in ready[: max(0, jobs - len(ends))]:
            waiting.remove(output)
            heapq.heappush(ends, (now + to_start[output], output))
        if not ends:
            return now
        now, output = heapq.heappop(ends)
        done.add(output)


def scheduled(directory: Path) -> dict[str, Any] | None:
    """The first builds of recordings that keep their ninja graph (`dependencies`), replayed at
    each checkpoint by scheduling what is left on the run's jobs (`schedule_left`): with every
    edge's true seconds (does the graph explain the time left?) and with the costs the
    first-build ETA gives the edges left (`EdgeCosts`: is the schedule what it lacks?),
    against the shipped estimate at the same checkpoints."""
    import eta_recordings

    rows: list[dict[str, Any]] = []
    recorded = eta_recordings.recordings(directory)
    for recording in recorded:
        waits = recording.get("dependencies")
        if not waits:
            continue
        work = Path(tempfile.mkdtemp(prefix="eta-scheduled-"))
        try:
            with History(work) as history:
                build_id, run = load_as_recorded(recording, work, recorded)[0]
                replay = replay_of(history, build_id, run, waits or None)
                times = {edge[2]: (edge[0], edge[1]) for edge in run["edges"]}
                for share in CHECKPOINTS:
                    at = share * replay.duration_s
                    truth = replay.duration_s - at
                    said = replay.learned(at)
                    finished = {o for o, (_, end) in times.items() if end <= at}
                    running = {
                        o: end - at for o, (start, end) in times.items() if start <= at < end
                    }
                    to_start = {o: end - start for o, (start, end) in times.items() if start > at}
                    exact = schedule_left(waits, running, to_start, finished, run["jobs"])
                    costs = replay.live.costs
                    modelled = None
                    if costs is not None:
                        ages = replay.live.running_now() or {}
                        means = costs._means(ages)
                        rests = {o: 0.0 for o in running}
                        for output, age in ages.items():
                            cost, known = costs.cost(output, means)
                            least = 0.0 if known else eta_model.RUNNING_REST * age
                            rests[output] = max(cost - age, least)
                        guesses = {o: costs.cost(o, means)[0] for o in to_start}
                        modelled = schedule_left(waits, rests, guesses, finished, run["jobs"])
                    rows.append(
                        {
                            "recording": recording["project"],
                            "at": share,
                            "truth_s": round(truth, 2),
                            "true_costs_scheduled_s": round(exact, 2),
                            "model_costs_scheduled_s": None
                            if modelled is None
                            else round(modelled, 2),
                            "shipped_eta_s": None if said is None else round(said.remaining_s, 2),
                        }
                    )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if not rows:
        return None

    def median_error(key: str) -> float | None:
        errors = [abs(r[key] - r["truth_s"]) / r["truth_s"] for r in rows if r[key] is not None]
        return round(statistics.median(errors), 3) if errors else None

    return {
        "checkpoints": len(rows),
        "true_costs_scheduled_median_abs_error": median_error("true_costs_scheduled_s"),
        "model_costs_scheduled_median_abs_error": median_error("model_costs_scheduled_s"),
        "shipped_median_abs_error": median_error("shipped_eta_s"),
        "rows": rows,
    }


def recording_set(project: str) -> str:
    """Which set a recording is of: the idle 16-core H100 host's, the shared VM's later ones
    (ONNX Runtime's pinned dependencies), or the six earlier ones from the shared VM."""
    if project.startswith("h100 "):
        return "H100 host"
    if project.startswith("vm "):
        return "VM, later"
    return "VM, earlier six"


# The sampled schedule's constants, chosen before any recording was scored with it (none fitted):
# 16 draws (the median of 16 is steady to a few per cent and a tick stays in milliseconds), at
# most 128 edges placed one by one a draw (8 per job at -j16: the tail; before them the others'
# mean work fills the jobs evenly, so a 12,000-edge graph costs what a 128-edge one does), a
# pool of at least 5 finished edges before a group's or kind's own costs are drawn from, seed
# 0, and the range: the draws' 10% and 90% quantiles, widened to the first-build factors
# (eta_model.FIRST_LOW, FIRST_HIGH) around the median where those are wider.
SAMPLED_DRAWS = 16
SAMPLED_TAIL = 128
SAMPLED_MIN_POOL = 5
SAMPLED_SEED = 0
SAMPLED_QUANTILES = (0.1, 0.9)
# The seeds the figures are also given for: 16 draws are few, the spread says how much of a
# difference between the sampled estimate and the shipped one is the draws'.
SAMPLED_SPREAD_SEEDS = (0, 1, 2, 3, 4)


def _fill(free: list[float], work: float) -> list[float]:
    """Jobs free at `free` (sorted) after `work` seconds spread over them, the first free
    first: a water level."""
    if work <= 0.0:
        return free
    level, spent = free[0], 0.0
    for index in range(1, len(free) + 1):
        following = free[index] if index < len(free) else math.inf
        need = (following - level) * index
        if spent + need >= work:
            level += (work - spent) / index
            break
        spent += need
        level = following
    return [max(t, level) for t in free]


def sampled_rest(
    costs: eta_model.EdgeCosts,
    running: dict[str, float],
    jobs: int,
    left: int | None = None,
    waits: dict[str, list[str]] | None = None,
    draws: int = SAMPLED_DRAWS,
    seed: int = SAMPLED_SEED,
) -> list[float] | None:
    """The seconds until a first build's last edge ends, `draws` times (sorted), when what is
    left runs on `jobs` jobs: the edges running (`running`: output → age) hold their jobs;
    every other edge left starts on the first job free, in a random order (a list schedule),
    or with `waits` (the ninja graph's dependencies) once what it waits for has ended
    (`schedule_left`). An edge whose source finished elsewhere costs that source's mean; any
    other is a draw from the finished edges like it: its group's (part of the tree, kind),
    else its kind's (the first with `SAMPLED_MIN_POOL` edges), else its kind's however few,
    else every finished edge's. A running edge of unknown cost is drawn from those longer than
    its age (less its age; `eta_model.RUNNING_REST` of its age where none ran that long), a
    copy of a source running likewise. `left`: the edges ninja will still run (a random subset
    where fewer than the graph's). Without `waits` at most `SAMPLED_TAIL` edges are placed one
    by one a draw, after the others' mean work. Seeded (`seed`): one state, one answer. None
    before any edge finished."""
    finished = costs.finished
    if not finished or jobs <= 0:
        return None
    groups: dict[tuple[str, str], list[float]] = {}
    kinds: dict[str, list[float]] = {}
    for output, seconds in finished.items():
        plan = costs.planned.get(output)
        group = plan[2] if plan else (eta_model.part_of(output), eta_model._kind(output))
        groups.setdefault(group, []).append(seconds)
        kinds.setdefault(group[1], []).append(seconds)
    every = sorted(finished.values())
    for pool in (*groups.values(), *kinds.values()):
        pool.sort()

    def pool_of(group: tuple[str, str]) -> list[float]:
        kind = kinds.get(group[1])
        for pool in (groups.get(group), kind):
            if pool is not None and len(pool) >= SAMPLED_MIN_POOL:
                return pool
        return kind if kind else every

    ages = {o: a for o, a in running.items() if o in costs.planned and o not in finished}
    known: dict[str, float] = {}
    running_for: dict[str, float] = {}
    population: list[str] = []
    for output in costs.planned:
        if output in finished:
            continue
        cost, is_known = costs.cost(output)
        if is_known:
            known[output] = cost
        if output in ages:
            key = costs.planned[output][0]
            if key is not None and not is_known:
                running_for[key] = max(running_for.get(key, 0.0), ages[output])
        else:
            population.append(output)
    count = len(population)
    if left is not None:
        count = max(0, min(count, left - len(ages)))

    means: dict[tuple[str, str], float] = {}

    def expected(output: str) -> float:
        if output in known:
            return known[output]
        group = costs.planned[output][2]
        if group not in means:
            means[group] = statistics.fmean(pool_of(group))
        return means[group]

    rng = random.Random(seed)

    def draw(output: str, least: float = 0.0) -> float:
        if output in known:
            return known[output]
        key = costs.planned[output][0]
        if key in running_for:
            least = max(least, running_for[key])
        pool = pool_of(costs.planned[output][2])
        if least > 0.0:
            start = bisect.bisect_right(pool, least)
            if start >= len(pool):
                return (1.0 + eta_model.RUNNING_REST) * least
            return pool[rng.randrange(start, len(pool))]
        return pool[rng.randrange(len(pool))]

    bulk_mean = 0.0
    if waits is None and count > SAMPLED_TAIL:
        bulk_mean = sum(expected(o) for o in population) * count / max(1, len(population))
    spans: list[float] = []
    for _ in range(draws):
        rests = {
            output: max(0.0, known[output] - age if output in known else draw(output, age) - age)
            for output, age in ages.items()
        }
        chosen = rng.sample(population, min(count, SAMPLED_TAIL if waits is None else count))
        if waits is not None:
            to_start = {output: draw(output) for output in chosen}
            spans.append(schedule_left(waits, rests, to_start, set(finished), jobs))
            continue
        free = sorted([*rests.values(), *[0.0] * max(0, jobs - len(rests))])
        if count > SAMPLED_TAIL:
            free = _fill(free, max(0.0, bulk_mean - sum(expected(o) for o in chosen)))
        heapq.heapify(free)
        for output in chosen:
            heapq.heappush(free, heapq.heappop(free) + draw(output))
        spans.append(max(free))
    spans.sort()
    return spans


def sampled_estimate(
    replay: live_eta.Replay,
    said: live_eta.Eta,
    at: float,
    waits: Any = None,
    seed: int = SAMPLED_SEED,
) -> live_eta.Eta | None:
    """What the first-build ETA `said` at `at` would say with its rest scheduled on the run's
    jobs with sampled costs (`sampled_rest`): the median of the draws, the range their
    quantiles widened to the first-build factors around it, at the host's contention as the
    shipped one (`HostShare.apply`). None where the shipped one is no first-build estimate by
    edges (by progress, or learned from earlier runs): it stands."""
    live = replay.live
    if not said.first_build or live.costs is None or not live.jobs or replay.edge_total is None:
        return None
    if "by source and kind of edge" not in said.basis:
        return None
    done = sum(1 for end, _, _ in replay.edges if end <= at)
    spans = sampled_rest(
        live.costs, live.running_now() or {}, live.jobs, replay.edge_total - done, waits, seed=seed
    )
    if not spans:
        return None
    middle = statistics.median(spans)
    low = spans[int(SAMPLED_QUANTILES[0] * (len(spans) - 1))]
    high = spans[math.ceil(SAMPLED_QUANTILES[1] * (len(spans) - 1))]
    return live.host.apply(
        live_eta.Eta(
            middle,
            f"the rest scheduled on {live.jobs} jobs (median of {len(spans)} draws)",
            min(low, middle * eta_model.FIRST_LOW),
            max(high, middle * eta_model.FIRST_HIGH),
            True,
        )
    )


def sampled_schedule(directory: Path) -> dict[str, Any]:
    """A first build's rest scheduled on the run's jobs with sampled costs
    (`sampled_estimate`): the edges left are not all of a mean, and at high -j one or two
    long units end the build while the other jobs idle, which the shipped estimate (the work
    left at the pace kept so far) cannot say. Against the shipped one at every checkpoint of
    every recorded run, the same moment, the same edges: coverage and median error per set of
    recordings (`recording_set`) and in all, for first builds, rebuilds (which rest on earlier
    runs: both the same) and both. "graph": the first builds of recordings that keep their
    ninja graph, the draws scheduled with its dependencies, against the list schedule and the
    shipped estimate at the same checkpoints."""
    import eta_recordings

    points: list[dict[str, Any]] = []
    recorded = eta_recordings.recordings(directory)
    for recording in recorded:
        work = Path(tempfile.mkdtemp(prefix="eta-sampled-"))
        waits = recording.get("dependencies")
        try:
            with History(work) as history:
                for index, (build_id, run) in enumerate(
                    load_as_recorded(recording, work, recorded)
                ):
                    replay = replay_of(history, build_id, run, waits or None)
                    for share in CHECKPOINTS:
                        at = share * replay.duration_s
                        truth = replay.duration_s - at
                        point: dict[str, Any] = {
                            "recording": recording["project"],
                            "set": recording_set(recording["project"]),
                            "run": "first build" if index == 0 else "rebuild",
                            "at": share,
                            "truth_s": round(truth, 1),
                        }
                        said = replay.learned(at)
                        ways = {"shipped": said, "sampled": said}
                        if said is not None:
                            for seed in SAMPLED_SPREAD_SEEDS:
                                name = "sampled" if seed == SAMPLED_SEED else f"seed_{seed}"
                                ways[name] = sampled_estimate(replay, said, at, seed=seed) or said
                            if waits and index == 0:
                                ways["graph"] = sampled_estimate(replay, said, at, waits) or said
                        for name, eta in ways.items():
                            if eta is None:
                                continue
                            point[f"{name}_eta_s"] = round(eta.remaining_s, 1)
                            point[f"{name}_error"] = round((eta.remaining_s - truth) / truth, 3)
                            point[f"{name}_inside"] = eta.holds(truth)
                        points.append(point)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def figures(chosen: list[dict[str, Any]], name: str) -> dict[str, Any]:
        errors = [abs(p[f"{name}_error"]) for p in chosen if f"{name}_error" in p]
        inside = sum(1 for p in chosen if p.get(f"{name}_inside"))
        return {
            "coverage": round(inside / len(chosen), 3) if chosen else None,
            "median_abs_error": round(statistics.median(errors), 3) if errors else None,
        }

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    table: dict[str, Any] = {}
    rows = [
        "| set | runs | checkpoints | coverage shipped | coverage sampled | median error shipped "
        "| median error sampled | sampled over seeds 0-4 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for group in ("VM, earlier six", "VM, later", "H100 host", "all"):
        for run in ("first builds", "rebuilds", "both"):
            chosen = [
                p for p in points if group in ("all", p["set"]) and run in ("both", p["run"] + "s")
            ]
            shipped, sampled = figures(chosen, "shipped"), figures(chosen, "sampled")
            seeds = [
                figures(chosen, "sampled" if seed == SAMPLED_SEED else f"seed_{seed}")
                for seed in SAMPLED_SPREAD_SEEDS
            ]
            errors = [f["median_abs_error"] for f in seeds if f["median_abs_error"] is not None]
            covered = [f["coverage"] for f in seeds if f["coverage"] is not None]
            table[f"{group}, {run}"] = {
                "checkpoints": len(chosen),
                "shipped": shipped,
                "sampled": sampled,
                "sampled_over_the_seeds": {
                    "median_abs_error": [min(errors), max(errors)] if errors else None,
                    "coverage": [min(covered), max(covered)] if covered else None,
                },
            }
            rows.append(
                f"| {group} | {run} | {len(chosen)} | {pct(shipped['coverage'])} | "
                f"{pct(sampled['coverage'])} | {pct(shipped['median_abs_error'])} | "
                f"{pct(sampled['median_abs_error'])} | "
                f"{pct(min(errors) if errors else None)}-{pct(max(errors) if errors else None)} |"
            )
    with_graph = [p for p in points if p["run"] == "first build" and "graph_eta_s" in p]
    return {
        "constants": {
            "draws": SAMPLED_DRAWS,
            "tail_edges_placed_one_by_one": SAMPLED_TAIL,
            "min_pool": SAMPLED_MIN_POOL,
            "seed": SAMPLED_SEED,
            "range_quantiles": list(SAMPLED_QUANTILES),
            "spread_seeds": list(SAMPLED_SPREAD_SEEDS),
        },
        "by_set": table,
        "table": "\n".join(rows),
        "graph": {
            "checkpoints": len(with_graph),
            "shipped": figures(with_graph, "shipped"),
            "sampled_list_schedule": figures(with_graph, "sampled"),
            "sampled_with_the_graph": figures(with_graph, "graph"),
        },
        "checkpoints": points,
    }


# The censored fit (`censored_fit`, evaluated, not shipped). Its constants, each by a rule stated
# before any recording was scored with it: the prior's spread is the mean, over the six earlier VM
# recordings' first builds, of the standard deviation of their compile edges' log seconds (the
# spread of unit costs seen across recorded trees, computed in the run: `prior_spread`); its
# weight in pseudo-edges is chosen from CENSORED_WEIGHTS on those six alone (the smallest first-
# build median error of "fit, scheduled"), the other sets held out; 32 seeded draws for the
# drawn variant, its range their 10% and 90% quantiles widened to the first-build factors.
CENSORED_WEIGHTS = (2, 5, 10)
CENSORED_DRAWS = 32
CENSORED_SEED = 0
CENSORED_ITERATIONS = 50
EARLIER_SIX = "VM, earlier six"


def censored_lognormal(
    exact: list[float], censored: list[float], spread: float, weight: float
) -> tuple[float, float]:
    """(mu, sigma) of the log-normal that best fits `exact` durations and `censored` ones (edges
    still running: longer than their age), by expectation-maximisation on the log scale; with a
    prior of `weight` pseudo-observations of spread `spread` around the median of the exact ones
    (the edges that finished early are the short ones: without it three finished edges would
    say any spread). A running edge's log is taken at its expectation given that it is above
    its age, so the fit can reach beyond the longest edge that finished."""
    logs = [math.log(max(x, eta_model.MIN_WEIGHT_S)) for x in exact]
    cuts = [math.log(max(a, eta_model.MIN_WEIGHT_S)) for a in censored]
    centre = statistics.median(logs) if logs else (statistics.median(cuts) if cuts else 0.0)
    count = len(logs) + len(cuts) + weight
    s1, s2 = sum(logs), sum(y * y for y in logs)
    prior1, prior2 = weight * centre, weight * (spread * spread + centre * centre)
    mu = (s1 + sum(cuts) + prior1) / count
    variance = spread * spread
    normal = statistics.NormalDist()
    for _ in range(CENSORED_ITERATIONS):
        sigma = math.sqrt(variance)
        e1 = e2 = 0.0
        for cut in cuts:
            z = (cut - mu) / sigma
            hazard = normal.pdf(z) / max(1e-12, 1.0 - normal.cdf(z))
            mean = mu + sigma * hazard
            e1 += mean
            e2 += variance * (1.0 + z * hazard - hazard * hazard) + mean * mean
        new_mu = (s1 + e1 + prior1) / count
        new_variance = max(1e-4, (s2 + e2 + prior2) / count - new_mu * new_mu)
        done = abs(new_mu - mu) < 1e-7 and abs(new_variance - variance) < 1e-7
        mu, variance = new_mu, new_variance
        if done:
            break
    return mu, math.sqrt(variance)


def lognormal_mean(mu: float, sigma: float) -> float:
    return math.exp(mu + sigma * sigma / 2.0)


def rest_after(mu: float, sigma: float, age: float) -> float:
    """E[X - age | X > age] for X log-normal (mu, sigma): what is left of an edge that has run
    `age` seconds."""
    if age <= 0.0:
        return lognormal_mean(mu, sigma)
    normal = statistics.NormalDist()
    z = (math.log(age) - mu) / sigma
    above = 1.0 - normal.cdf(z)
    if above < 1e-12:
        return eta_model.RUNNING_REST * age  # beyond what the fit can say
    return max(0.0, lognormal_mean(mu, sigma) * (1.0 - normal.cdf(z - sigma)) / above - age)


def _drawn_above(rng: random.Random, mu: float, sigma: float, age: float) -> float:
    """A draw of X log-normal (mu, sigma) given X > age."""
    normal = statistics.NormalDist()
    low = normal.cdf((math.log(age) - mu) / sigma) if age > 0.0 else 0.0
    u = min(1.0 - 1e-12, max(1e-12, low + (1.0 - low) * rng.random()))
    return math.exp(mu + sigma * normal.inv_cdf(u))


def _cost_kind(output: str) -> str:
    """The fit's kinds: compiles, and everything else (links, archives, custom commands)."""
    return "compile" if eta_model._kind(output) in (eta_model.COMPILE, eta_model.CUDA) else "other"


# The shipped schedule (a heap, for a 12,000-edge graph each tick); `schedule_left` above is
# the plain one it is tested against.
schedule_graph = eta_model.schedule_left


def censored_rest(
    costs: eta_model.EdgeCosts,
    running: dict[str, float],
    jobs: int,
    spread: float,
    weight: float,
    waits: dict[str, list[str]] | None = None,
    draws: int = 0,
    seed: int = CENSORED_SEED,
    truth: dict[str, float] | None = None,
    oracle: str | None = None,
    unknown_cost: Callable[[str], float] | None = None,
) -> list[float] | None:
    """The seconds until a first build's last edge ends, scheduled on `jobs` jobs with its graph
    (`waits`, `schedule_graph`), each edge's cost from a log-normal fitted per kind
    (`_cost_kind`) to the finished edges and the running ones censored at their age
    (`censored_lognormal`): an edge whose source finished elsewhere costs that source's mean;
    any other edge not started the fit's mean, one running what the fit leaves of it at its age
    (`rest_after`), the other copies of a running source at least that copy's expected whole.
    `draws` > 0: that many schedules with every unknown cost drawn from the fit instead (sorted);
    else one, with the expectations. `oracle` ("running" or "unstarted", with `truth`: every
    edge's true seconds): those edges at their true cost, to say where the error is. `unknown_cost`:
    what an edge not started whose source did not finish elsewhere costs, in place of the fit's
    mean (the expectations only; `source_size_prior`). None before any edge finished."""
    finished = costs.finished
    if not finished or jobs <= 0:
        return None
    ages = {o: a for o, a in running.items() if o in costs.planned and o not in finished}
    by_kind: dict[str, tuple[list[float], list[float]]] = {}
    for output, seconds in finished.items():
        by_kind.setdefault(_cost_kind(output), ([], []))[0].append(seconds)
    known: dict[str, float] = {}
    for output in costs.planned:
        if output not in finished:
            cost, is_known = costs.cost(output)
            if is_known:
                known[output] = cost
    for output, age in ages.items():
        if output not in known:
            by_kind.setdefault(_cost_kind(output), ([], []))[1].append(age)
    every = list(finished.values())
    fits = {
        kind: censored_lognormal(exact or every, cut, spread, weight)
        for kind, (exact, cut) in by_kind.items()
    }
    for kind in ("compile", "other"):  # a kind none of which finished or runs: every edge's
        fits.setdefault(kind, censored_lognormal(every, [], spread, weight))
    order = list(waits) if waits else []
    order += [o for o in costs.planned if o not in (waits or {})]
    left = [o for o in order if o in costs.planned and o not in finished and o not in ages]
    rng = random.Random(seed)
    spans: list[float] = []
    for _ in range(max(1, draws)):
        rests: dict[str, float] = {}
        whole_of: dict[str, float] = {}
        for output, age in ages.items():
            if oracle == "running" and truth is not None:
                rests[output] = max(0.0, truth[output] - age)
            elif output in known:
                rests[output] = max(0.0, known[output] - age)
            else:
                mu, sigma = fits[_cost_kind(output)]
                rest = (
                    _drawn_above(rng, mu, sigma, age) - age if draws else rest_after(mu, sigma, age)
                )
                rests[output] = rest
                key = costs.planned[output][0]
                if key is not None:
                    whole_of[key] = max(whole_of.get(key, 0.0), age + rest)
        to_start: dict[str, float] = {}
        for output in left:
            if oracle == "unstarted" and truth is not None:
                to_start[output] = truth[output]
                continue
            if output in known:
                to_start[output] = known[output]
                continue
            mu, sigma = fits[_cost_kind(output)]
            cost = math.exp(rng.gauss(mu, sigma)) if draws else lognormal_mean(mu, sigma)
            if unknown_cost is not None and not draws:
                cost = unknown_cost(output)
            key = costs.planned[output][0]
            to_start[output] = max(cost, whole_of.get(key, 0.0)) if key is not None else cost
        spans.append(schedule_graph(waits, rests, to_start, jobs))
    spans.sort()
    return spans


def prior_spread(directory: Path) -> float:
    """The spread of unit costs across recorded trees, by the rule stated before scoring: the
    mean over the six earlier VM recordings' first builds of the standard deviation of their
    compile edges' log seconds."""
    import eta_recordings

    spreads = []
    for recording in eta_recordings.recordings(directory):
        if recording_set(recording["project"]) != EARLIER_SIX:
            continue
        logs = [
            math.log(max(eta_model.MIN_WEIGHT_S, edge[1] - edge[0]))
            for edge in recording["runs"][0]["edges"]
            if _cost_kind(edge[2]) == "compile"
        ]
        if len(logs) > 1:
            spreads.append(statistics.pstdev(logs))
    return statistics.fmean(spreads) if spreads else 1.0


def censored_fit(directory: Path) -> dict[str, Any]:
    """The censored fit (`censored_rest`) against the shipped estimate on every recorded first
    build (rebuilds rest on earlier runs: the same for both), the same moment, the same edges,
    scheduled with the recording's graph where it keeps one: per set of recordings
    (`recording_set`), for each prior weight; the weight chosen on the earlier six alone, the
    other sets held out. "fit, scheduled": the expectations; "fit, drawn": the median of the
    draws; "where the error is": the expectations with the running edges' or the edges not
    started at their true cost."""
    import eta_recordings

    spread = prior_spread(directory)
    ways = [f"scheduled, weight {w}" for w in CENSORED_WEIGHTS]
    ways += [f"drawn, weight {w}" for w in CENSORED_WEIGHTS]
    ways += [f"true running rests, weight {w}" for w in CENSORED_WEIGHTS]
    ways += [f"true costs not started, weight {w}" for w in CENSORED_WEIGHTS]
    points: list[dict[str, Any]] = []
    recorded = eta_recordings.recordings(directory)
    for recording in recorded:
        work = Path(tempfile.mkdtemp(prefix="eta-censored-"))
        waits = recording.get("dependencies") or None
        try:
            with History(work) as history:
                for index, (build_id, run) in enumerate(
                    load_as_recorded(recording, work, recorded)
                ):
                    replay = replay_of(history, build_id, run, waits or None)
                    truth_of = {edge[2]: edge[1] - edge[0] for edge in run["edges"]}
                    for share in CHECKPOINTS:
                        at = share * replay.duration_s
                        truth = replay.duration_s - at
                        said = replay.learned(at)
                        point: dict[str, Any] = {
                            "recording": recording["project"],
                            "set": recording_set(recording["project"]),
                            "run": "first build" if index == 0 else "rebuild",
                            "at": share,
                            "truth_s": round(truth, 2),
                        }
                        etas: dict[str, live_eta.Eta | None] = {"shipped": said}
                        live = replay.live
                        first = (
                            index == 0
                            and said is not None
                            and said.first_build
                            and "by source and kind of edge" in said.basis
                            and live.costs is not None
                            and live.jobs
                        )
                        for way in ways:
                            etas[way] = said
                            if not first or live.costs is None or not live.jobs:
                                continue
                            weight = float(way.rsplit(" ", 1)[1])
                            draws = CENSORED_DRAWS if way.startswith("drawn") else 0
                            oracle = (
                                "running"
                                if way.startswith("true running")
                                else "unstarted"
                                if way.startswith("true costs")
                                else None
                            )
                            spans = censored_rest(
                                live.costs,
                                live.running_now() or {},
                                live.jobs,
                                spread,
                                weight,
                                waits,
                                draws,
                                truth=truth_of,
                                oracle=oracle,
                            )
                            if not spans:
                                continue
                            middle = statistics.median(spans)
                            low = spans[int(SAMPLED_QUANTILES[0] * (len(spans) - 1))]
                            high = spans[math.ceil(SAMPLED_QUANTILES[1] * (len(spans) - 1))]
                            etas[way] = live.host.apply(
                                live_eta.Eta(
                                    middle,
                                    "censored fit",
                                    min(low, middle * eta_model.FIRST_LOW),
                                    max(high, middle * eta_model.FIRST_HIGH),
                                    True,
                                )
                            )
                        for way, eta in etas.items():
                            if eta is None:
                                continue
                            point[f"{way}: error"] = round((eta.remaining_s - truth) / truth, 3)
                            point[f"{way}: inside"] = eta.holds(truth)
                        points.append(point)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def figures(chosen: list[dict[str, Any]], way: str) -> dict[str, Any]:
        # As in the conditions table: a checkpoint with no ETA counts as outside the range, and
        # the median error is over those with one.
        errors = [abs(p[f"{way}: error"]) for p in chosen if f"{way}: error" in p]
        inside = sum(1 for p in chosen if p.get(f"{way}: inside"))
        return {
            "coverage": round(inside / len(chosen), 3) if chosen else None,
            "median_abs_error": round(statistics.median(errors), 3) if errors else None,
        }

    sets = (EARLIER_SIX, "VM, later", "H100 host", "all")
    by_set: dict[str, Any] = {}
    for group in sets:
        for run in ("first builds", "all runs"):
            chosen = [
                p
                for p in points
                if group in ("all", p["set"]) and (run == "all runs" or p["run"] == "first build")
            ]
            by_set[f"{group}, {run}"] = {
                "checkpoints": len(chosen),
                **{way: figures(chosen, way) for way in ("shipped", *ways)},
            }
    earlier = [p for p in points if p["set"] == EARLIER_SIX and p["run"] == "first build"]
    chosen_weight = min(
        CENSORED_WEIGHTS,
        key=lambda w: figures(earlier, f"scheduled, weight {w}")["median_abs_error"] or 9.9,
    )

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    rows = [
        "| set | runs | checkpoints | shipped: error / coverage | fit, scheduled | fit, drawn "
        "| true running rests | true costs not started |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in by_set.items():
        group, run = name.rsplit(", ", 1)
        cells = [
            f"{pct(row[way]['median_abs_error'])} / {pct(row[way]['coverage'])}"
            for way in (
                "shipped",
                f"scheduled, weight {chosen_weight}",
                f"drawn, weight {chosen_weight}",
                f"true running rests, weight {chosen_weight}",
                f"true costs not started, weight {chosen_weight}",
            )
        ]
        rows.append(f"| {group} | {run} | {row['checkpoints']} | " + " | ".join(cells) + " |")
    return {
        "constants": {
            "prior_spread (mean log-sd of compile edges, the earlier six's first builds)": round(
                spread, 3
            ),
            "weights_tried": list(CENSORED_WEIGHTS),
            "weight_chosen_on_the_earlier_six": chosen_weight,
            "draws": CENSORED_DRAWS,
            "seed": CENSORED_SEED,
        },
        "by_set": by_set,
        "table (the chosen weight; median error / coverage)": "\n".join(rows),
        # Each checkpoint with the shipped estimate and the chosen weight's ways (by_set has all).
        "checkpoints": [
            {
                key: value
                for key, value in point.items()
                if ": " not in key
                or key.startswith("shipped: ")
                or key.split(": ")[0].endswith(f"weight {chosen_weight}")
            }
            for point in points
        ],
    }


def other_tree_prior(directory: Path) -> dict[str, Any]:
    """The first builds of recordings of a tree that another recording also built (at least
    `eta_model.OTHER_TREE_COVERS` of its edges by `eta_model.tree_key`), replayed with that
    other recording loaded first into the same history as another tree on this host (another
    build directory, another -j, another release): what the supervisor's ETA, which looks for
    such a tree (`LiveEta.find_other_tree`, `eta_model.from_other_tree`), says at each
    checkpoint, once per other recording, against what it says with nothing to learn from,
    per set and per pairing (`pairing_of`: one host, alike hosts, another host)."""
    import eta_recordings

    recordings = eta_recordings.recordings(directory)
    keys = {
        r["project"]: {eta_model.tree_key(edge[2]) for edge in r["runs"][0]["edges"]}
        for r in recordings
    }
    by_name = {r["project"]: r for r in recordings}
    points: list[dict[str, Any]] = []
    for recording in recordings:
        name = recording["project"]
        own = keys[name]
        others = [
            other
            for other, seen in keys.items()
            if other != name and len(own & seen) >= eta_model.OTHER_TREE_COVERS * len(own)
        ]
        alone = _played_first_build(recording) if others else []
        for other in others:
            with_others = _played_first_build(recording, by_name[other])
            for (share, truth, said), (_, _, with_other) in zip(alone, with_others, strict=True):
                point: dict[str, Any] = {
                    "recording": name,
                    "set": recording_set(name),
                    "other_tree": other,
                    "pairing": pairing_of(recording, by_name[other]),
                    "at": share,
                    "truth_s": round(truth, 2),
                    "other_tree_basis": None if with_other is None else with_other.basis,
                }
                for way, eta in (("shipped", said), ("other_tree", with_other)):
                    if eta is not None:
                        point[f"{way}_error"] = round((eta.remaining_s - truth) / truth, 3)
                        point[f"{way}_inside"] = eta.holds(truth)
                points.append(point)

    def figures(chosen: list[dict[str, Any]], way: str) -> dict[str, Any]:
        errors = [abs(p[f"{way}_error"]) for p in chosen if f"{way}_error" in p]
        inside = sum(1 for p in chosen if p.get(f"{way}_inside"))
        return {
            "coverage": round(inside / len(chosen), 3) if chosen else None,
            "median_abs_error": round(statistics.median(errors), 3) if errors else None,
        }

    by_set = {}
    for group in (EARLIER_SIX, "VM, later", "H100 host", "all"):
        chosen = [p for p in points if group in ("all", p["set"])]
        by_set[group] = {
            "first_builds": len({p["recording"] for p in chosen}),
            "pairings_x_checkpoints": len(chosen),
            "shipped (nothing to learn from)": figures(chosen, "shipped"),
            "another tree in the history": figures(chosen, "other_tree"),
        }
    by_pairing = {}
    for kind in sorted({p["pairing"] for p in points}):
        chosen = [p for p in points if p["pairing"] == kind]
        by_pairing[kind] = {
            "first_builds": len({p["recording"] for p in chosen}),
            "pairings_x_checkpoints": len(chosen),
            "shipped (nothing to learn from)": figures(chosen, "shipped"),
            "another tree in the history": figures(chosen, "other_tree"),
        }
    return {
        "covers": eta_model.OTHER_TREE_COVERS,
        "by_set": by_set,
        "by_pairing": by_pairing,
        "checkpoints": points,
    }


def _played_first_build(
    recording: dict[str, Any], other: dict[str, Any] | None = None
) -> list[tuple[float, float, live_eta.Eta | None]]:
    """(share, the time really left, the ETA then) at each checkpoint of `recording`'s first
    build: alone, as the main table plays it (`replay_of`), or with `other` loaded before it
    into the same history (another tree of the same sources) and its graph's dependencies."""
    import eta_recordings

    found = []
    work = Path(tempfile.mkdtemp(prefix="eta-other-tree-"))
    try:
        with History(work) as history:
            if other is not None:
                eta_recordings.load(other, work)
            build_id, run = eta_recordings.load(recording, work)[0]
            if other is None:
                replay = replay_of(history, build_id, run)
            else:
                waits = recording.get("dependencies") or None
                replay = live_eta.Replay.of(history, build_id, None, run.get("jobs"), waits)
            for share in CHECKPOINTS:
                at = share * replay.duration_s
                found.append((share, replay.duration_s - at, replay.learned(at)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return found


def pairing_of(recording: dict[str, Any], other: dict[str, Any]) -> str:
    """Where the two recordings were made: "one host" (one plan on one host: the same `host`
    text, or they name each other as a pair, `pair`), "alike hosts" (two leases of the idle
    H100 host, or the shared VM in two sessions) or "another host" (the VM's against the
    H100's). A history is kept per user on one host: the first is what a user meets."""
    if recording.get("pair") == other["project"] or other.get("pair") == recording["project"]:
        return "one host"
    if recording.get("host") == other.get("host"):
        return "one host"
    if (
        recording_set(recording["project"]).split(",")[0]
        == (recording_set(other["project"]).split(",")[0])
    ):
        return "alike hosts"
    return "another host"


# The trust rules `pace_trust` replays the rebuilds with: (name, full trust at this share of
# the work, trusted fully beyond this evidence: `eta_model.PACE_EVIDENCE`; inf: never). The
# last is shipped; the first was until this session.
PACE_TRUST_RULES = (
    ("trusted fully at 0.25 of the work (before)", 0.25, math.inf),
    ("weighed by the share of the work done", 1.0, math.inf),
    (
        "weighed by the share done, or the edges' evidence (shipped)",
        eta_model.PACE_TRUSTED_AT,
        eta_model.PACE_EVIDENCE,
    ),
)
# The evidence thresholds replayed to choose `PACE_EVIDENCE` on the six earlier VM recordings
# (the best there, the smallest of those tied), the other sets held out.
PACE_EVIDENCE_TRIED = (2.0, 2.5, 3.0, 4.0)


def pace_trust(directory: Path) -> dict[str, Any]:
    """The recorded rebuilds (which rest on earlier runs of their tree) replayed with the learned
    ETA's own pace trusted by each rule in `PACE_TRUST_RULES` (before full trust, blended with
    the earlier runs' plain time left), and with the shipped rule at each evidence threshold in
    `PACE_EVIDENCE_TRIED`, per set of recordings: coverage and median error. Every recorded
    rebuild ran the same -j on a host much like its first build's; a rebuild on a slower host is
    what the evidence is for (tests/supervision/test_live_eta_learning.py: a 3x slower host)."""
    import eta_recordings

    kept = (eta_model.PACE_TRUSTED_AT, eta_model.PACE_EVIDENCE)
    rules = [*PACE_TRUST_RULES]
    rules += [
        (f"share done, or evidence beyond {e:g}", eta_model.PACE_TRUSTED_AT, e)
        for e in PACE_EVIDENCE_TRIED
    ]
    found: dict[str, Any] = {}
    try:
        for name, trusted_at, evidence in rules:
            eta_model.PACE_TRUSTED_AT, eta_model.PACE_EVIDENCE = trusted_at, evidence
            points: list[dict[str, Any]] = []
            for recording in eta_recordings.recordings(directory):
                work = Path(tempfile.mkdtemp(prefix="eta-pace-"))
                try:
                    with History(work) as history:
                        loaded = eta_recordings.load(recording, work)
                        for build_id, run in loaded[1:]:
                            for point in checkpoints(history, build_id, run):
                                point["set"] = recording_set(recording["project"])
                                points.append(point)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
            found[name] = {
                group: coverage([p for p in points if group in ("all", p["set"])])
                for group in (EARLIER_SIX, "VM, later", "H100 host", "all")
            }
    finally:
        eta_model.PACE_TRUSTED_AT, eta_model.PACE_EVIDENCE = kept
    return {
        "shipped": PACE_TRUST_RULES[-1][0],
        "evidence_chosen_on_the_earlier_six": eta_model.PACE_EVIDENCE,
        "rebuilds": found,
    }


# The ridges `source_size_prior` fits the slope with (pseudo-observations of "no relation", in
# log-bytes squared), the one scored best on the six earlier VM recordings' first builds chosen;
# a unit's factor is at most e^3 (20x) either way. 2, 5 and 20 were tried first, the others after
# those had been scored (the choice among seven on 18 checkpoints is itself noise: say so).
SIZE_RIDGES = (2.0, 5.0, 10.0, 20.0, 35.0, 50.0, 100.0)
# The ridge of the sized costs in the censored fit's schedule (fixed before scoring it).
SCHEDULED_RIDGE = 5.0
SIZE_FACTOR_CLIP = 3.0


def unit_of_output(source_bytes: Mapping[str, Any]) -> Callable[[str], str | None]:
    """The compile unit of the tree (a path `source_bytes` names) an edge's output compiles, as
    a live ETA would find it in the build's source directory: the longest ending of the object's
    source path (its CMake part joined with the path after `.dir/`) that names a unit, the
    shortest such path where several do; None for what is no compile."""
    by_ending: dict[str, str] = {}
    for unit in sorted(source_bytes, key=lambda p: (len(p), p)):
        parts = unit.split("/")
        for start in range(len(parts)):
            by_ending.setdefault("/".join(parts[start:]), unit)

    def find(output: str) -> str | None:
        source = source_of(output)
        if source is None:
            return None
        path = os.path.normpath(os.path.join(eta_model.part_of(output) or ".", source))
        parts = [part for part in path.split("/") if part not in ("..", ".")]
        for start in range(len(parts)):
            unit = by_ending.get("/".join(parts[start:]))
            if unit is not None:
                return unit
        return None

    return find


@dataclass
class SizedCosts(eta_model.EdgeCosts):
    """`EdgeCosts` with each compile edge whose source did not finish elsewhere costed at its
    group's (else kind's) mean times exp(slope · (its log bytes − the finished ones' mean log
    bytes in its group, else its kind)): log(own bytes), log(bytes with the tree's headers it
    includes). The slope is fitted per build to its finished compile edges within their groups
    (log seconds on log bytes), shrunk towards no relation by a ridge (`fit`)."""

    features: dict[str, tuple[float, float]] = field(default_factory=dict)
    slope: tuple[float, float] = (0.0, 0.0)
    centres: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def fit(self, ridge: float, timed: Mapping[str, float] | None = None) -> None:
        """The slope from the finished edges (`timed`: these instead, e.g. every edge of the
        build at its true cost: the slope in hindsight); the centres from the finished ones."""
        self.slope = _within_slope(self._by_group(timed), ridge)
        self.centres = {}
        by_kind: dict[str, list[tuple[float, float]]] = {}
        for group, (xs, _ys) in self._by_group(None).items():
            self.centres[group] = _centre(xs)
            by_kind.setdefault(group[1], []).extend(xs)
        for kind, xs in by_kind.items():
            self.centres[("*", kind)] = _centre(xs)

    def _by_group(
        self, timed: Mapping[str, float] | None
    ) -> dict[tuple[str, str], tuple[list[tuple[float, float]], list[float]]]:
        found: dict[tuple[str, str], tuple[list[tuple[float, float]], list[float]]] = {}
        for output, seconds in (self.finished if timed is None else timed).items():
            x = self.features.get(output)
            if x is None or seconds <= 0:
                continue
            xs, ys = found.setdefault((eta_model.part_of(output), _cost_kind(output)), ([], []))
            xs.append(x)
            ys.append(math.log(max(seconds, 0.01)))
        return found

    def factor(self, output: str) -> float:
        x = self.features.get(output)
        if x is None:
            return 1.0
        kind = _cost_kind(output)
        centre = self.centres.get((eta_model.part_of(output), kind)) or self.centres.get(
            ("*", kind)
        )
        if centre is None:
            return 1.0
        z = self.slope[0] * (x[0] - centre[0]) + self.slope[1] * (x[1] - centre[1])
        return math.exp(max(-SIZE_FACTOR_CLIP, min(SIZE_FACTOR_CLIP, z)))

    def cost(
        self,
        output: str,
        means: tuple[dict[tuple[str, str], float | None], dict[str, float | None]] | None = None,
    ) -> tuple[float, bool]:
        found, known = super().cost(output, means)
        return (found, True) if known else (found * self.factor(output), False)

    def left_of(self, running: Mapping[str, float] | None = None) -> tuple[float, float]:
        work, longest = super().left_of(running)
        ages = {
            output: age
            for output, age in (running or {}).items()
            if output not in self.finished and output in self.planned
        }
        means = self._means(ages)
        for output, (key, _kind, group) in self.planned.items():
            if output in self.finished or output in ages:
                continue
            if key is not None and key in self._source_done:
                continue
            factor = self.factor(output)
            if factor != 1.0:
                work += self._group_cost(group, means) * (factor - 1.0)
        return max(0.0, work), longest


def _centre(xs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.fmean(x[0] for x in xs), statistics.fmean(x[1] for x in xs)


def _within_slope(
    groups: Mapping[tuple[str, str], tuple[list[tuple[float, float]], list[float]]], ridge: float
) -> tuple[float, float]:
    """The ridge regression of log seconds on the two log sizes within groups (each group's own
    means taken out), shrunk towards (0, 0) by `ridge`."""
    sxx = [[ridge, 0.0], [0.0, ridge]]
    sxy = [0.0, 0.0]
    for xs, ys in groups.values():
        centre = _centre(xs)
        y_mean = statistics.fmean(ys)
        for x, y in zip(xs, ys, strict=True):
            d = (x[0] - centre[0], x[1] - centre[1])
            for i in range(2):
                sxy[i] += d[i] * (y - y_mean)
                for j in range(2):
                    sxx[i][j] += d[i] * d[j]
    det = sxx[0][0] * sxx[1][1] - sxx[0][1] * sxx[1][0]
    if abs(det) < 1e-12:
        return 0.0, 0.0
    return (
        (sxx[1][1] * sxy[0] - sxx[0][1] * sxy[1]) / det,
        (sxx[0][0] * sxy[1] - sxx[1][0] * sxy[0]) / det,
    )


def sized_costs(
    live: live_eta.LiveEta, find: Callable[[str], str | None], source_bytes: Mapping[str, Any]
) -> SizedCosts | None:
    """A `SizedCosts` of the live ETA's graph, with the edges it has seen finish."""
    if live.planned_outputs is None or live.pace is None:
        return None
    costs = SizedCosts.of(live.planned_outputs)
    assert isinstance(costs, SizedCosts)
    for output in live.planned_outputs:
        unit = find(output)
        if unit is not None:
            own, whole = source_bytes[unit]
            costs.features[output] = (math.log(own + 1.0), math.log(whole + 1.0))
    for output, seconds in live.pace.finished.items():
        costs.add(output, seconds)
    return costs


SIZED_WAYS = (
    *(f"sized, ridge {ridge:g}" for ridge in SIZE_RIDGES),
    "sized, the whole build's slope",
    "scheduled fit",
    "scheduled fit, sized",
)


def source_size_prior(directory: Path) -> dict[str, Any]:
    """Every recorded first build whose recording has its tree's `source_bytes`
    (`eta_recordings.py source-bytes`), replayed with each compile edge left whose source did
    not finish elsewhere costed by its source's bytes (`SizedCosts`): in the shipped formula,
    for each ridge in `SIZE_RIDGES` (chosen on the earlier six, the other sets held out), and
    with the slope of the whole build (every edge at its true cost: the best a slope could do);
    and in the censored fit's schedule (`censored_rest`, weight 5, the expectations) without and
    with it (ridge 5). Per set of recordings, the same moments, the same edges."""
    import eta_recordings

    points: list[dict[str, Any]] = []
    slopes: dict[str, list[float]] = {}
    calls_s: list[float] = []
    recorded = eta_recordings.recordings(directory)
    for recording in recorded:
        source_bytes = recording.get("source_bytes")
        if not source_bytes:
            continue
        find = unit_of_output(source_bytes)
        waits = recording.get("dependencies") or None
        work = Path(tempfile.mkdtemp(prefix="eta-sized-"))
        try:
            with History(work) as history:
                build_id, run = load_as_recorded(recording, work, recorded)[0]
                replay = replay_of(history, build_id, run, waits or None)
                truth_of = {edge[2]: edge[1] - edge[0] for edge in run["edges"]}
                whole = sized_costs(replay.live, find, source_bytes)
                whole_slope = (0.0, 0.0)
                if whole is not None:
                    whole_slope = _within_slope(whole._by_group(truth_of), 0.0)
                    slopes[recording["project"]] = [round(v, 2) for v in whole_slope]
                for share in CHECKPOINTS:
                    point = _sized_point(
                        recording, replay, share, find, source_bytes, waits, whole_slope, calls_s
                    )
                    points.append(point)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def figures(chosen: list[dict[str, Any]], way: str) -> dict[str, Any]:
        errors = [abs(p[f"{way}: error"]) for p in chosen if f"{way}: error" in p]
        inside = sum(1 for p in chosen if p.get(f"{way}: inside"))
        return {
            "coverage": round(inside / len(chosen), 3) if chosen else None,
            "median_abs_error": round(statistics.median(errors), 3) if errors else None,
        }

    by_set: dict[str, Any] = {}
    for group in (EARLIER_SIX, "VM, later", "H100 host", "all"):
        chosen = [p for p in points if group in ("all", p["set"])]
        by_set[group] = {
            "checkpoints": len(chosen),
            **{way: figures(chosen, way) for way in ("shipped", *SIZED_WAYS)},
        }
    earlier = by_set[EARLIER_SIX]
    chosen_ridge = min(
        SIZE_RIDGES,
        key=lambda r: earlier[f"sized, ridge {r:g}"]["median_abs_error"] or math.inf,
    )
    return {
        "ridges_tried": list(SIZE_RIDGES),
        "ridge_chosen_on_the_earlier_six": chosen_ridge,
        "factor_at_most": f"e^{SIZE_FACTOR_CLIP:g} either way",
        "slope_of_each_whole_build (log own bytes, log with headers)": slopes,
        "sized_call_ms (the shipped formula with the slope fitted, on the recordings' graphs of "
        "at most 245 edges: O(edges) a call, not shipped)": (
            round(1000 * statistics.median(calls_s), 2) if calls_s else None
        ),
        "by_set": by_set,
        "checkpoints": points,
    }


def _sized_point(
    recording: dict[str, Any],
    replay: live_eta.Replay,
    share: float,
    find: Callable[[str], str | None],
    source_bytes: Mapping[str, Any],
    waits: dict[str, list[str]] | None,
    whole_slope: tuple[float, float],
    calls_s: list[float],
) -> dict[str, Any]:
    """One checkpoint of `source_size_prior`: each way's error and whether the truth is inside."""
    at = share * replay.duration_s
    truth = replay.duration_s - at
    said = replay.learned(at)
    point: dict[str, Any] = {
        "recording": recording["project"],
        "set": recording_set(recording["project"]),
        "at": share,
        "truth_s": round(truth, 2),
    }
    etas: dict[str, live_eta.Eta | None] = {way: said for way in ("shipped", *SIZED_WAYS)}
    live = replay.live
    pace = live.pace
    total = replay.edge_total
    first = said is not None and said.first_build and "by source and kind" in said.basis
    costs = sized_costs(live, find, source_bytes) if first else None
    if costs is not None and pace is not None and total is not None:
        running = live.running_now() or {}
        for way in SIZED_WAYS:
            if way.startswith("scheduled"):
                if not live.jobs:
                    continue
                costs.fit(SCHEDULED_RIDGE)
                plain = eta_model.EdgeCosts.of(costs.planned)
                for output, seconds in costs.finished.items():
                    plain.add(output, seconds)
                sized = costs

                def unknown(output: str, sized: SizedCosts = sized) -> float:
                    return sized.cost(output)[0]

                spans = censored_rest(
                    plain,
                    running,
                    live.jobs,
                    1.011,
                    5.0,
                    waits,
                    unknown_cost=None if way == "scheduled fit" else unknown,
                )
                if spans:
                    etas[way] = live.host.apply(
                        live_eta.Eta(
                            spans[0],
                            way,
                            spans[0] * eta_model.FIRST_LOW,
                            spans[0] * eta_model.FIRST_HIGH,
                            True,
                        )
                    )
                continue
            started = time.perf_counter()
            if way == "sized, the whole build's slope":
                costs.fit(0.0)
                costs.slope = whole_slope
            else:
                costs.fit(float(way.rsplit(" ", 1)[1]))
            estimate = eta_model.extrapolate_by_kind(
                at, total, pace.finished, live.planned, pace.last_end_s, None, running, costs
            )
            calls_s.append(time.perf_counter() - started)
            if estimate is not None:
                etas[way] = live.host.apply(
                    live_eta.Eta(
                        estimate.remaining_s,
                        estimate.basis,
                        estimate.low_s,
                        estimate.high_s,
                        True,
                    )
                )
    for way, eta in etas.items():
        if eta is None:
            continue
        point[f"{way}: error"] = round((eta.remaining_s - truth) / truth, 3)
        point[f"{way}: inside"] = eta.holds(truth)
    return point


def contention_scored(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The checkpoints of runs recorded with their contention, the ETA with the contention
    input (as shipped) against the same ETA without it (`HostShare` left out)."""
    blind = [
        {
            **p,
            "eta_s": p.get("without_contention_eta_s"),
            "error": p.get("without_contention_error"),
            "inside": p.get("without_contention_inside"),
        }
        for p in points
    ]
    return {
        "with_the_contention_input": coverage(points),
        "without_it": coverage(blind),
        "checkpoints": [
            {
                "at": p["at"],
                "truth_s": p["truth_s"],
                "eta_s": p.get("eta_s"),
                "error": p.get("error"),
                "without_contention_eta_s": p.get("without_contention_eta_s"),
                "without_contention_error": p.get("without_contention_error"),
                "basis": p.get("basis"),
            }
            for p in points
        ],
    }


# Recent CPU rate window for the CPU-costed variant: the live ETA's own window for contention now.
RECENT_S = live_eta.CONTENTION_RECENT_S


def _cpu_at(series: list[tuple[float, float]], at: float) -> float:
    """The build's CPU seconds at `at` (linear between 1 Hz samples)."""
    times = [t for t, _ in series]
    index = bisect.bisect_right(times, at)
    if index == 0:
        return 0.0
    if index >= len(series):
        return series[-1][1]
    (t0, c0), (t1, c1) = series[index - 1], series[index]
    return c0 + (c1 - c0) * (at - t0) / (t1 - t0) if t1 > t0 else c1


def _first_build_at(
    run: dict[str, Any], at: float, value: Any
) -> tuple[eta_model.Estimate | None, eta_model.EdgeCosts, dict[str, float], int]:
    """The first-build ETA (`eta_model.extrapolate_by_kind`, as the live ETA calls it) at `at`
    with each edge costed by `value(edge, seconds it ran so far)`: its wall seconds, or its CPU
    seconds. Returns the estimate, the costs, the edges running (output: cost so far) and the
    edges finished."""
    edges = run["edges"]
    outputs = [edge[2] for edge in edges]
    costs = eta_model.EdgeCosts.of(outputs)
    finished: dict[str, float] = {}
    last_end = None
    for edge in sorted(edges, key=lambda edge: edge[1]):
        if edge[1] <= at:
            finished[edge[2]] = value(edge, edge[1] - edge[0])
            costs.add(edge[2], finished[edge[2]])
            last_end = edge[1]
    running = {edge[2]: value(edge, at - edge[0]) for edge in edges if edge[0] <= at < edge[1]}
    total = run["edge_total"] or len(edges)
    planned = eta_model.planned_kinds((output, None) for output in outputs)
    found = eta_model.extrapolate_by_kind(
        at, total, finished, planned, last_end, None, running, costs
    )
    return found, costs, running, len(finished)


def cpu_costed(directory: Path) -> dict[str, Any]:
    """Would costing edges in CPU seconds instead of wall seconds help a first build's ETA?

    Every recorded run with its CPU kept (`eta_recordings.py add-cpu`), played as a first build
    at 25/50/75% of its duration, four ways in the same run:
    - "wall" (as shipped, without the contention input: the same as "every_run_as_a_first_build"
      where no contention was kept): each edge left at what edges like it took in wall seconds,
      over the edge-seconds per second kept so far (`extrapolate_by_kind`);
    - "cpu_rate_so_far": the same model fed CPU seconds (an edge's sampled CPU; an edge no
      sample matched: the build's CPU over its span shared by the jobs), over the CPU per
      second kept so far;
    - "cpu_rate_recent": the CPU work left over the build's CPU rate in the last 30 s (the host
      now, not on average);
    - "exact_cpu_left_*": the build's exact CPU still to come (what no model knows) over the
      rate so far and the recent one: what CPU costing could do at best on this host, whose
      share of the CPU the build gets changes under it.
    "decomposition": the shipped estimate split into the work left it counted against the true
    work left (wall edge-seconds), and the edges running so far against after: where its error
    is. "copies": how alike the same source compiled twice is (median |ln(later/first)|) in
    wall and in CPU seconds, and in each first build the median later/first copy in both;
    "first_build_cpu_cores_by_tenth": the cores the build got in each tenth of it. A
    running edge's CPU so far is its final CPU pro rata (the recording keeps no per-second CPU
    of an edge)."""
    import eta_recordings

    checkpoints_found: list[dict[str, Any]] = []
    copies: dict[str, dict[str, Any]] = {}
    shares: dict[str, list[float | None]] = {}
    for recording in eta_recordings.recordings(directory):
        wall_spread: list[float] = []
        cpu_spread: list[float] = []
        first_ratios: list[tuple[float, float]] = []
        for index, run in enumerate(recording["runs"]):
            if "cpu" not in run:
                continue
            series = [(t, c) for t, c in run["cpu"]]
            jobs = run.get("jobs") or 1

            def cpu_of(
                edge: list[Any], so_far: float, series: Any = series, jobs: int = jobs
            ) -> float:
                began, ended = edge[0], edge[1]
                span = max(ended - began, 1e-3)
                whole = (
                    edge[3]
                    if len(edge) > 3
                    else (_cpu_at(series, ended) - _cpu_at(series, began)) / jobs
                )
                return whole * min(1.0, so_far / span)

            seen: dict[str, tuple[float, float]] = {}
            for edge in sorted(run["edges"], key=lambda edge: edge[1]):
                key = eta_model.same_source(edge[2])
                if key is None or len(edge) < 4:
                    continue
                wall, cpu = edge[1] - edge[0], edge[3]
                if key in seen and min(seen[key]) > 0.2 and min(wall, cpu) > 0.01:
                    wall_spread.append(abs(math.log(wall / seen[key][0])))
                    cpu_spread.append(abs(math.log(cpu / seen[key][1])))
                    if index == 0:
                        first_ratios.append((wall / seen[key][0], cpu / seen[key][1]))
                seen.setdefault(key, (wall, cpu))
            duration = run["duration_s"]
            if index == 0 and series:
                # The cores the build's processes got in each tenth of its first build.
                tenths: list[float | None] = []
                for tenth in range(10):
                    began, ended = tenth * duration / 10, (tenth + 1) * duration / 10
                    spent = _cpu_at(series, ended) - _cpu_at(series, began)
                    tenths.append(round(spent / (ended - began), 2) if ended > began else None)
                shares[recording["project"]] = tenths
            whole_cpu = series[-1][1] if series else 0.0
            for share in CHECKPOINTS:
                at = share * duration
                truth = duration - at
                point: dict[str, Any] = {
                    "project": recording["project"],
                    "run": run["label"],
                    "first_build": index == 0,
                    "at": share,
                    "truth_s": round(truth, 1),
                }
                wall, costs, running, done = _first_build_at(run, at, lambda e, s: s)
                cpu, cpu_costs, cpu_running, _ = _first_build_at(run, at, cpu_of)
                cpu_now = _cpu_at(series, at)
                window = min(RECENT_S, at)
                recent = (cpu_now - _cpu_at(series, at - window)) / window if window else 0.0
                if wall is not None:
                    point["wall_error"] = round((wall.remaining_s - truth) / truth, 3)
                    left = max(0, (run["edge_total"] or len(run["edges"])) - done)
                    counted = costs.left_of(running)[0] * left / max(1, costs.left)
                    true_left = sum(
                        edge[1] - max(edge[0], at) for edge in run["edges"] if edge[1] > at
                    )
                    busy = sum(min(edge[1], at) - edge[0] for edge in run["edges"] if edge[0] < at)
                    point["decomposition"] = {
                        "work_left_counted_s": round(counted, 1),
                        "work_left_true_s": round(true_left, 1),
                        "work_error": round(counted / true_left - 1, 3) if true_left else None,
                        "edges_running_so_far": round(busy / at, 2),
                        "edges_running_after": round(true_left / truth, 2),
                    }
                if cpu is not None:
                    point["cpu_rate_so_far_error"] = round((cpu.remaining_s - truth) / truth, 3)
                    edge_cpu = sum(cpu_costs.finished.values()) + sum(cpu_running.values())
                    if recent > 0 and cpu_now > 0:
                        # The edges' share of the build's CPU so far, applied to the rate now.
                        rate = recent * min(1.0, edge_cpu / cpu_now)
                        work = cpu.remaining_s * edge_cpu / at
                        point["cpu_rate_recent_error"] = round((work / rate - truth) / truth, 3)
                if cpu_now > 0 and recent > 0:
                    left_cpu = whole_cpu - cpu_now
                    point["exact_cpu_left_rate_so_far_error"] = round(
                        (left_cpu / (cpu_now / at) - truth) / truth, 3
                    )
                    point["exact_cpu_left_rate_recent_error"] = round(
                        (left_cpu / recent - truth) / truth, 3
                    )
                checkpoints_found.append(point)
        if wall_spread:
            copies[recording["project"]] = {
                "pairs": len(wall_spread),
                "wall_median_abs_log_ratio": round(statistics.median(wall_spread), 3),
                "cpu_median_abs_log_ratio": round(statistics.median(cpu_spread), 3),
                # In the first build: a later copy against the first one (1.0: alike).
                "first_build_pairs": len(first_ratios),
                "first_build_median_wall_ratio": round(
                    statistics.median(w for w, _ in first_ratios), 2
                )
                if first_ratios
                else None,
                "first_build_median_cpu_ratio": round(
                    statistics.median(c for _, c in first_ratios), 2
                )
                if first_ratios
                else None,
            }

    def medians(points: list[dict[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {"checkpoints": len(points)}
        for way in (
            "wall",
            "cpu_rate_so_far",
            "cpu_rate_recent",
            "exact_cpu_left_rate_so_far",
            "exact_cpu_left_rate_recent",
        ):
            errors = [abs(p[f"{way}_error"]) for p in points if f"{way}_error" in p]
            found[way] = {
                "median_abs_error": round(statistics.median(errors), 3) if errors else None,
                "with_eta": len(errors),
                # The shipped first-build range (x FIRST_LOW - x FIRST_HIGH) around it.
                "inside_the_shipped_range": sum(
                    1
                    for p in points
                    if f"{way}_error" in p
                    and eta_model.FIRST_LOW <= 1 / (1 + p[f"{way}_error"]) <= eta_model.FIRST_HIGH
                )
                if errors and not way.startswith("exact")
                else None,
            }
            if way != "wall":
                # Checkpoint by checkpoint against the shipped way (a median can fall on either
                # side of a few checkpoints; the pairs say whether a way is better).
                paired = [
                    abs(p[f"{way}_error"]) - abs(p["wall_error"])
                    for p in points
                    if f"{way}_error" in p and "wall_error" in p
                ]
                found[way]["closer_than_wall"] = sum(1 for d in paired if d < -0.005)
                found[way]["further_than_wall"] = sum(1 for d in paired if d > 0.005)
                found[way]["further_by_more_than_20_points"] = sum(1 for d in paired if d > 0.2)
                found[way]["closer_by_more_than_20_points"] = sum(1 for d in paired if d < -0.2)
        work = [abs(p["decomposition"]["work_error"]) for p in points if "decomposition" in p]
        ratio = [
            abs(
                p["decomposition"]["edges_running_after"]
                / p["decomposition"]["edges_running_so_far"]
                - 1
            )
            for p in points
            if "decomposition" in p and p["decomposition"]["edges_running_so_far"]
        ]
        found["wall_work_left_median_abs_error"] = (
            round(statistics.median(work), 3) if work else None
        )
        found["wall_parallelism_change_median_abs"] = (
            round(statistics.median(ratio), 3) if ratio else None
        )
        return found

    first = [p for p in checkpoints_found if p["first_build"]]
    return {
        "first_builds": medians(first),
        "every_run_as_a_first_build": medians(checkpoints_found),
        "by_project": {
            name: medians([p for p in first if p["project"] == name])
            for name in sorted({p["project"] for p in first})
        },
        # No parameter here is fitted; the first builds' figures without each project say how
        # much one tree moves them.
        "first_builds_without_each_project": {
            name: medians([p for p in first if p["project"] != name])
            for name in sorted({p["project"] for p in first})
        },
        "copies": copies,
        "first_build_cpu_cores_by_tenth": shares,
        "checkpoints": checkpoints_found,
    }


def replayed_as_first_builds(directory: Path) -> dict[str, Any]:
    """Every recorded run played again alone, in a history of its own: what the first-build
    ETA (no earlier run of the tree) would have said at each checkpoint. Three recorded first
    builds are nine checkpoints; the clean rebuilds are first builds too once their history is
    left out, which triples the checkpoints the first-build method is measured on.

    Leave one project out: the first-build range is a fixed factor around the estimate
    (eta_model.FIRST_LOW, FIRST_HIGH). Fitted on the other projects' runs (the smallest and
    largest truth/estimate ratio among them), it is scored on the project left out: whether a
    range chosen without seeing a tree holds that tree's truth, i.e. the shipped factors are not
    merely fitted to these three trees."""
    import eta_recordings

    from workbench.analysis import eta_model

    points: dict[str, list[dict[str, Any]]] = {}
    for recording in eta_recordings.recordings(directory):
        for run in recording["runs"]:
            work = Path(tempfile.mkdtemp(prefix="eta-first-"))
            try:
                alone = {**recording, "runs": [run]}
                with History(work) as history:
                    for build_id, _ in eta_recordings.load(alone, work):
                        for point in checkpoints(history, build_id, run):
                            point["run"] = run["label"]
                            points.setdefault(recording["project"], []).append(point)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    everything = [p for found in points.values() for p in found]
    left_out: dict[str, Any] = {}
    for name, found in points.items():
        others = [
            p["truth_s"] / p["eta_s"]
            for other, theirs in points.items()
            if other != name
            for p in theirs
            if p.get("eta_s")
        ]
        if not others:
            continue
        low, high = min(others), max(others)
        held = [p for p in found if p.get("eta_s")]
        inside = sum(1 for p in held if low * p["eta_s"] <= p["truth_s"] <= high * p["eta_s"])
        left_out[name] = {
            "range_fitted_on_the_others": [round(low, 3), round(high, 3)],
            "checkpoints": len(found),
            "coverage_with_that_range": round(inside / len(found), 3) if found else None,
            "coverage_with_the_shipped_range": coverage(found)["coverage"],
        }
    return {
        "shipped_range": [eta_model.FIRST_LOW, eta_model.FIRST_HIGH],
        "all": coverage(everything),
        "projects": {name: coverage(found) for name, found in points.items()},
        "leave_one_project_out": left_out,
    }


def own_log_prior(directory: Path) -> dict[str, Any]:
    """Every run recorded after another run of its own tree (a clean rebuild), played as the
    first run of its tree under workbench: a history with nothing of it, but the tree's
    `.ninja_log` holding the run before's edges (`LiveEta.before_build`: a tree ninja built
    before workbench watched it). Against the same runs played with nothing to learn from
    (`replay_of` alone) and with their history (as the main table plays the rebuilds)."""
    import eta_recordings

    methods = ("own .ninja_log", "nothing to learn from", "history of the tree")
    points: dict[str, list[dict[str, Any]]] = {method: [] for method in methods}
    for recording in eta_recordings.recordings(directory):
        runs = recording["runs"]
        waits = recording.get("dependencies") or None
        for before, run in itertools.pairwise(runs):
            log = {edge[2]: max(0.0, edge[1] - edge[0]) for edge in before["edges"]}
            for method in methods:
                work = Path(tempfile.mkdtemp(prefix="eta-own-log-"))
                try:
                    kept = [before, run] if method == "history of the tree" else [run]
                    with History(work) as history:
                        build_id, _ = eta_recordings.load({**recording, "runs": kept}, work)[-1]
                        replay = live_eta.Replay.of(
                            history,
                            build_id,
                            None,
                            run.get("jobs"),
                            waits,
                            ("build/.ninja_log", log) if method == methods[0] else None,
                        )
                        for share in CHECKPOINTS:
                            at = share * replay.duration_s
                            truth = replay.duration_s - at
                            said = replay.learned(at)
                            point: dict[str, Any] = {
                                "recording": recording["project"],
                                "run": run["label"],
                                "at": share,
                                "truth_s": round(truth, 1),
                            }
                            if said is not None:
                                point.update(
                                    eta_s=round(said.remaining_s, 1),
                                    inside=said.holds(truth),
                                    error=round((said.remaining_s - truth) / truth, 3),
                                    basis=said.basis,
                                )
                            points[method].append(point)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    learned = [p for p in points[methods[0]] if ".ninja_log" in (p.get("basis") or "")]
    kept = ("checkpoints", "with_eta", "truth_inside_range", "coverage", "median_abs_error")
    return {
        "runs": len(points[methods[0]]) // len(CHECKPOINTS),
        "checkpoints_whose_eta_learned_from_the_log": len(learned),
        **{
            method: {key: value for key, value in coverage(found).items() if key in kept}
            for method, found in points.items()
        },
        "checkpoints": points[methods[0]],
    }


def _table_row(project: str, run: dict[str, Any], point: dict[str, Any]) -> str:
    if point.get("eta_s") is None:
        said, inside, error = "none", "no", "-"
    else:
        said = f"{point['eta_s']:.0f}s ({point['low_s']:.0f}-{point['high_s']:.0f})"
        inside = "yes" if point["inside"] else "NO"
        error = f"{100 * point['error']:+.0f}%"
    return (
        f"| {project} | {run['label']} | {run['duration_s']:.0f}s | {point['at']:.0%} | "
        f"{point['truth_s']:.0f}s | {said} | {inside} | {error} |"
    )


def main() -> None:
    if "--recordings" in sys.argv:
        sys.path.insert(0, str(Path(__file__).parent))
        import eta_recordings

        index = sys.argv.index("--recordings")
        given = sys.argv[index + 1 : index + 2]
        directory = Path(given[0]) if given else eta_recordings.DATA
        result = score_recordings(directory)
        print(
            json.dumps(
                {
                    "benchmark": "eta_accuracy --recordings",
                    "command": "python benchmarks/eta_accuracy.py --recordings"
                    + ("" if directory == eta_recordings.DATA else f" {directory}"),
                    "coverage": "share of checkpoints (25/50/75% of each run) whose true time "
                    "left lies inside the ETA's range; no ETA counts as outside",
                    "error": "(estimate - truth) / truth of the time left",
                    **result,
                    "cost": {**first_build_cost(), "find_other_tree": find_other_tree_cost()},
                },
                indent=2,
            )
        )
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--units", type=int, default=24, help="translation units (every 5th heavy)")
    parser.add_argument("--quota", type=float, default=0.4, help="cores the slowed run gets")
    parser.add_argument("--hogs", type=int, default=2, help="busy loops (without a cgroup)")
    parser.add_argument("--keep", type=Path, help="record into this directory and keep it")
    parser.add_argument("--replay", type=Path, help="score the recording kept in this directory")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller: 3 light units, no hogs, 4 builds (one of each kind; checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.units, args.hogs = 3, 0
    missing = sample_project.missing_tools() + [t for t in ("taskset",) if not shutil.which(t)]
    if missing:
        raise SystemExit(f"eta_accuracy: missing {', '.join(missing)}")
    work = args.replay or args.keep or Path(tempfile.mkdtemp(prefix="eta-accuracy-"))
    try:
        state = work / "state"
        began = time.monotonic()
        if args.replay:
            plan = json.loads((work / "plan.json").read_text())
        else:
            plan = record_runs(
                state,
                work / "sample",
                args.units,
                args.hogs,
                args.quota,
                1 if args.quick else 6,
                quick=args.quick,
            )
            (work / "plan.json").write_text(json.dumps(plan))
        recorded_s = time.monotonic() - began
        runs: list[dict[str, Any]] = []
        with History(state) as history:
            ids = sorted(record.id for record in history.builds(limit=len(plan)))
            for build_id, what in zip(ids, plan, strict=True):
                if build_id == ids[0]:
                    continue  # nothing earlier to learn from: both methods only extrapolate
                runs.append({"build": build_id, **what, **score(history, build_id)})
        print(
            json.dumps(
                {
                    "benchmark": "eta_accuracy",
                    "command": "python benchmarks/eta_accuracy.py "
                    f"--units {args.units} --quota {args.quota}",
                    "host_cpus": os.cpu_count(),
                    "load_average_at_end": os.getloadavg(),
                    "recording_s": round(recorded_s, 1),
                    "error": "(estimate - truth) / truth of the time left, at a share of the "
                    "run's real duration",
                    "baseline_by_progress": summary(runs, "by_progress"),
                    "learned": summary(runs, "learned"),
                    "cost": cost(work / "cost-state", *((3, 1000) if args.quick else ())),
                    "runs": runs,
                },
                indent=2,
            )
        )
    finally:
        if args.keep is None and args.replay is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
