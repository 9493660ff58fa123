"""A first build of a tree whose sources another tree on this host built before (another build
directory, another variant, another release): each edge left at its time there, at this build's
pace against it, scheduled on this build's jobs with the graph (`eta_model.other_tree`,
`from_other_tree`, `History.runs_of_other_work`). The recordings' side is
benchmarks/eta_accuracy.py --recordings, "other_tree_prior"; the real-ninja side
tests/supervision/test_live_eta_other_tree.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from workbench.analysis import eta_model
from workbench.history.records import SUCCEEDED, EdgeRow, NewBuild
from workbench.history.store import History

UNITS = [f"lib/CMakeFiles/lib.dir/src/u{n}.c.o" for n in range(40)]
BIG = "lib/CMakeFiles/lib.dir/src/big.c.o"


def _other(seconds: dict[str, float], covers: float = 1.0) -> eta_model.OtherTree:
    return eta_model.OtherTree(7, seconds, covers)


def test_another_tree_says_which_unit_is_heavy() -> None:
    """The other tree built the same library at half this host's speed: its big.c took 60 s,
    its units 2 s. Here 20 units finished at 1 s each (the pace: half their time there) and
    big.c has not started: it costs 30 s and, at -j16 behind the 20 units left (1 s, 16 at a
    time, in the graph's order), ends the build 31 s on. With nothing to learn from, big.c
    costs what a unit costs (1 s)."""
    costs = eta_model.EdgeCosts.of([*UNITS, BIG])
    for output in UNITS[:20]:
        costs.add(output, 1.0)
    there = {eta_model.tree_key(o): 2.0 for o in UNITS}
    there["src/big.c"] = 60.0
    assert costs.cost(BIG)[0] == pytest.approx(1.0)
    said = eta_model.from_other_tree(costs, _other(there), 16)
    assert said is not None
    assert said.remaining_s == pytest.approx(31.0)
    assert said.pace == pytest.approx(0.5)
    assert "build #7" in said.basis and "0.5× its time" in said.basis
    assert said.low_s < said.remaining_s < said.high_s
    # Nothing the other tree built has finished here: no pace, no estimate.
    assert eta_model.from_other_tree(costs, _other({"src/other.c": 5.0}), 16) is None


def test_a_running_edge_counts_what_is_left_of_it_and_the_graph_orders_the_rest() -> None:
    """big.c has run 20 of its 30 s (60 s there at pace 0.5) while the units are done; the link
    waits for it: the build ends when big.c does, plus the link (4 s there: 2 s here)."""
    link = "lib/liblib.a"
    costs = eta_model.EdgeCosts.of([*UNITS, BIG, link])
    for output in UNITS:
        costs.add(output, 1.0)
    there = {eta_model.tree_key(o): 2.0 for o in UNITS}
    there.update({"src/big.c": 60.0, "liblib.a": 4.0})
    waits = {link: [*UNITS, BIG]}
    said = eta_model.from_other_tree(costs, _other(there), 16, {BIG: 20.0}, waits)
    assert said is not None
    assert said.remaining_s == pytest.approx(12.0, abs=0.01)
    # Without the graph the link would start at once, beside big.c.
    alone = eta_model.from_other_tree(costs, _other(there), 16, {BIG: 20.0}, None)
    assert alone is not None and alone.remaining_s == pytest.approx(10.0, abs=0.01)
    # big.c has run 40 s, then 60 s, past its 30: it is not about to end (the file changed
    # here, or the host is busier for it): more than the link's 2 s is left, not the link alone.
    for age in (40.0, 60.0):
        late = eta_model.from_other_tree(costs, _other(there), 16, {BIG: age}, waits)
        assert late is not None and late.remaining_s > 2.0 + 0.5, (age, late)


def test_what_is_left_of_an_edge_past_its_expected_time() -> None:
    """`rest_beyond`: a log-normal's mean residual life. Well short of its mean an edge has its
    mean less its age left; at its mean, with a spread of 0.25, about a fifth of it more; past
    it the rest shrinks slowly and never to nothing (at twice its mean still a tenth of it),
    and a wider spread leaves more."""
    assert eta_model.rest_beyond(64.0, 0.25, 0.0) == pytest.approx(64.0)
    assert eta_model.rest_beyond(64.0, 0.25, 10.0) == pytest.approx(54.0, abs=0.01)
    at_mean = eta_model.rest_beyond(64.0, 0.25, 64.0)
    assert 0.1 * 64 < at_mean < 0.3 * 64
    assert eta_model.rest_beyond(64.0, 0.25, 128.0) > 0.1 * 64
    assert eta_model.rest_beyond(64.0, 0.5, 80.0) > eta_model.rest_beyond(64.0, 0.25, 80.0)
    assert eta_model.rest_beyond(64.0, 0.25, 1e6) > 0.0


def test_the_other_tree_must_cover_most_of_this_build() -> None:
    """Candidates newest first: one that built a third of this tree's edges is passed over; the
    next, which built 36 of the 41 (88%), stands for it; the mean of a key built twice."""
    planned = [*UNITS, BIG]
    small = [(o, 1.0) for o in UNITS[:14]]
    fuller = [(o, 2.0) for o in UNITS[:35]]
    fuller += [("lib/CMakeFiles/lib_shared.dir/src/big.c.o", 50.0), (BIG, 70.0)]
    found = eta_model.other_tree(planned, [(9, small), (8, fuller)])
    assert found is not None
    assert found.build_id == 8
    assert found.covers == pytest.approx(36 / 41)
    assert found.seconds["src/big.c"] == pytest.approx(60.0)
    assert eta_model.other_tree(planned, [(9, small)]) is None
    assert eta_model.other_tree([], [(8, fuller)]) is None


def test_a_candidate_passed_over_by_its_file_names_could_not_have_covered() -> None:
    """`other_tree` passes over a candidate whose outputs' file names (less the object suffix)
    are too few of this build's, without working out its tree keys: it picks the same tree a
    full count of every candidate's tree keys picks, over candidates of every shape (other
    target directories, the same sources under other parents, programs, archives, .obj
    objects, a custom command's own `.o`, parts missing)."""
    import random

    rng = random.Random(5)
    planned = [
        *(f"src/CMakeFiles/lib.dir/d{n % 7}/u{n}.cc.o" for n in range(60)),
        *(f"tests/CMakeFiles/t{n}.dir/t{n}.cc.o" for n in range(20)),
        *(f"bin/prog{n}" for n in range(6)),
        "lib/liblib.a",
        "gen/table.o",
    ]

    def variant(seed: int) -> list[tuple[str, float]]:
        picked = [o for o in planned if rng.random() < 0.6 + 0.4 * (seed % 3) / 2]
        moved = []
        for output in picked:
            if rng.random() < 0.3 and "CMakeFiles/" in output:
                head, tail = output.split("CMakeFiles/", 1)
                output = f"{head}CMakeFiles/other_{seed}.dir/{tail.split('/', 1)[1]}"
            if rng.random() < 0.1:
                output = output.removesuffix(".o") + ".obj"
            moved.append((output, rng.uniform(0.1, 9.0)))
        moved += [(f"extra/e{seed}_{n}.c.o", 1.0) for n in range(rng.randrange(0, 30))]
        return moved

    keys = {eta_model.tree_key(o) for o in planned}
    for round_ in range(40):
        candidates = [(n, variant(round_ * 10 + n)) for n in range(4)]
        expected = next(
            (
                n
                for n, edges in candidates
                if eta_model._covering(keys, edges)[1] >= eta_model.OTHER_TREE_COVERS
            ),
            None,
        )
        found = eta_model.other_tree(planned, candidates)
        assert (found.build_id if found else None) == expected, round_


def test_the_trees_own_log_from_before_the_build_stands_for_it_and_says_so() -> None:
    """A tree ninja built before workbench watched it: its `.ninja_log` holds each edge's time
    (`own_earlier_runs`); it stands for the tree when it holds 80% of its edges, and the basis
    says where the times come from, not "another tree"."""
    planned = [*UNITS, BIG]
    before = {o: 2.0 for o in UNITS}
    before[BIG] = 60.0
    own = eta_model.own_earlier_runs(planned, "/b/.ninja_log", before)
    assert own is not None and own.build_id is None and own.log == "/b/.ninja_log"
    assert own.covers == 1.0 and own.seconds["src/big.c"] == 60.0
    costs = eta_model.EdgeCosts.of(planned)
    for output in UNITS[:20]:
        costs.add(output, 1.0)
    said = eta_model.from_other_tree(costs, own, 16)
    assert said is not None and said.remaining_s == pytest.approx(31.0)
    assert "earlier ninja runs" in said.basis and ".ninja_log" in said.basis, said.basis
    assert "another tree" not in said.basis and "build #" not in said.basis
    # A log that holds a third of the edges (one target built by hand) does not.
    partial = {o: 2.0 for o in UNITS[:14]}
    assert eta_model.own_earlier_runs(planned, "/b/.ninja_log", partial) is None


def test_another_build_directorys_log_stands_for_the_tree_and_is_named() -> None:
    """A candidate named by a `.ninja_log`'s path (another build directory beside this one,
    built by ninja alone) stands for the tree as a history's run does, and the basis names
    the log, not a build number."""
    planned = [*UNITS, BIG]
    logged = [(o, 2.0) for o in UNITS] + [(BIG, 60.0)]
    found = eta_model.other_tree(planned, [("../release/.ninja_log", logged)])
    assert found is not None and found.build_id is None and not found.own
    assert found.log == "../release/.ninja_log"
    costs = eta_model.EdgeCosts.of(planned)
    for output in UNITS[:20]:
        costs.add(output, 1.0)
    said = eta_model.from_other_tree(costs, found, 16)
    assert said is not None and said.remaining_s == pytest.approx(31.0)
    assert "another build directory" in said.basis and "../release/.ninja_log" in said.basis


def _build(
    history: History, name: str, work_key: str, edges: int, *, host: str | None = None
) -> int:
    record = history.create(NewBuild(name, "run", ("ninja",), "/", "/", {}, name, False))
    history.mark_running(record.id, 1, 1, 1000.0)
    rows = [EdgeRow((f"o{n}.o",), 1000.0 + n, 1001.0 + n, 0, "0") for n in range(edges)]
    history.record_edges(record.id, None, rows, work_key)
    history.finish(record.id, SUCCEEDED, 1000.0 + edges, float(edges), 0, None, None, 0, {})
    if host is not None:
        with history._write() as db:
            db.execute("UPDATE builds SET host = ? WHERE id = ?", (host, record.id))
    return record.id


def test_the_history_offers_each_other_trees_fullest_run_on_this_host(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        full_a = _build(history, "a", "ninja:/a", 30)
        _build(history, "a", "ninja:/a", 2)  # a rebuild of one file in tree a
        _build(history, "far", "ninja:/far", 40, host=f"not-{socket.gethostname()}")
        full_b = _build(history, "b", "ninja:/b", 20)
        own = _build(history, "c", "ninja:/c", 25)
        now = _build(history, "c", "ninja:/c", 1)
        found = history.runs_of_other_work("ninja:/c", now, 10)
        # Newest first; tree a by its full build, not its later rebuild; never tree c itself
        # nor the tree another host built.
        assert found == [full_b, full_a]
        assert own not in found
        assert history.runs_of_other_work("ninja:/c", now, 1) == [full_b]


def test_a_nix_builds_eta_reads_no_edges_it_will_not_use(tmp_path: Path) -> None:
    """A Nix build's ETA is by progress: its work's earlier runs' edges and another tree's are
    not read for it (its builder's ninja shares its work key with other derivations' ninjas)."""
    from workbench.supervision.live_eta import LiveEta

    with History(tmp_path) as history:
        _build(history, "earlier", "ninja:k", 30)
        _build(history, "other tree", "ninja:other", 30)
        later = _build(history, "later", "ninja:later", 0)
        plain = LiveEta(history, later)
        plain.learn("ninja:k")
        assert plain.pace is not None and plain.pace.references
        nix = LiveEta(history, later, nix=True)
        nix.learn("ninja:k")
        assert nix.pace is not None and not nix.pace.references
        nix.learn("ninja:new")
        nix.plan([(f"o{n}.o", "CXX_COMPILER") for n in range(30)])
        assert nix.other is None
        alone = LiveEta(history, later)
        alone.learn("ninja:new")
        alone.plan([(f"o{n}.o", "CXX_COMPILER") for n in range(30)])
        assert alone.other is not None  # the same graph, not a Nix build: the other tree's
