"""benchmarks/eta_accuracy.py scores a first build's rest scheduled on the run's jobs with costs
drawn from its finished edges (`sampled_rest`, "sampled_schedule") against the shipped
estimate. Real `EdgeCosts` of a generated graph: a library built twice (static and shared), its
one long unit ending the build at -j16."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.analysis import eta_model


def _library(units: int) -> list[str]:
    """A library's units built for its static and its shared target, then `big.c` twice."""
    outputs = []
    for target in ("lib_static", "lib_shared"):
        outputs += [f"lib/CMakeFiles/{target}.dir/src/u{n}.c.o" for n in range(units)]
        outputs.append(f"lib/CMakeFiles/{target}.dir/src/big.c.o")
    return outputs


def test_the_water_level_spreads_work_over_the_first_jobs_free(accuracy: Any) -> None:
    assert accuracy._fill([0.0, 2.0], 4.0) == [3.0, 3.0]
    assert accuracy._fill([0.0, 2.0], 1.0) == [1.0, 2.0]
    assert accuracy._fill([1.0, 1.0, 1.0], 0.0) == [1.0, 1.0, 1.0]


def test_one_long_unit_left_ends_a_j16_build(accuracy: Any) -> None:
    """At -j16, 15 light units running and the long unit's second copy not started (its first
    took 30 s): the build ends when that copy does, 30 s on, whatever the light units' costs.
    The shipped estimate spreads the work left over the parallelism kept so far and says 7 s;
    the schedule says 30 in every draw (the copy's cost is known, the light units are drawn
    from 1 s units)."""
    outputs = _library(40)
    costs = eta_model.EdgeCosts.of(outputs)
    static = [o for o in outputs if "lib_static" in o]
    for output in static:
        costs.add(output, 30.0 if output.endswith("big.c.o") else 1.0)
    shared = [o for o in outputs if "lib_shared" in o and not o.endswith("big.c.o")]
    for output in shared[:25]:
        costs.add(output, 1.0)
    running = {output: 0.5 for output in shared[25:40]}
    assert len(running) == 15
    spans = accuracy.sampled_rest(costs, running, 16, left=16)
    assert spans is not None and len(spans) == accuracy.SAMPLED_DRAWS
    assert spans[0] == spans[-1] == pytest.approx(30.0), spans
    # The same moment, the shipped way: 66 edge-seconds done in 20 s, 37.5 s of work left.
    shipped = eta_model.extrapolate_by_kind(
        20.0, len(outputs), dict(costs.finished), None, 19.0, None, running, costs
    )
    assert shipped is not None and shipped.remaining_s < 15.0, shipped


def test_a_running_edge_is_drawn_from_the_edges_longer_than_its_age(accuracy: Any) -> None:
    """Finished units of 1, 2, ... 10 s; one running for 8.5 s: what is left of it is 0.5 or
    1.5 s (the 9 and 10 s units less its age), never a unit shorter than its age; one running
    longer than any finished has RUNNING_REST of its age left. Seeded: the same call, the
    same draws; another seed, other draws."""
    outputs = [f"CMakeFiles/t.dir/u{n}.c.o" for n in range(12)]
    costs = eta_model.EdgeCosts.of(outputs)
    for n in range(10):
        costs.add(outputs[n], float(n + 1))
    spans = accuracy.sampled_rest(costs, {outputs[10]: 8.5}, 2, left=1, draws=64)
    assert spans is not None and set(spans) == {0.5, 1.5}, spans
    assert accuracy.sampled_rest(costs, {outputs[10]: 8.5}, 2, left=1, draws=64) == spans
    spans = accuracy.sampled_rest(costs, {outputs[10]: 20.0}, 2, left=1)
    assert spans is not None and set(spans) == {eta_model.RUNNING_REST * 20.0}
    # Not started: any of the ten, on the job left free.
    spans = accuracy.sampled_rest(costs, {}, 2, left=1, draws=64)
    assert spans is not None and set(spans) <= {float(n + 1) for n in range(10)}
    other = accuracy.sampled_rest(costs, {}, 2, left=1, draws=64, seed=1)
    assert other is not None and other != spans


def test_many_edges_left_fill_the_jobs_before_the_tail(accuracy: Any) -> None:
    """More edges left than are placed one by one (`SAMPLED_TAIL`): the others' mean work
    fills the jobs first. 1,000 edges left of 2 s each on 4 jobs: 500 s in every draw."""
    outputs = [f"CMakeFiles/t.dir/u{n}.c.o" for n in range(1100)]
    costs = eta_model.EdgeCosts.of(outputs)
    for output in outputs[:100]:
        costs.add(output, 2.0)
    spans = accuracy.sampled_rest(costs, {}, 4, left=1000)
    assert spans is not None
    assert spans[0] == spans[-1] == pytest.approx(500.0), spans
