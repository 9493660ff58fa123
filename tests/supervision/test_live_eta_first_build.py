"""A first build's ETA (nothing earlier to learn from): each kind of edge left at the pace this
build kept for that kind, over the parallelism it kept; a wide range that says it is a first
build. Counting edges alone said 28 minutes left of fmt at 47% when 4 were: its heavy test
compiles came first, its quick links last."""

from __future__ import annotations

import pytest

from workbench.analysis import eta_model
from workbench.analysis.eta_model import (
    FIRST_HIGH,
    FIRST_LOW,
    RUNNING_REST,
    EdgeCosts,
    extrapolate,
    extrapolate_by_kind,
    same_source,
)
from workbench.progress.live_view import LiveView
from workbench.reading.follow import eta_text
from workbench.supervision.live_eta import Eta, LiveEta


def _fmt_like() -> tuple[dict[str, float], dict[str, int]]:
    # 20 compiles of 60 s done in 600 s at -j2; 20 compiles and 40 quick links (2 s) left.
    finished = {f"test/CMakeFiles/t.dir/t{n}.cc.o": 60.0 for n in range(20)}
    return finished, {"compile": 40, "link": 40}


def test_a_first_build_weighs_what_is_left_by_its_kind() -> None:
    finished, planned = _fmt_like()
    finished.update({f"bin/t{n}": 2.0 for n in range(2)})
    by_kind = extrapolate_by_kind(602.0, 80, finished, planned, last_end_s=602.0)
    counting = extrapolate(602.0, 80, 22)
    assert by_kind is not None and counting is not None
    # Left: 20 compiles x 60 s + 38 links x 2 s = 1276 s of edges at ~2 running: ~640 s.
    assert 560 < by_kind.remaining_s < 720, by_kind
    assert counting.remaining_s > 1.5 * by_kind.remaining_s  # counting overshoots
    assert by_kind.low_s == by_kind.remaining_s * FIRST_LOW
    assert by_kind.high_s == by_kind.remaining_s * FIRST_HIGH
    assert "by kind of edge" in by_kind.basis


def test_the_live_eta_of_a_first_build_says_so() -> None:
    live = LiveEta(None, 1)
    live.learn("ninja:tree")
    finished, planned = _fmt_like()
    live.planned = planned
    live.add_edges([])
    assert live.pace is not None
    live.pace.add(
        (output, seconds, 30.0 * (n + 1)) for n, (output, seconds) in enumerate(finished.items())
    )
    eta = live.estimate_at(600.0, 20 / 80, (20, 80))
    assert eta is not None and eta.first_build
    text = eta_text(LiveView(eta=eta.view()).eta)
    assert text is not None and "first build: no history" in text


def test_a_range_with_no_upper_end_says_so_and_holds_what_is_above_its_low() -> None:
    """A Nix builder's ninja with nothing to learn from: what follows it (install, fixup, the
    derivations after it) is not counted, so its range has a low and no high."""
    open_above = Eta(120.0, "onnxruntime-cpp's ninja (its install and fixup not counted)", 60.0)
    text = eta_text(LiveView(eta=open_above.view()).eta)
    assert text == "ETA 2m00s (1m00s–?)", text
    assert open_above.holds(60.0) and open_above.holds(3600.0) and not open_above.holds(59.0)
    closed = Eta(120.0, "earlier builds", 60.0, 180.0)
    assert closed.holds(180.0) and not closed.holds(181.0)
    assert not Eta(120.0, "no range").holds(120.0)
    text = eta_text(LiveView(eta=closed.view()).eta)
    assert text == "ETA 2m00s (1m00s–3m00s)", text


def test_too_little_done_says_nothing() -> None:
    assert extrapolate_by_kind(5.0, 100, {"a.o": 1.0}, None) is None
    assert extrapolate_by_kind(600.0, 100, {}, None) is None
    assert extrapolate_by_kind(0.5, 10, {"a.o": 0.2, "b.o": 0.2}, None) is None


def test_a_short_first_build_is_estimated_within_its_first_seconds() -> None:
    """A small tree on a many-core host builds in seconds: a fifth of its edges done after 3 s
    is enough for a first build's ETA (ten seconds were needed before: json-c's first build had
    none at 25%, a checkpoint counted as missed)."""
    finished = {f"CMakeFiles/lib.dir/u{n}.c.o": 0.5 for n in range(4)}
    eta = extrapolate_by_kind(3.0, 20, finished, {"compile": 16, "link": 4}, 2.5)
    assert eta is not None and eta.low_s < eta.remaining_s < eta.high_s


def test_a_first_build_costs_a_source_it_built_for_another_target_at_that_time() -> None:
    """fmt's shape: a few heavy test units came first (300 s each), the same light helpers
    (test-main.cc, util.cc, 10 s) are compiled again into every test target. The edges left
    are mostly those helpers again: counted at what the build already paid for each source,
    not at the mean of its heavy compiles (which said +43% at half-way on the recorded fmt)."""
    finished = {
        "test/CMakeFiles/base-test.dir/base-test.cc.o": 300.0,
        "test/CMakeFiles/chrono-test.dir/chrono-test.cc.o": 300.0,
        "test/CMakeFiles/test-main.dir/test-main.cc.o": 10.0,
        "test/CMakeFiles/test-main.dir/util.cc.o": 10.0,
    }
    left = [
        f"test/CMakeFiles/{name}-test.dir/{source}"
        for name in ("a", "b", "c", "d", "e")
        for source in ("test-main.cc.o", "util.cc.o")
    ]
    outputs = [*finished, *left]
    planned = {"compile": len(outputs)}
    # 620 s of edges in 310 s: two at a time. Left: 10 helpers x 10 s = 100 s, at 2: ~50 s.
    by_source = extrapolate_by_kind(310.0, 14, finished, planned, 310.0, outputs)
    by_kind = extrapolate_by_kind(310.0, 14, finished, planned, 310.0)
    assert by_source is not None and by_kind is not None
    assert 40 < by_source.remaining_s < 60, by_source
    assert by_kind.remaining_s > 10 * by_source.remaining_s  # 155 s a compile: ~775 s
    assert "by source and kind of edge" in by_source.basis
    # The same source path under another target's `__/` prefix is the same source.
    assert same_source("test/CMakeFiles/t.dir/__/src/os.cc.o") == same_source(
        "CMakeFiles/fmt.dir/src/os.cc.o"
    )
    assert same_source("bin/format-test") is None  # a link is no source


def test_an_edge_running_is_partly_done() -> None:
    """zstd's shape: the static library compiles the sources the shared one already built.
    zstd_lazy.c took 170 s for the shared library; its static copy has run 150 s when the ETA
    is asked: 20 s of it are left, not 170 s again. The sampler names the running compiler's
    source file; it stands for the first unfinished edge of that source."""
    lazy = "lib/CMakeFiles/zstd_{}.dir/src/compress/zstd_lazy.c.o"
    small = "lib/CMakeFiles/zstd_{}.dir/src/common/s{}.c.o"
    finished = {lazy.format("shared"): 170.0}
    finished.update({small.format("shared", n): 10.0 for n in range(17)})
    outputs = [*finished, lazy.format("static")]
    outputs += [small.format("static", n) for n in range(17)]
    planned = {"compile": len(outputs)}
    running = eta_model.match_running(
        outputs, finished, [("/home/u/zstd/src/compress/zstd_lazy.c", "compiler", 150.0)]
    )
    assert running == {lazy.format("static"): 150.0}
    # 340 s of edges and 150 s of the running one in 245 s: 2 at a time. Left: 20 s of
    # zstd_lazy.c and 17 x 10 s: 190 s of edges, ~95 s.
    said = extrapolate_by_kind(245.0, 36, finished, planned, 240.0, outputs, running)
    blind = extrapolate_by_kind(245.0, 36, finished, planned, 240.0, outputs)
    assert said is not None and blind is not None
    assert 80 < said.remaining_s < 110, said
    assert blind.remaining_s > 1.3 * said.remaining_s, blind
    # A unit of unknown cost (10 s a compile so far) that has run 100 s is a long one: half its
    # age again is left, not nothing. 200 s of edges and its 100 s in 300 s: one at a time.
    unknown = {f"CMakeFiles/t.dir/t{n}.cc.o": 10.0 for n in range(20)}
    heavy = "CMakeFiles/t.dir/heavy.cc.o"
    plan = [*unknown, heavy]
    long_run = extrapolate_by_kind(300.0, 21, unknown, {"compile": 21}, 200.0, plan, {heavy: 100.0})
    assert long_run is not None and abs(long_run.remaining_s - 50.0) < 1.0, long_run


def test_the_live_eta_reads_the_running_edges_from_the_sampled_view() -> None:
    from workbench.progress.live_view import RunningEdge

    live = LiveEta(None, 1)
    live.learn("ninja:tree")
    outputs = [f"CMakeFiles/t.dir/src/t{n}.cc.o" for n in range(40)]
    live.plan([(output, "CXX_COMPILER__t_Release") for output in outputs])
    assert live.pace is not None
    live.pace.add((output, 60.0, 30.0 * (n + 1)) for n, output in enumerate(outputs[:20]))
    before = live.estimate_at(630.0, 0.5, (20, 40))
    live.observe(1000.0, 2, None, [RunningEdge("src/t20.cc", "cc1plus", "compiler", 29.0)])
    assert live.running_now() == {outputs[20]: 29.0}
    after = live.estimate_at(630.0, 0.5, (20, 40))
    assert before is not None and after is not None
    # One compile running for 29 s, one slot idle: the pace is the edge time done, the running
    # one's included, per second (1229 s in 630 s), not the pace up to the latest end (2 at a
    # time) with 30 s counted down at that pace.
    expected = extrapolate_by_kind(
        630.0, 40, live.pace.finished, live.planned, 600.0, outputs, {outputs[20]: 29.0}
    )
    assert expected is not None and after.remaining_s == expected.remaining_s
    assert abs(after.remaining_s - (1200.0 - 29.0) * 630.0 / 1229.0) < 1.0
    assert before.remaining_s == 570.0  # without the sample: 1200 s / 2 - 30 s


def test_edge_costs_kept_edge_by_edge_are_the_plain_sum() -> None:
    """The live ETA keeps a first build's costs as sums (O(1) a finished edge, not a pass over
    the graph each second); the work left must be what costing every edge left one by one
    says, whatever order the edges finish in, links and rebuilt outputs included."""
    import random
    import statistics

    chooser = random.Random(22)
    sources = [f"src/d{n % 5}/f{n}.cc" for n in range(40)]
    outputs = [f"CMakeFiles/{t}.dir/{s}.o" for t in ("a", "b", "c") for s in sources[:30]]
    outputs += [f"test/CMakeFiles/d.dir/{s}.o" for s in sources[30:]]
    outputs += ["liba.a", "bin/b", "bin/c", "programs/CMakeFiles/man"]
    costs = eta_model.EdgeCosts.of(outputs)
    done: dict[str, float] = {}
    order = [*outputs, "CMakeFiles/x.dir/src/d0/f0.cc.o", "CMakeFiles/a.dir/src/d1/f1.cc.o"]
    chooser.shuffle(order)
    for output in order:
        seconds = chooser.uniform(0.5, 30.0)
        costs.add(output, seconds)
        done.setdefault(output, seconds)
        by_source: dict[str, list[float]] = {}
        by_group: dict[tuple[str, str], list[float]] = {}
        by_kind: dict[str, list[float]] = {}
        for finished, took in done.items():
            key = same_source(finished)
            if key is not None:
                by_source.setdefault(key, []).append(took)
            kind = eta_model.edge_kind(finished)
            by_group.setdefault((eta_model.part_of(finished), kind), []).append(took)
            by_kind.setdefault(kind, []).append(took)
        expected = 0.0
        for planned in outputs:
            if planned in done:
                continue
            key = same_source(planned)
            kind = eta_model.edge_kind(planned)
            alike = by_source.get(key) if key else None
            alike = alike or by_group.get((eta_model.part_of(planned), kind)) or by_kind.get(kind)
            expected += statistics.fmean(alike) if alike else statistics.median(done.values())
        assert abs(costs.work_left() - expected) < 1e-6 * max(1.0, expected), output
        assert costs.left == sum(1 for planned in outputs if planned not in done)


def test_an_edge_of_unknown_cost_running_long_counts_in_its_kinds_mean() -> None:
    """fmt at 25% of its first build: the test units that had finished were the quick ones
    (10 s each); two had run for minutes and were still running. Costing the 20 test units left
    at the mean of the finished ones said -50%: a mean of what finished is a mean of what was
    short enough to finish. A running edge is an observation of its kind cut short: it is
    expected to take at least 1.5 x its age, and that counts in the mean like a finished edge."""
    finished = {f"test/CMakeFiles/q{n}.dir/q{n}.cc.o": 10.0 for n in range(4)}
    running = {
        "test/CMakeFiles/long0.dir/long0.cc.o": 400.0,
        "test/CMakeFiles/long1.dir/long1.cc.o": 200.0,
    }
    left = [f"test/CMakeFiles/t{n}.dir/t{n}.cc.o" for n in range(20)]
    outputs = [*finished, *running, *left]
    costs = eta_model.EdgeCosts.of(outputs)
    for output, seconds in finished.items():
        costs.add(output, seconds)
    # The kind's mean: 4 x 10 s finished, 600 s and 300 s expected of the running: 235 s.
    mean = (40.0 + 600.0 + 300.0) / 6
    expected = 20 * mean + 0.5 * 400.0 + 0.5 * 200.0  # the running ones: half their age again
    assert abs(costs.work_left(running) - expected) < 1e-6, costs.work_left(running)
    # Without edges running, the mean is the finished ones'.
    assert costs.work_left() == 22 * 10.0
    # A running edge younger than the mean says nothing new: it counts at the mean.
    young = {"test/CMakeFiles/long0.dir/long0.cc.o": 1.0}
    assert abs(costs.work_left(young) - (21 * 10.0 + 9.0)) < 1e-6  # 9 s of it left


def test_an_edge_is_costed_like_its_own_part_of_the_tree() -> None:
    """A library's units (100 s) and a test tree's (5 s) are both compiles; the test units left
    cost like the finished test units (`part_of`: the CMake target's directory), not like the
    mean of every compile."""
    assert eta_model.part_of("test/CMakeFiles/format-test.dir/format-test.cc.o") == "test"
    assert eta_model.part_of("CMakeFiles/fmt.dir/src/format.cc.o") == ""
    assert eta_model.part_of("bin/format-test") == "bin"
    library = {f"CMakeFiles/lib.dir/src/l{n}.cc.o": 100.0 for n in range(5)}
    tests = {f"test/CMakeFiles/t{n}.dir/t{n}.cc.o": 5.0 for n in range(5)}
    left = [f"test/CMakeFiles/u{n}.dir/u{n}.cc.o" for n in range(10)]
    costs = eta_model.EdgeCosts.of([*library, *tests, *left, "programs/CMakeFiles/p.dir/p.c.o"])
    for output, seconds in {**library, **tests}.items():
        costs.add(output, seconds)
    # 10 test units at 5 s; the program's unit, in a part with nothing finished, at the mean
    # of every compile (52.5 s).
    assert abs(costs.work_left() - (10 * 5.0 + 52.5)) < 1e-6, costs.work_left()


def test_a_kind_never_seen_costs_a_typical_edge_not_the_mean_of_heavy_compiles() -> None:
    """zstd's shape: its last edges are custom commands (`programs/CMakeFiles/zstdcat`, man
    pages: a symlink each, 0.1 s) after compiles of which a few were heavy. With no edge of
    their kind finished they cost the median edge of the build, not the mean its few heavy
    units pull up (which charged 34-83 s for 1 s at 75% of zstd's runs)."""
    finished = {f"lib/CMakeFiles/z.dir/src/c{n}.c.o": 2.0 for n in range(9)}
    finished["lib/CMakeFiles/z.dir/src/heavy.c.o"] = 500.0
    custom = [f"programs/CMakeFiles/{name}" for name in ("zstdcat", "unzstd", "zstd.1")]
    costs = eta_model.EdgeCosts.of([*finished, *custom])
    for output, seconds in finished.items():
        costs.add(output, seconds)
    assert costs.work_left() == 3 * 2.0


def test_the_rest_of_the_longest_running_edge_bounds_the_eta() -> None:
    """At -j2, one edge of a known cost (its source built for another target: 300 s) has run
    60 s and one light edge is left: the work left over two cores is ~125 s, but one edge runs
    on one core: 240 s of it are left whatever the other core does."""
    heavy = "CMakeFiles/{}.dir/src/heavy.cc.o"
    finished = {heavy.format("shared"): 300.0}
    finished.update({f"CMakeFiles/shared.dir/src/l{n}.cc.o": 10.0 for n in range(30)})
    outputs = [*finished, heavy.format("static"), "CMakeFiles/static.dir/src/last.cc.o"]
    running = {heavy.format("static"): 60.0}
    # 600 s of edges and 60 s running in 330 s: 2 at a time.
    said = extrapolate_by_kind(330.0, 33, finished, None, 320.0, outputs, running)
    assert said is not None
    assert abs(said.remaining_s - 240.0) < 1e-6, said


def test_a_source_with_a_copy_running_long_costs_that_much_in_its_other_copies() -> None:
    """zstd's shape on 16 cores: one source (zstd_lazy.c) built for the static and the shared
    library takes ten times its part's other units. While no copy of it finished, the copy that
    has run 6 s says what the source costs: the copy started 0.5 s ago has about as much left
    (not the part's 1 s mean), and a copy not started yet costs as much again."""
    lazy = [f"lib/CMakeFiles/{t}.dir/src/lazy.c.o" for t in ("a_static", "a_shared", "b")]
    units = [f"lib/CMakeFiles/a_static.dir/src/u{n}.c.o" for n in range(6)]
    costs = EdgeCosts.of([*lazy, *units])
    for output in units:
        costs.add(output, 1.0)
    work, longest = costs.left_of({lazy[0]: 6.0, lazy[1]: 0.5})
    expected_total = (1 + RUNNING_REST) * 6.0
    assert longest == pytest.approx(expected_total - 0.5)
    # The first copy's rest, the second's, and the third (not started) at the whole.
    assert work == pytest.approx(RUNNING_REST * 6.0 + (expected_total - 0.5) + expected_total)
