"""No input crashes the log parsers: arbitrary text, bytes, and JSON after `@nix `."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.progress import (
    NinjaStatusParser,
    ProgressTracker,
    Step,
    parse_make,
    parse_ninja,
    parse_nix_line,
    parse_step,
)
from workbench.progress.visible import terminal_text

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=8,
)
# Objects shaped like Nix's, with any values: the likeliest way to reach deep code paths.
NIX_OBJECT = st.fixed_dictionaries(
    {},
    optional={
        "action": st.sampled_from(["start", "stop", "result", "msg", "setPhase", "other"]) | JSON,
        "id": st.integers(min_value=-3, max_value=5) | JSON,
        "type": st.sampled_from([0, 100, 101, 102, 103, 104, 105, 106, 108, 111, 112]) | JSON,
        "fields": st.lists(JSON, max_size=5) | JSON,
        "text": JSON,
        "level": st.integers(min_value=-1, max_value=8) | JSON,
        "msg": JSON,
        "phase": JSON,
        "parent": JSON,
    },
)
PREFIXES = st.sampled_from(
    ["", "[", "[1/", "[ 5%] ", "@nix ", "@nix {", "FAILED: ", "make *** ", "\r", "\x1b["]
)


def _check_tracker(tracker: ProgressTracker, lines: list[str]) -> None:
    for line in lines:
        tracker.feed(line)
        shown = tracker.render(line)
        assert shown is None or isinstance(shown[1], str)
        rendered = tracker.render_line(line)
        assert rendered is None or isinstance(rendered, str)
    progress = tracker.snapshot()
    assert isinstance(progress.last_line, str)
    assert progress.lines == len(lines)
    assert min(progress.planned, progress.done, progress.failed, progress.running) >= 0
    assert progress.step is None or isinstance(progress.step, Step)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(PREFIXES, st.text(max_size=80)).map("".join), max_size=20))
def test_text_lines(lines: list[str]) -> None:
    for line in lines:
        parse_ninja(line)
        parse_make(line)
        parse_step(line)
        parse_nix_line(line)
    _check_tracker(ProgressTracker(), lines)
    _check_tracker(ProgressTracker(ninja_status="[%p %f/%t %r] "), lines)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=120), max_size=10))
def test_byte_lines(chunks: list[bytes]) -> None:
    # The supervisor decodes with errors="replace"; surrogateescape must not crash either.
    for errors in ("replace", "surrogateescape"):
        lines = [chunk.decode("utf-8", errors) for chunk in chunks]
        _check_tracker(ProgressTracker(), lines)


# Drawing nested JSON is what costs here (Hypothesis's generation, not the parser): keep the
# lists short and the examples few enough for the suite's time budget.
@settings(max_examples=100, deadline=None)
@given(st.lists(NIX_OBJECT | JSON, min_size=1, max_size=6))
def test_arbitrary_json_after_nix_prefix(values: list[object]) -> None:
    lines = ["@nix " + json.dumps(value) for value in values]
    # Nix's own compact, sorted-key form reaches the tracker's fast path for log lines.
    lines += [
        "@nix " + json.dumps(value, separators=(",", ":"), sort_keys=True) for value in values
    ]
    for line in lines:
        parse_nix_line(line)
    _check_tracker(ProgressTracker(), lines)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.text(max_size=60))
def test_custom_ninja_status_formats(status: str, line: str) -> None:
    parser = NinjaStatusParser(status)
    step = parser.parse(line)
    assert step is None or 0 <= step.done <= step.total


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_log_line_fast_path(text: str) -> None:
    """Any builder line survives the fast path and comes out exactly as Nix encoded it."""
    tracker = ProgressTracker()
    line = "@nix " + json.dumps(
        {"action": "result", "fields": [text], "id": 5, "type": 101},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    tracker.feed(line)
    # What a person reads: the text itself, its control characters shown as `cat -v` does.
    assert tracker.render(line) == (None, terminal_text(text))
    assert tracker.last_line == terminal_text(text)
    if not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text.replace("\t", "")):
        assert tracker.render(line) == (None, text)
