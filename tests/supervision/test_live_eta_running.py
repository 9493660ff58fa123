"""The learned ETA (earlier runs of the same work) reads the edges running now, as the first-build
one does: an edge runs on one core, so the time left is never less than what is left of the
longest one running, its time in the earlier run at this build's pace against it, less its
age. Without it, a build that ran its light edges first and its heavy one last, where the
earlier run had overlapped them, counted the heavy edge's time down as if it spread over both
cores."""

from __future__ import annotations

from workbench.analysis import eta_model
from workbench.progress.live_view import RunningEdge
from workbench.supervision.live_eta import LiveEta

HEAVY = "CMakeFiles/t.dir/src/heavy.cc.o"
LIGHT = [f"CMakeFiles/t.dir/src/l{n}.cc.o" for n in range(10)]


def _earlier_run() -> eta_model.ReferenceRun:
    # -j2: the heavy unit (400 s) on one core from the start, the ten light ones (10 s each)
    # one after another on the other: 400 s in all.
    edges = [(HEAVY, 0.0, 400.0)] + [
        (output, 10.0 * n, 10.0 * (n + 1)) for n, output in enumerate(LIGHT)
    ]
    reference = eta_model.reference_run(1, 0.0, 400.0, edges)
    assert reference is not None
    return reference


def _this_run() -> eta_model.EdgePace:
    # This build ran the light ones two at a time first (all done at 50 s), then the heavy one.
    pace = eta_model.EdgePace([_earlier_run()])
    pace.add((output, 10.0, 10.0 * (n // 2 + 1)) for n, output in enumerate(LIGHT))
    return pace


def test_the_rest_of_a_running_edge_bounds_the_learned_eta() -> None:
    pace = _this_run()
    blind = pace.estimate(150.0, 11, 10)
    said = pace.estimate(150.0, 11, 10, {HEAVY: 100.0})
    assert blind is not None and said is not None
    # Its pace to 20% of the work: 50 s against the earlier 100 s, trusted at 20% (the share
    # done; its edges took what they took before, so no evidence of another host): x0.9. The
    # heavy unit at that pace is 360 s, 100 s of which ran: 260 s left at least. Without it the
    # 300 s the earlier run still needed, x0.9, less the 100 s since the last edge: 170 s.
    assert abs(blind.remaining_s - 170.0) < 1e-6, blind
    assert abs(said.remaining_s - 260.0) < 1e-6, said
    # An edge running that the earlier run did not have, or one already finished, bounds nothing.
    assert pace.estimate(150.0, 11, 10, {"CMakeFiles/t.dir/new.cc.o": 100.0}) == blind


def test_the_live_eta_hands_the_sampled_running_edges_to_the_learned_one() -> None:
    live = LiveEta(None, 2)
    live.pace = _this_run()
    live.work_key = "ninja:tree"
    live.plan([(output, "CXX_COMPILER__t_Release") for output in [HEAVY, *LIGHT]])
    before = live.estimate_at(150.0, None, (10, 11))
    live.observe(
        1000.0, 2, None, [RunningEdge("/src/tree/src/heavy.cc", "cc1plus", "compiler", 100.0)]
    )
    after = live.estimate_at(150.0, None, (10, 11))
    assert before is not None and after is not None
    assert abs(before.remaining_s - 170.0) < 1e-6 and abs(after.remaining_s - 260.0) < 1e-6
    assert not after.first_build
