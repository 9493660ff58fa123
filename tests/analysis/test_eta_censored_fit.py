"""benchmarks/eta_accuracy.py scores a first build's rest costed by a log-normal fitted with the
running edges censored at their age (`censored_rest`, "censored_fit") against the shipped
estimate. The fit on a sample cut at a known age, the rest it leaves of a running edge against
a numerical integral, its schedule against the benchmark's plain one, and real `EdgeCosts` of a
generated graph: light units finished at -j16 while heavier ones still run."""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import pytest

from workbench.analysis import eta_model


def _lognormal_sample(mu: float, sigma: float, count: int) -> list[float]:
    """`count` durations at evenly spaced quantiles of a log-normal (no randomness)."""
    normal = statistics.NormalDist(mu, sigma)
    return [math.exp(normal.inv_cdf((i + 0.5) / count)) for i in range(count)]


def test_the_fit_reaches_beyond_the_longest_edge_finished(accuracy: Any) -> None:
    """A log-normal (0, 1) sample of 400 edges seen when every edge longer than 2 s is still
    running (its age 2 s, 24% of them): the finished ones alone say a mean under 1 s and that
    hardly any edge takes longer than the longest finished; with the running ones censored the
    fit finds the distribution again, and the share of edges beyond 2 s."""
    sample = _lognormal_sample(0.0, 1.0, 400)
    cut = 2.0
    finished = [x for x in sample if x <= cut]
    running = [cut for x in sample if x > cut]
    assert max(finished) < cut and len(running) > 40
    naive_mu, naive_sigma = accuracy.censored_lognormal(finished, [], 1.0, 0.0)
    assert naive_mu < -0.2 and accuracy.lognormal_mean(naive_mu, naive_sigma) < 1.0
    mu, sigma = accuracy.censored_lognormal(finished, running, 1.0, 0.0)
    assert mu == pytest.approx(0.0, abs=0.03)
    assert sigma == pytest.approx(1.0, abs=0.03)
    beyond = 1.0 - statistics.NormalDist(mu, sigma).cdf(math.log(cut))
    naive_beyond = 1.0 - statistics.NormalDist(naive_mu, naive_sigma).cdf(math.log(cut))
    assert beyond == pytest.approx(len(running) / len(sample), abs=0.01)
    assert naive_beyond < 0.1 < 0.2 < beyond


def test_the_prior_holds_a_fit_of_few_edges_to_its_spread(accuracy: Any) -> None:
    """Three finished edges of nearly one cost say almost no spread; five pseudo-edges of
    spread 1 keep the fit from saying that every edge left costs the same."""
    _mu, alone = accuracy.censored_lognormal([1.0, 1.1, 0.9], [], 1.0, 0.0)
    _mu, held = accuracy.censored_lognormal([1.0, 1.1, 0.9], [], 1.0, 5.0)
    assert alone < 0.1 < 0.7 < held < 1.0


def test_what_is_left_of_a_running_edge_is_the_fits_expectation(accuracy: Any) -> None:
    """E[X - a | X > a] against the integral of the survival function from a (midpoint sums),
    at ages below, at and above the median; at age 0 the mean."""
    mu, sigma = 0.5, 0.8
    normal = statistics.NormalDist(mu, sigma)
    assert accuracy.rest_after(mu, sigma, 0.0) == pytest.approx(math.exp(mu + sigma**2 / 2))
    rests = []
    for age in (0.5, math.exp(mu), 6.0):
        step, upper = 0.001, 200.0
        steps = int((upper - age) / step)
        survival = (
            sum(1.0 - normal.cdf(math.log(age + (k + 0.5) * step)) for k in range(steps)) * step
        )
        expected = survival / (1.0 - normal.cdf(math.log(age)))
        rest = accuracy.rest_after(mu, sigma, age)
        assert rest == pytest.approx(expected, rel=0.01)
        rests.append(rest)
    # What has run long tends to run long: the rest grows with the age, past the median.
    assert rests[2] > rests[1]


def test_the_graph_schedule_is_the_benchmarks_schedule(accuracy: Any) -> None:
    """The shipped schedule (`eta_model.schedule_left`, a heap, for a 12,000-edge graph) ends
    each random graph's rest when the benchmark's plain `schedule_left` does: the same order,
    the same waits."""
    rng = random.Random(7)
    for case in range(30):
        names = [f"e{n}" for n in range(40)]
        waits = {
            name: sorted(rng.sample(names[:index], min(index, rng.randrange(0, 4))))
            for index, name in enumerate(names)
        }
        finished = set(names[:8])
        running = {name: rng.uniform(0.1, 5.0) for name in names[8:12]}
        to_start = {name: rng.uniform(0.1, 5.0) for name in names[12:]}
        jobs = 1 + case % 6
        plain = accuracy.schedule_left(waits, running, to_start, finished, jobs)
        assert accuracy.schedule_graph(waits, running, to_start, jobs) == pytest.approx(plain)


def test_heavy_units_running_at_j16_are_costed_beyond_what_finished(accuracy: Any) -> None:
    """At -j16, 40 light units (1 s) finished while 16 others of the same part have run 6 s and
    still run, 40 more not started. The shipped model's mean of the finished and running ones
    costs each unit left at most about 3 s; the fit, with the 16 censored at 6 s, at more than
    the longest finished, and the time left is more than what is left of a running unit."""
    outputs = [f"lib/CMakeFiles/lib.dir/src/u{n}.c.o" for n in range(96)]
    costs = eta_model.EdgeCosts.of(outputs)
    for output in outputs[:40]:
        costs.add(output, 1.0 + 0.01 * int(output.split("u")[-1].split(".")[0]))
    running = {output: 6.0 for output in outputs[40:56]}
    means = costs._means(running)
    shipped_cost, known = costs.cost(outputs[60], means)
    assert not known and shipped_cost < 3.5
    spans = accuracy.censored_rest(costs, running, 16, 1.0, 5.0)
    assert spans is not None and len(spans) == 1
    mu, sigma = accuracy.censored_lognormal(
        [costs.finished[o] for o in outputs[:40]], [6.0] * 16, 1.0, 5.0
    )
    assert accuracy.lognormal_mean(mu, sigma) > max(costs.finished.values())
    assert spans[0] > accuracy.rest_after(mu, sigma, 6.0) > 0.0
    # Drawn: 32 seeded schedules, sorted, the same for the same seed.
    drawn = accuracy.censored_rest(costs, running, 16, 1.0, 5.0, draws=32, seed=3)
    assert drawn == sorted(drawn) and len(drawn) == 32
    assert drawn == accuracy.censored_rest(costs, running, 16, 1.0, 5.0, draws=32, seed=3)
    # Nothing finished: nothing to fit.
    assert accuracy.censored_rest(eta_model.EdgeCosts.of(outputs), running, 16, 1.0, 5.0) is None
