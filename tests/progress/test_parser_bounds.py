"""Hostile progress lines: numbers past Python's 4300-digit limit, megabyte brackets, huge counts.

Before the bounds, one ninja-shaped line with 5000-digit numbers raised ValueError in the
tracker (the supervisor died with it, the build with SIGPIPE), and a bracket of a megabyte of
digits without a slash made the lazy status pattern quadratic.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.logs.readable import readable_line
from workbench.progress import NinjaStatusParser, ProgressTracker, parse_ninja, parse_step
from workbench.progress.steps import MAX_DIGITS

HUGE = "9" * 5000


@pytest.mark.parametrize(
    "line",
    [
        f"[{HUGE}/{HUGE}] Building CXX object x.o",
        f"[1/{HUGE}] x",
        f"[ 45% {HUGE}/{HUGE}] x",
        f'@nix {{"action":"result","fields":["[{HUGE}/{HUGE}] x"],"id":1,"type":101}}',
        f'@nix {{"action":"result","fields":[{"9" * 4000},1,0,0],"id":2,"type":105}}',
        f"these {HUGE} derivations will be built:",
    ],
)
def test_lines_with_huge_numbers_are_not_progress(line: str) -> None:
    tracker = ProgressTracker()
    tracker.feed('@nix {"action":"start","id":2,"level":0,"text":"","type":104}')
    tracker.feed(line)
    tracker.feed(
        '@nix {"action":"msg","level":3,"msg":"these ' + HUGE + ' derivations will be built:"}'
    )
    progress = tracker.snapshot()
    assert progress.step is None
    assert progress.planned < 10**MAX_DIGITS
    assert parse_step(line) is None
    assert tracker.render_line(line) is not None or line.startswith("@nix")
    assert isinstance(readable_line(line)[0], str)
    custom = ProgressTracker(ninja_status="[%p %f/%t %r] ")
    custom.feed(line)
    assert custom.snapshot().step is None


def test_progress_after_a_hostile_line_still_counts() -> None:
    tracker = ProgressTracker()
    tracker.feed(f"[{HUGE}/{HUGE}] x")
    tracker.feed("[3/10] Building CXX object a.o")
    step = tracker.snapshot().step
    assert step is not None and (step.done, step.total) == (3, 10)


@pytest.mark.timeout(60)
def test_a_megabyte_bracket_parses_in_linear_time() -> None:
    # Quadratic before: about 5 * 10**11 regex steps for this line (hours); now one find().
    for line in ("[" + "1" * 1_000_000 + "]", "[" + "1" * 1_000_000 + "/x]", "[ " * 500_000):
        assert parse_ninja(line) is None
        assert NinjaStatusParser("[%f/%t] ").parse(line) is None
        assert NinjaStatusParser("%u %s/%t ").parse(line) is None
        tracker = ProgressTracker()
        tracker.feed(line)
        tracker.render_line(line)


def test_a_long_description_is_kept_whole() -> None:
    description = "Building CXX object " + "x" * 5000
    assert NinjaStatusParser("[%f/%t] ").parse(f"[1/2] {description}").description == description
    assert parse_ninja(f"[ 50% 1/2] {description}").description == description


# Numbers as digit strings: hypothesis itself cannot print integers past 4300 digits.
DIGITS = st.integers(min_value=1, max_value=6000).map(lambda count: "9" * count) | st.text(
    alphabet="0123456789", min_size=1, max_size=25
)
DIGIT_HEAVY = st.text(alphabet="0123456789/[]% ", max_size=60) | st.builds(
    lambda a, b: f"[{a}/{b}] x", DIGITS, DIGITS
)


@settings(max_examples=300, deadline=None)
@given(st.lists(DIGIT_HEAVY, max_size=10))
def test_digit_heavy_lines_never_raise(lines: list[str]) -> None:
    for status in (None, "[%f/%t] ", "[%p %s/%t %r] "):
        tracker = ProgressTracker(ninja_status=status)
        for line in lines:
            tracker.feed(line)
            tracker.render_line(line)
            nix = "@nix " + json.dumps({"action": "result", "fields": [line], "id": 1, "type": 101})
            tracker.feed(nix)
            readable_line(nix)
        step = tracker.snapshot().step
        assert step is None or 0 <= step.done <= step.total < 10**MAX_DIGITS


def test_the_iterate_cycles_ninja_summary_skips_a_status_line_of_huge_numbers() -> None:
    # `workbench iterate` reads the cycle's ninja output after the build: the same line
    # raised ValueError there (a traceback after the build) until its count was bounded too.
    from workbench.iterate.ninja_output import parse

    run = parse([f"[1/{HUGE}] Building CXX object a.o", "[1/2] Building CXX object src/b.cc.o"])
    assert run.edges == 1 and run.total == 2
