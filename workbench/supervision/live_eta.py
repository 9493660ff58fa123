"""How long a running build still needs: learned from exact edges, else from earlier progress.

Four ways, the better one that applies:

- learned (`workbench.analysis.eta_model`): when the build runs ninja, earlier runs that built
  the same tree and targets (`work_key`, whatever the builds were called or their -j) left
  every edge's exact time. The running build's finished edges, weighted by those times, say how
  far it is; the earlier runs say what was left from there, and this build's own pace against
  theirs scales it (a loaded host, fewer jobs). Full and incremental builds are told apart by
  the edges ninja says it will run and never stand in for each other. The references are read
  once, when the work is known (at start, or when the sampler finds the build's ninja); each
  tick then costs O(new edges + references). The edges the sampler sees running bound it from
  below: one runs on one core, and what is left of it (its earlier time at this build's pace,
  less its age) is left of the build.
- a first build of its work whose sources another tree on this host built before (another
  build directory, variant or release: its fullest run built at least 80% of this build's
  edges, `History.runs_of_other_work`, read once): each edge left at its time there at this
  build's pace against it, scheduled on the build's jobs with its graph's dependencies
  (`eta_model.from_other_tree`), computed again at most 1% of the time and counted down
  between; the basis names the other tree's build.
- a first build of its work with nothing to learn from: each edge of its ninja graph still
  to run at what this build's edges like it took (the same source built for another target,
  else its kind in its part of the tree, else its kind; the edges running counted in their
  kind's mean), the edges the sampler sees running as partly done, over the parallelism kept
  so far, never less than the rest of the longest edge running (`eta_model.EdgeCosts`, kept
  edge by edge); a wide range that says "first build".
- by progress (the first ETA): earlier builds with the same ETA key (same name, command and
  settings) recorded their progress fraction once a second. At fraction f now, an earlier build
  still needed its duration minus the time it reached f; the median over the latest few is the
  estimate. Without earlier builds, the time so far is extrapolated from the fraction.

A Nix build's ETA is by progress (its derivations' counts and the ninja step of each building),
but for a first build of its variant while one derivation builds, in its ninja: that ninja's
ETA by the first three ways, its work keyed by the store path the derivation builds
(`BuilderNinja`), then what followed the other tree's ninja where that was a Nix build.

Every estimate carries a range (`low_s`-`high_s`): the spread of the earlier runs it rests on,
widened more the less of the build is done.

Each way measures a pace from the build so far, under the contention so far. When the other
builds on the host (`LiveView.other`: their CPU, over the build's life and now) take more or
fewer cores now than on average so far, the rest of the build goes slower or faster than its
pace so far says: `HostShare` scales the estimate by the cores the build can get now against
those it got on average, and the range spans both (the contention lasts, or it goes back).
"""

from __future__ import annotations

import bisect
import functools
import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.analysis import eta_model
from workbench.analysis.edges import kind_of as edge_kind
from workbench.analysis.edges import source_of
from workbench.analysis.ninja_log import NinjaLogError, NinjaLogReader
from workbench.history.records import EarlierRun
from workbench.history.store import History
from workbench.progress import Progress
from workbench.progress.live_view import Contention, EtaView, ProgressView

if TYPE_CHECKING:
    from workbench.analysis.graph import BuildGraph
    from workbench.analysis.recorder import EdgeRecorder

# Extrapolating from the first per cent of a build is noise: configure steps, then fast files.
_MIN_FRACTION = 0.05
_MIN_ELAPSED_S = 10.0
# Earlier runs of the same work read at start: enough that full builds survive a streak of
# incremental ones, few enough that reading their edges stays well under a second.
REFERENCE_RUNS = 20


# Contention now: other builds' CPU averaged over about this many seconds (one busy second is
# noise, a build started beside this one is not).
CONTENTION_RECENT_S = 30.0
# Samples of contention before it counts: a mean over a few seconds is no "so far".
CONTENTION_MIN_SAMPLES = 10
# The rest of a build is never said to run more than this many times slower or faster than its
# pace so far because of contention: the build's processes keep a scheduler's share whatever
# the others take, and one census is no forecast.
CONTENTION_MOST = 3.0
# A change in contention smaller than this share of the estimate is left out of it (noise).
CONTENTION_NOTED = 0.1


@dataclass
class HostShare:
    """Other builds' CPU over the build's life against now, as a factor on the time left.

    The cores the build can get are `min(demand, cpus - other)`: on a full host, what the
    others took is exactly what the build did not get; below that the build is held back by
    its own jobs (`demand`), not by them. The pace so far was kept at the mean contention; the
    rest goes at the recent one."""

    cpus: int = 0
    demand: float = 0.0
    mean_other: float = 0.0
    recent_other: float | None = None
    samples: int = 0
    _last_t: float | None = None

    def add(self, t: float, cpus: int, jobs: int | None, other: Any) -> None:
        """One sample's `progress.live_view.Contention` (None: nothing measured) at epoch `t`."""
        if other is None or cpus <= 0 or other.samples <= 0:
            return
        self.cpus = cpus
        self.demand = float(min(cpus, jobs)) if jobs else float(cpus)
        self.mean_other = other.mean_cpu_cores
        self.samples = other.samples
        now = other.cpu_cores
        if self.recent_other is None or self._last_t is None:
            self.recent_other = now
        else:
            weight = min(1.0, max(0.0, t - self._last_t) / CONTENTION_RECENT_S)
            self.recent_other += weight * (now - self.recent_other)
        self._last_t = t

    def _cores(self, other: float) -> float:
        return max(0.1, min(self.demand, self.cpus - other))

    def factor(self) -> float | None:
        """Time left at the recent contention over time left at the mean one; None while too
        little is measured or the change is below notice."""
        if self.samples < CONTENTION_MIN_SAMPLES or self.recent_other is None or not self.cpus:
            return None
        factor = self._cores(self.mean_other) / self._cores(self.recent_other)
        factor = min(CONTENTION_MOST, max(1.0 / CONTENTION_MOST, factor))
        return factor if abs(factor - 1.0) >= CONTENTION_NOTED else None

    def words(self, factor: float) -> str:
        return (
            f"other builds now take {self.recent_other or 0.0:.1f} of {self.cpus} cores "
            f"against {self.mean_other:.1f} on average so far: the rest ×{factor:.2f}"
        )

    def apply(self, eta: Eta) -> Eta:
        """`eta` with the rest of the build at the recent contention; its range spans both."""
        factor = self.factor()
        if factor is None:
            return eta
        low = eta.low_s if eta.low_s is not None else eta.remaining_s
        high = eta.high_s if eta.high_s is not None else eta.remaining_s
        # A range with a low and no upper end (what follows is not counted) stays open above.
        open_above = eta.low_s is not None and eta.high_s is None
        return Eta(
            eta.remaining_s * factor,
            f"{eta.basis}; {self.words(factor)}",
            min(low, low * factor),
            None if open_above else max(high, high * factor),
            eta.first_build,
        )


def did_work(run: EarlierRun) -> bool:
    """Whether an earlier run built something (EarlierRun.did_work; history's earlier_runs
    already passes no-ops over)."""
    return run.did_work()


@dataclass(frozen=True)
class Eta:
    """Seconds left, the range they are likely in, and what the figure rests on."""

    remaining_s: float
    basis: str
    low_s: float | None = None
    high_s: float | None = None
    first_build: bool = False
    """Nothing earlier to learn from: this build's own pace so far, extrapolated."""

    def holds(self, truth_s: float) -> bool:
        """Whether the range holds `truth_s`: no range holds nothing; a range with no upper
        end (what follows is not counted) holds what is at least its low."""
        if self.low_s is None:
            return False
        return self.low_s <= truth_s and (self.high_s is None or truth_s <= self.high_s)

    def view(self) -> EtaView:
        """The live view's ETA (`progress.live_view.EtaView`)."""
        return EtaView(
            round(self.remaining_s, 1),
            None if self.low_s is None else round(self.low_s, 1),
            None if self.high_s is None else round(self.high_s, 1),
            self.basis,
            self.first_build,
        )


def progress_fraction(progress: Progress) -> float | None:
    """How much of the build is done, 0.0-1.0, when the log says; None when it does not."""
    if progress.nix and progress.planned > 0:
        inner = sum(d.step.fraction for d in progress.derivations if d.step is not None)
        return min(1.0, (progress.done + inner) / progress.planned)
    if progress.step is not None and progress.step.total > 0:
        return progress.step.fraction
    return None


def _time_at(curve: Sequence[tuple[float, float]], fraction: float) -> float | None:
    """When an earlier build reached `fraction` (linear between samples), None if never."""
    fractions = [f for _, f in curve]
    index = bisect.bisect_left(fractions, fraction)
    if index >= len(curve):
        return None
    t1, f1 = curve[index]
    if index == 0 or f1 <= fraction:
        return t1
    t0, f0 = curve[index - 1]
    return t0 + (t1 - t0) * (fraction - f0) / (f1 - f0) if f1 > f0 else t1


def estimate(elapsed_s: float, fraction: float | None, earlier: Sequence[EarlierRun]) -> Eta | None:
    """The ETA by progress (the first method), or None when nothing supports one (no-op runs do
    not count)."""
    earlier = [run for run in earlier if did_work(run)]
    share = fraction or 0.0
    if earlier:
        left: list[float] = []
        for run in earlier:
            reached = None
            if fraction is not None and run.curve:
                reached = _time_at(run.curve, fraction)
            left.append(max(0.0, run.duration_s - (reached if reached is not None else elapsed_s)))
        ids = ", ".join(f"#{run.build_id}" for run in earlier)
        how = "at this progress" if fraction is not None else "by elapsed time"
        width = eta_model.band(share)
        return Eta(
            statistics.median(left),
            f"earlier builds {ids} ({how})",
            min(left) * (1.0 - width),
            max(left) * (1.0 + width),
        )
    if fraction is not None and fraction >= _MIN_FRACTION and elapsed_s >= _MIN_ELAPSED_S:
        remaining = elapsed_s * (1.0 - fraction) / fraction
        width = 2 * eta_model.band(share)
        return Eta(
            remaining,
            "extrapolated from progress so far",
            remaining * max(0.0, 1.0 - width),
            remaining * (1.0 + width),
            first_build=True,
        )
    return None


# The most of one core the estimate from another tree of the same sources may take, on average
# (`LiveEta._estimate_from_other`).
OTHER_TREE_SHARE = 0.01
# The share of the graph's edges ninja must say it runs (its status line's total) for the other
# tree's schedule to stand for the rest: fewer is an incremental build (some edges up to date,
# which ones not known here), whose rest is extrapolated from this run's own edges. The totals,
# not the edges left: the edges read from the log lag ninja's count (the latest waits for the
# next to tell whether it had more outputs). Not 1.0: a few may differ (a manifest's own
# regeneration).
INCREMENTAL_SHARE = 0.9


# -- learned from exact edges ----------------------------------------------------------------


def references(
    history: History, work_key: str, before_id: int, limit: int = REFERENCE_RUNS
) -> list[eta_model.ReferenceRun]:
    """The latest successful runs of the same work that ran edges, newest first."""
    found: list[eta_model.ReferenceRun] = []
    for build_id in history.runs_of_work(work_key, before_id, limit):
        record = history.get(build_id)
        if record.started is None or record.duration_s is None:
            continue
        reference = eta_model.reference_run(
            build_id,
            record.started,
            record.duration_s,
            ((edge.outputs[0], edge.started, edge.ended) for edge in history.edges(build_id)),
        )
        if reference is not None:
            found.append(reference)
    return found


def work_key_of(recorder: EdgeRecorder | None) -> str | None:
    """What an `EdgeRecorder`'s build builds: its command's tree and targets, else those of the
    first ninja the sampler found (`python -m ... build` that execs ninja, a build script)."""
    from workbench.analysis.recorder import NinjaCommand, derivation_work_key, work_key

    if recorder is None:
        return None
    if recorder.work_key is not None:
        return recorder.work_key
    builder = recorder.builder()
    if builder is not None:  # a Nix build: the derivation its last builder's ninja built
        followed = builder[1]
        assert followed.derivation is not None  # `builder` finds only builders' ninjas
        return derivation_work_key(followed.derivation, followed.targets)
    for followed in recorder.followed.values():
        return work_key(NinjaCommand(followed.directory, followed.targets))
    return None


def before_build_of(recorder: Any) -> tuple[str, Mapping[str, float]] | None:
    """The build directory's `.ninja_log` before the build, of an `EdgeRecorder`
    (`EdgeRecorder.before_build`): its path and each output's seconds there."""
    found = None if recorder is None else recorder.before_build()
    return None if found is None else (str(found[0]), found[1])


def sibling_logs_of(recorder: Any) -> Callable[[], list[tuple[str, Path]]] | None:
    """What lists, when asked, the `.ninja_log`s of the build directory's siblings of an
    `EdgeRecorder` (newest first, `recorder.sibling_logs`): each by its path from the build
    directory (`../Release/.ninja_log`, what the ETA's basis names) and its path."""
    command = None if recorder is None else recorder.command
    if command is None:
        return None

    def listed() -> list[tuple[str, Path]]:
        return [(os.path.relpath(log, command.directory), log) for log in recorder.sibling_logs()]

    return listed


def logged_times(log: Path) -> Mapping[str, float]:
    """Each output's seconds in its latest entry of the `.ninja_log` at `log`; {} where it
    cannot be read or is no ninja log."""
    try:
        return NinjaLogReader.at_build_start(log).before_build
    except (OSError, NinjaLogError):
        return {}


def planned_edges_of(recorder: Any) -> list[tuple[str, str | None]] | None:
    """(first output, rule) of every edge in the ninja graph of an `EdgeRecorder`'s build, once
    it read one."""
    if recorder is None:
        return None
    for followed in recorder.followed.values():
        if followed.graph is not None:
            return graph_edges(followed.graph)
    return None


def ninja_default_jobs() -> int:
    """The jobs ninja runs without -j (its GuessParallelism: the CPUs + 2, 2 on one CPU and 3
    on two)."""
    cpus = os.cpu_count() or 1
    return {0: 2, 1: 2, 2: 3}.get(cpus, cpus + 2)


def dependencies_of(recorder: Any) -> Callable[[], Mapping[str, Sequence[str]]] | None:
    """What reads, from the ninja graph of an `EdgeRecorder`'s build once it read one, the
    edges each of its edges waits for (by first output, `BuildGraph.executed_dependencies`
    with every edge executed: a first build runs them all)."""
    if recorder is None:
        return None
    for followed in recorder.followed.values():
        if followed.graph is not None:
            return functools.partial(_all_dependencies, followed.graph)
    return None


def graph_edges(graph: BuildGraph) -> list[tuple[str, str | None]]:
    """(first output, rule) of every edge of a ninja graph."""
    seen: set[int] = set()
    edges: list[tuple[str, str | None]] = []
    for edge in graph.producer.values():
        if id(edge) not in seen:
            seen.add(id(edge))
            edges.append((edge.outputs[0], edge.rule))
    return edges


def _all_dependencies(graph: BuildGraph) -> Mapping[str, Sequence[str]]:
    edges = {id(edge): edge for edge in graph.producer.values() if edge.rule != "phony"}
    return graph.executed_dependencies(edge.outputs for edge in edges.values())


@dataclass
class BuilderNinja:
    """The ninja of a Nix build's builder (found by the sampler, `EdgeRecorder.builder`): its
    own ETA from its edges, as a plain ninja build's (`LiveEta`, keyed by the store path its
    derivation builds: `derivation_work_key`)."""

    log: Path
    """Its `.ninja_log` as the recorder follows it."""
    name: str
    """Its derivation's name, as Nix's log names it ("onnxruntime-1.20.1")."""
    offset_s: float
    """When its edges' times count from, seconds after the build's start."""
    live: LiveEta
    after_count: int = 0
    """Derivations the build still plans after this one (`builder_counts`)."""
    after: tuple[int, float] | None = None
    """What followed the last edge in the other tree's build when it was a Nix build (its
    install and fixup): (that build, seconds); None: not known (`after_ninja`)."""
    _looked_after: bool = False

    def after_words(self) -> str:
        """What follows its ninja, in words: "its install and fixup", and the derivations after."""
        if self.after_count == 0:
            return "its install and fixup"
        plural = "s" if self.after_count > 1 else ""
        return f"its install and fixup and the {self.after_count} derivation{plural} after it"

    def after_ninja(self) -> tuple[int, float] | None:
        """`after`, read once the ETA learned from another tree of a Nix build."""
        other, history = self.live.other, self.live.history
        if self._looked_after or other is None or other.build_id is None or history is None:
            return self.after
        self._looked_after = True
        record = history.get(other.build_id)
        last = history.last_edge_end(other.build_id)
        if record.nix and record.started is not None and record.duration_s and last is not None:
            self.after = (other.build_id, max(0.0, record.started + record.duration_s - last))
        return self.after


def builder_counts(progress: Progress, builder: BuilderNinja | None) -> tuple[int, int] | None:
    """(edges done, edges ninja will run) of `builder`'s ninja from the Nix log, when its
    derivation is the one the build runs now (none beside it): its ETA is then the build's, but
    for what follows its ninja (its install and fixup, and the derivations planned after it:
    a variant's Python package after its C++ one; `builder.after_count`). None otherwise."""
    if builder is None or progress.planned <= 0 or len(progress.derivations) != 1:
        return None
    [building] = progress.derivations
    step = building.step
    if building.name != builder.name:
        return None
    if step is None or step.tool != "ninja" or step.total <= 0:
        return None
    builder.after_count = max(0, progress.planned - progress.done - 1)
    return step.done, step.total


def ninja_counts(progress: Progress) -> tuple[int, int] | None:
    """(edges done, edges ninja will run) of a plain ninja build; None otherwise (a Nix build's
    counts are one derivation's)."""
    step = progress.step
    if progress.nix or step is None or step.tool != "ninja" or step.total <= 0:
        return None
    return step.done, step.total


@dataclass
class LiveEta:
    """A running build's ETA, once a second: learned when its work has earlier runs with edges,
    by progress otherwise. Nothing here reads the history but `learn` (once per work)."""

    history: History | None
    build_id: int
    earlier: list[EarlierRun] = field(default_factory=list)
    work_key: str | None = None
    pace: eta_model.EdgePace | None = None
    planned: dict[str, int] | None = None
    """Edges per kind the build's ninja graph holds (a first build runs them all)."""
    planned_outputs: tuple[str, ...] | None = None
    """Those edges by their first outputs (what a first build costs edge by edge)."""
    costs: eta_model.EdgeCosts | None = None
    """What each of them costs, kept up to date as edges finish (`plan`, `add_edges`)."""
    host: HostShare = field(default_factory=HostShare)
    """Other builds' CPU so far and now (`observe`)."""
    jobs: int | None = None
    """The jobs the build runs (its demand for cores), when known."""
    nix: bool = False
    """A Nix build (its record's, or its log's: `estimate`): its ETA is by progress
    (`_estimate_at`), so neither its work's earlier runs' edges nor another tree's are read (a
    second or more on an ONNX Runtime-sized history)."""

    running: tuple[tuple[str, str, float], ...] | None = None
    """What the sampler saw running at the latest sample: (file or output, kind, seconds);
    None before any sample."""
    other: eta_model.OtherTree | None = None
    """Another tree of the same sources built on this host, this tree's own runs before
    workbench watched it, or a build directory's beside it, for a first build of this work
    (`find_other_tree`)."""
    before_build: tuple[str, Mapping[str, float]] | None = None
    """This tree's `.ninja_log` before the build: its path and each output's seconds in its
    latest entry there (`before_build_of`)."""
    waits: Mapping[str, Sequence[str]] | None = None
    """The graph's edges each planned edge waits for (read once another tree is found)."""
    sibling_logs: Callable[[], list[tuple[str, Path]]] | None = None
    """Lists the `.ninja_log`s of the build directory's siblings, newest first, each by its
    path from it and its path (`sibling_logs_of`): another build directory of the same sources
    beside this one."""
    dependencies: Callable[[], Mapping[str, Sequence[str]]] | None = None
    """Reads `waits` from the build's ninja graph (`dependencies_of`), when it has one."""
    builder: BuilderNinja | None = None
    """A Nix build's builder's ninja found last (`follow_builder`)."""
    _looked_for_other: bool = False
    _from_other: tuple[float, float, eta_model.Estimate] | None = None
    """The latest estimate from the other tree: (when, seconds into the build; what computing
    it cost, seconds; it)."""

    def observe(
        self, t: float, cpus: int, other: Any, running: Iterable[Any] | None = None
    ) -> None:
        """A sample's `LiveView`: the host's contention (`cpus`, `other`) and the edges running
        (`running`: `RunningEdge`s)."""
        self.host.add(t, cpus, self.jobs, other)
        if running is not None:
            self.running = tuple((edge.what, edge.kind, edge.running_s) for edge in running)

    def _synced_costs(self) -> eta_model.EdgeCosts | None:
        """`costs`, having seen every finished edge (`add_edges` keeps it so edge by edge;
        edges handed to the pace directly are caught up here)."""
        costs, pace = self.costs, self.pace
        if costs is not None and pace is not None and len(costs.finished) != len(pace.finished):
            for output, seconds in pace.finished.items():
                costs.add(output, seconds)
        return costs

    def running_now(self) -> dict[str, float] | None:
        """The planned edges running now, by output → seconds (`EdgeCosts.match_running`)."""
        costs = self._synced_costs()
        if self.running is None or costs is None:
            return None
        return costs.match_running(self.running)

    def plan(self, edges: Sequence[tuple[str, str | None]] | None) -> None:
        """The build's ninja graph's edges ((first output, rule), `planned_edges_of`)."""
        if edges is None:
            return
        self.planned = eta_model.planned_kinds(edges)
        self.planned_outputs = tuple(output for output, rule in edges if rule != "phony")
        self.costs = eta_model.EdgeCosts.of(self.planned_outputs)
        for output, seconds in self.pace.finished.items() if self.pace is not None else ():
            self.costs.add(output, seconds)
        self.find_other_tree()

    def find_other_tree(self) -> None:
        """For a first build of its work (no earlier run of it), once its graph is known: this
        tree's own earlier ninja runs when its log holds them (`before_build`: built by ninja
        before workbench watched it), else the newest full run of another tree on this host
        that built the same sources (`eta_model.other_tree`: another build directory, variant
        or release), else the newest `.ninja_log` of a build directory beside this one that
        did (`sibling_logs`: built by ninja alone)."""
        if (
            self._looked_for_other
            or self.nix
            or self.pace is None
            or self.pace.references
            or not self.planned_outputs
        ):
            return
        self._looked_for_other = True
        if self.before_build is not None:
            self.other = eta_model.own_earlier_runs(self.planned_outputs, *self.before_build)
        if self.other is None and self.history is not None:
            history = self.history
            candidates = (
                (build_id, history.edge_seconds(build_id))
                for build_id in history.runs_of_other_work(
                    self.work_key or "", self.build_id, eta_model.OTHER_TREE_CANDIDATES
                )
            )
            self.other = eta_model.other_tree(self.planned_outputs, candidates)
        if self.other is None and self.sibling_logs is not None:
            logs = ((label, logged_times(log).items()) for label, log in self.sibling_logs())
            self.other = eta_model.other_tree(self.planned_outputs, logs)
        if self.other is not None and self.waits is None and self.dependencies is not None:
            self.waits = self.dependencies()

    def learn(self, work_key: str | None) -> None:
        """Read the earlier runs of `work_key` (once; a later call with the same key is free)."""
        if work_key is None or work_key == self.work_key:
            return
        self.work_key = work_key
        found = (
            references(self.history, work_key, self.build_id)
            if self.history and not self.nix
            else []
        )
        self.pace = eta_model.EdgePace(found)
        self.find_other_tree()

    def add_edges(self, edges: Iterable[Any], offset_s: float = 0.0) -> None:
        """Edges the build finished (`analysis.edges.Edge`s from the recorder's poll, timed from
        the recorder's origin, `offset_s` after the build's start)."""
        if self.pace is not None:
            edges = list(edges)
            self.pace.add((edge.output, edge.duration_s, edge.end_s + offset_s) for edge in edges)
            if self.costs is not None:
                for edge in edges:
                    self.costs.add(edge.output, edge.duration_s)

    def follow_builder(
        self, recorder: EdgeRecorder, new: Mapping[Path, Sequence[Any]], started: float
    ) -> None:
        """A Nix build's edges: the newest builder's ninja the recorder follows gets its own
        ETA (`BuilderNinja`): its work's earlier runs, another tree of the same sources (another
        release or variant built on this host), else its own edges so far. `new`: the edges
        each log gained at this poll (`EdgeRecorder.poll_logs`); `started`: the build's start,
        epoch."""
        from workbench.analysis.recorder import derivation_work_key
        from workbench.planning.launch import jobs_in_argv
        from workbench.progress.nix_log import derivation_name

        found = recorder.builder()
        if found is None:
            return
        log, followed = found
        assert followed.derivation is not None
        offset = recorder.origin_of(followed) - started
        builder = self.builder
        if builder is None or builder.log != log:
            live = LiveEta(self.history, self.build_id, jobs=jobs_in_argv(followed.argv))
            builder = BuilderNinja(log, derivation_name(followed.derivation), offset, live)
            self.builder = builder
            edges: Sequence[Any] = followed.assembler.edges
            live.learn(derivation_work_key(followed.derivation, followed.targets))
        else:
            edges = new.get(log, ())
        builder.offset_s = offset
        builder.live.add_edges(edges)
        if builder.live.planned is None and followed.graph is not None:
            builder.live.dependencies = functools.partial(_all_dependencies, followed.graph)
            builder.live.plan(graph_edges(followed.graph))

    def estimate(self, elapsed_s: float, progress: Progress) -> Eta | None:
        """The ETA now."""
        if progress.nix:
            self.nix = True  # a build whose log says it is Nix's, whatever started it
        counts = builder_counts(progress, self.builder) if self.nix else ninja_counts(progress)
        return self.estimate_at(elapsed_s, progress_fraction(progress), counts)

    def estimate_at(
        self, elapsed_s: float, fraction: float | None, counts: tuple[int, int] | None
    ) -> Eta | None:
        """The ETA from plain values: the progress fraction and ninja's (done, total), at the
        host's contention now (`observe`)."""
        eta = self._estimate_at(elapsed_s, fraction, counts)
        return None if eta is None else self.host.apply(eta)

    def _estimate_at(
        self, elapsed_s: float, fraction: float | None, counts: tuple[int, int] | None
    ) -> Eta | None:
        if self.nix:
            # A Nix build's ninja counts are one derivation's, not the build's (`ninja_counts`):
            # its ETA is by progress (the derivations' counts and the ninja step of each one
            # building), from its variant's earlier runs first: those curves hold its
            # dependencies, phases and fixup as well. In Nix's sandbox every derivation whose
            # source unpacks to `source` (fetchFromGitHub's) builds in /build/source/build, so a
            # builder's ninja is known by the store path its derivation builds
            # (`derivation_work_key`), not by its tree.
            by_progress = estimate(elapsed_s, fraction, self.earlier)
            builder = self.builder
            if builder is None or counts is None or any(did_work(r) for r in self.earlier):
                return by_progress
            # A first build of its variant (a new release, patch or setting), in the ninja of
            # the derivation it runs now (`builder_counts`): that ninja's own ETA, from what its
            # derivation's earlier runs, another derivation of the same sources, or its own
            # edges so far say (`follow_builder`). By progress it could only extrapolate.
            builder.live.running = self.running
            inner = builder.live._estimate_at(max(0.0, elapsed_s - builder.offset_s), None, counts)
            if inner is None:
                return by_progress
            if builder.live.pace is not None and builder.live.pace.references:
                # Its derivation built before: to those builds' ends, fixup included.
                return replace(inner, basis=f"{builder.name}'s ninja: {inner.basis}")
            after = builder.after_ninja()
            if after is None:
                # Nothing says how long its install, fixup and the derivations after it take:
                # the figure is its ninja's, and the range has no upper end (an ORT variant's
                # Python package alone takes minutes after its C++ package's ninja).
                return replace(
                    inner,
                    high_s=None,
                    basis=f"{builder.name}'s ninja ({builder.after_words()} not counted): "
                    + inner.basis,
                )
            # Another release's build: what followed its ninja (install, fixup), as it took.
            other_id, tail_s = after
            return Eta(
                inner.remaining_s + tail_s,
                f"{builder.name}'s ninja, then {builder.after_words()} as in build #{other_id} "
                f"({tail_s:.0f} s): {inner.basis}",
                None if inner.low_s is None else inner.low_s + tail_s,
                None if inner.high_s is None else inner.high_s + tail_s,
                inner.first_build,
            )
        if self.pace is not None and self.pace.references:
            if counts is None:
                return None  # full or incremental is not known until ninja says its total
            learned = self.pace.estimate(elapsed_s, counts[1], counts[0], self.running_now())
            if learned is None:
                return None  # earlier runs exist, none of this kind: not by name either
            return Eta(learned.remaining_s, learned.basis, learned.low_s, learned.high_s)
        by_progress = estimate(elapsed_s, fraction, self.earlier)
        first = not [run for run in self.earlier if did_work(run)]
        if first and self.pace is not None and counts is not None:
            costs = self._synced_costs()
            if (
                self.other is not None
                and costs is not None
                and costs.left > 0
                and counts[1] >= INCREMENTAL_SHARE * len(costs.planned)
            ):
                # Another tree of the same sources: each edge at its time there. Only where
                # ninja runs (about) every edge of the graph: where it runs fewer (an
                # incremental build of a tree built before), which ones is not known.
                other = self._estimate_from_other(elapsed_s, costs, self.other)
                if other is not None:
                    return Eta(other.remaining_s, other.basis, other.low_s, other.high_s)
            # A first run of this work: only its own edges so far, each kind at its own pace.
            learned = eta_model.extrapolate_by_kind(
                elapsed_s,
                counts[1],
                self.pace.finished,
                self.planned,
                self.pace.last_end_s,
                None,
                self.running_now(),
                self._synced_costs(),
            )
            if learned is None and by_progress is None:
                learned = eta_model.extrapolate(elapsed_s, counts[1], counts[0])
            if learned is not None:
                return Eta(
                    learned.remaining_s,
                    learned.basis,
                    learned.low_s,
                    learned.high_s,
                    first_build=True,
                )
        return by_progress

    def _estimate_from_other(
        self, elapsed_s: float, costs: eta_model.EdgeCosts, other: eta_model.OtherTree
    ) -> eta_model.Estimate | None:
        """`eta_model.from_other_tree`, computed again once the time since the last one is
        `OTHER_TREE_SHARE`'s worth of what that one cost, counted down in between: on an ONNX
        Runtime-sized graph a schedule takes tens of milliseconds (benchmarks/eta_accuracy.py,
        "cost"), which each second would be more than the rest of the supervisor's work."""
        kept = self._from_other
        if kept is not None:
            when, spent, estimate = kept
            since = elapsed_s - when
            if 0.0 <= since < spent / OTHER_TREE_SHARE:
                return replace(
                    estimate,
                    remaining_s=max(0.0, estimate.remaining_s - since),
                    low_s=max(0.0, estimate.low_s - since),
                    high_s=max(0.0, estimate.high_s - since),
                )
        began = time.perf_counter()
        jobs = self.jobs or ninja_default_jobs()
        found = eta_model.from_other_tree(costs, other, jobs, self.running_now(), self.waits)
        spent = time.perf_counter() - began
        self._from_other = None if found is None else (elapsed_s, spent, found)
        return found


@dataclass
class Replay:
    """A finished build's progress played again: what each ETA would have said at any moment
    of it, from what the history held before it (for tests and benchmarks/eta_accuracy.py)."""

    build_id: int
    duration_s: float
    edges: list[tuple[float, str, float]]
    """(end, output, seconds) of every edge, seconds from the build's start, by end."""
    edge_total: int | None
    fractions: list[tuple[float, float]]
    """(seconds from start, progress fraction) of each 1 Hz sample."""
    live: LiveEta
    contention: tuple[int, list[tuple[float, float, float, int]]] | None = None
    """What the live view said of the host's other processes, when it was kept (a recording's
    `watch`): (the host's CPUs, [(seconds from start, their CPU now, their mean so far,
    samples)]); None: not kept, the ETA is played without it."""

    @classmethod
    def of(
        cls,
        history: History,
        build_id: int,
        contention: tuple[int, list[tuple[float, float, float, int]]] | None = None,
        jobs: int | None = None,
        waits: Mapping[str, Sequence[str]] | None = None,
        before_build: tuple[str, Mapping[str, float]] | None = None,
    ) -> Replay:
        """Load build `build_id` and the earlier runs each method would have read; with the
        contention the build's live view said (`contention`) and its `jobs`, the ETA reads it
        as the supervisor's does (`LiveEta.observe`); `waits`: its graph's dependencies (what
        each edge waited for), which the supervisor reads from the build's ninja graph;
        `before_build`: its tree's `.ninja_log` before it (`LiveEta.before_build`)."""
        record = history.get(build_id)
        if record.started is None or record.duration_s is None:
            raise ValueError(f"build #{build_id} has not finished")
        start = record.started
        edges = sorted(
            (edge.ended - start, edge.outputs[0], edge.ended - edge.started)
            for edge in history.edges(build_id)
        )
        step = ProgressView.from_json(record.progress).step
        total = step.total if step is not None and step.tool == "ninja" else None
        fractions = [
            (sample.t - start, sample.fraction)
            for sample in history.samples(build_id)
            if sample.fraction is not None
        ]
        live = LiveEta(history, build_id, history.earlier_runs(record.eta_key, build_id))
        live.learn(history.edge_build_info(build_id)[1])
        live.waits = waits
        live.before_build = before_build
        # What the build's ninja graph would have said: its own edges, by kind.
        live.plan([(output, None) for _, output, _ in edges])
        live.jobs = jobs
        return cls(build_id, record.duration_s, edges, total, fractions, live, contention)

    def by_progress(self, elapsed_s: float) -> Eta | None:
        """The first method's ETA (earlier builds with the same ETA key) at `elapsed_s`."""
        return estimate(elapsed_s, self._fraction_at(elapsed_s), self.live.earlier)

    def learned(self, elapsed_s: float) -> Eta | None:
        """What the supervisor's ETA now says at `elapsed_s`."""
        done = [(output, seconds, end) for end, output, seconds in self.edges if end <= elapsed_s]
        self.live._from_other = None  # each moment computed afresh, not counted down
        if self.live.pace is not None:
            self.live.pace = eta_model.EdgePace(self.live.pace.references)
            self.live.pace.add(done)
            if self.live.planned_outputs is not None:
                self.live.costs = eta_model.EdgeCosts.of(self.live.planned_outputs)
        counts = None if self.edge_total is None else (len(done), self.edge_total)
        # What the sampler would have seen running: the edges started and not yet ended (their
        # outputs, which the live ETA matches from the compilers' files).
        self.live.running = tuple(
            (source_of(output) or output, edge_kind(output), elapsed_s - (end - seconds))
            for end, output, seconds in self.edges
            if end - seconds <= elapsed_s < end
        )
        self.live.host = HostShare()
        if self.contention is not None:
            cpus, seen = self.contention
            for t, now, mean, samples in seen:
                if t > elapsed_s:
                    break
                other = Contention(now, mean, 0, "", samples)
                self.live.host.add(t, cpus, self.live.jobs, other)
        return self.live.estimate_at(elapsed_s, self._fraction_at(elapsed_s), counts)

    def _fraction_at(self, elapsed_s: float) -> float | None:
        index = bisect.bisect_right(self.fractions, (elapsed_s, 2.0))
        return self.fractions[index - 1][1] if index else None
