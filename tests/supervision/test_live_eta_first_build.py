"""A first build's ETA (nothing earlier to learn from): each kind of edge left at the pace this
build kept for that kind, over the parallelism it kept; a wide range that says it is a first
build. Counting edges alone said 28 minutes left of fmt at 47% when 4 were: its heavy test
compiles came first, its quick links last."""

from __future__ import annotations

from workbench.analysis.eta_model import (
    FIRST_HIGH,
    FIRST_LOW,
    extrapolate,
    extrapolate_by_kind,
    same_source,
)
from workbench.progress.live_view import LiveView
from workbench.reading.follow import eta_text
from workbench.supervision.live_eta import LiveEta


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


def test_too_little_done_says_nothing() -> None:
    assert extrapolate_by_kind(5.0, 100, {"a.o": 1.0}, None) is None
    assert extrapolate_by_kind(600.0, 100, {}, None) is None


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
