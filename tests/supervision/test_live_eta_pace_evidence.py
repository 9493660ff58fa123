"""How far the learned ETA trusts this build's own pace against an earlier run of the same work
(`eta_model.EdgePace`): by the share of the work done, unless the finished edges' own times
against their earlier ones say the ratio is real. A slower host makes every edge about as much
slower; a load that comes and goes slows some edges and spares others, and the pace it gave
the first edges is no pace for the rest (the recorded rebuilds on the shared VM:
benchmarks/eta_accuracy.py --recordings, "pace_trust").

The real-ninja side is tests/supervision/test_live_eta_learning.py (a 3x slower host)."""

from __future__ import annotations

from workbench.analysis import eta_model

# An earlier -j1 build of 40 compile units of 2, 3, 4 and 5 s in turn: 140 s.
OUTPUTS = [f"CMakeFiles/t.dir/src/u{n}.cc.o" for n in range(40)]
WEIGHTS = [2.0 + n % 4 for n in range(40)]
DURATION = sum(WEIGHTS)


def _reference() -> eta_model.ReferenceRun:
    edges = []
    clock = 0.0
    for output, weight in zip(OUTPUTS, WEIGHTS, strict=True):
        edges.append((output, clock, clock + weight))
        clock += weight
    reference = eta_model.reference_run(1, 0.0, clock, edges)
    assert reference is not None
    return reference


def _rebuild(factors: list[float]) -> tuple[eta_model.EdgePace, float]:
    """This build's first edges, each its earlier time times its factor, one after another;
    the pace and when the last of them ended."""
    pace = eta_model.EdgePace([_reference()])
    clock = 0.0
    finished = []
    for output, weight, factor in zip(OUTPUTS, WEIGHTS, factors, strict=False):
        clock += weight * factor
        finished.append((output, weight * factor, clock))
    pace.add(finished)
    return pace, clock


def test_a_passing_load_on_the_first_edges_is_not_taken_for_the_pace_of_the_rest() -> None:
    # The first ten edges (a quarter of the work): every other one slowed 2.6x by a load that
    # then went away; the rest of the build runs at the earlier run's pace.
    factors = [2.6 if n % 2 else 1.0 for n in range(10)]
    pace, now = _rebuild(factors)
    done = sum(WEIGHTS[:10])
    truth = DURATION - done
    said = pace.estimate(now, len(OUTPUTS), 10)
    assert said is not None
    # Trusted fully at a quarter of the work, its pace so far (1.8x) made the rest 1.8x: +80%.
    assert abs(said.remaining_s - truth) / truth <= 0.25, (said, truth)
    assert said.low_s <= truth <= said.high_s, (said, truth)


def test_a_slower_host_is_followed_from_its_first_edges() -> None:
    # Four edges (a tenth of the work), each 2.8-3.2x its earlier time: another, slower host.
    factors = [3.0, 2.8, 3.2, 3.0]
    pace, now = _rebuild(factors)
    truth = 3.0 * (DURATION - sum(WEIGHTS[:4]))
    said = pace.estimate(now, len(OUTPUTS), 4)
    assert said is not None
    # By the share done alone (a tenth) the rest would be 1.2x the earlier run's: -60%.
    assert abs(said.remaining_s - truth) / truth <= 0.1, (said, truth)
    assert said.pace is not None and said.pace > 2.5
    assert "3.0× their time" in said.basis


def test_the_range_holds_a_load_that_came_mid_build_and_stays() -> None:
    # The first ten edges (a quarter of the work) under a load that slows every other one 2.2x:
    # 1.7x their earlier time in all, spread as a load spreads them, too little evidence to
    # trust that pace wholly. The load stays: the rest runs 1.7x too. The point estimate leans
    # to the earlier run's pace; the range must reach this pace lasting (the recorded rebuilds
    # under load: zstd at 2.2x its earlier time, 439 s left, said 301 s in a range ending at
    # 436 s), and still hold the earlier pace coming back.
    pace, now = _rebuild([1.0, 2.2] * 5)
    rest = DURATION - sum(WEIGHTS[:10])
    truth = now / sum(WEIGHTS[:10]) * rest
    said = pace.estimate(now, len(OUTPUTS), 10)
    assert said is not None
    assert said.remaining_s < 0.8 * truth  # not trusted wholly
    assert said.low_s <= truth <= said.high_s, (said, truth)
    assert said.low_s <= rest <= said.high_s, (said, rest)
