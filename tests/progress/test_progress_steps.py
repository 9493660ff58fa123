"""ninja and make progress lines: the parsers alone, then real builds of a generated project."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from cxx_project import configure, started, write_project

from workbench.progress import (
    NinjaStatusParser,
    ProgressTracker,
    Step,
    clean_terminal_line,
    parse_make,
    parse_ninja,
    parse_step,
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[1/345] Building CXX object a.cc.o", Step("ninja", 1, 345, "Building CXX object a.cc.o")),
        (
            "[345/345] Linking CXX shared library libx.so",
            Step("ninja", 345, 345, "Linking CXX shared library libx.so"),
        ),
        ("[0/0]", Step("ninja", 0, 0, "")),
        ("[ 45% 12/100] Building x", Step("ninja", 12, 100, "Building x")),
        ("[12/100 3 running] Building x", Step("ninja", 12, 100, "Building x")),
        ("[5/4] nonsense", None),
        ("[a/b] nonsense", None),
        ("[²/3] superscripts are not numbers", None),
        ("plain line", None),
        ("", None),
        ("[", None),
    ],
)
def test_parse_ninja(line: str, expected: Step | None) -> None:
    assert parse_ninja(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "[  4%] Building CXX object CMakeFiles/x.dir/a.cc.o",
            Step("make", 4, 100, "Building CXX object CMakeFiles/x.dir/a.cc.o"),
        ),
        ("[ 45%] Built target x", Step("make", 45, 100, "Built target x")),
        ("[100%] Linking CXX executable x", Step("make", 100, 100, "Linking CXX executable x")),
        ("[101%] too much", None),
        ("[ ab%] no", None),
        ("Scanning dependencies of target x", None),
    ],
)
def test_parse_make(line: str, expected: Step | None) -> None:
    assert parse_make(line) == expected
    assert parse_step(line) == expected


def test_terminal_rewrites_and_colours_are_cleaned() -> None:
    # What ninja writes on a terminal: "\r" rewrites and an erase-to-end-of-line escape.
    line = "\r[1/3] Building a\x1b[K\r[2/3] Building b\x1b[K"
    assert clean_terminal_line(line) == "[2/3] Building b"
    tracker = ProgressTracker()
    tracker.feed(line)
    assert tracker.snapshot().step == Step("ninja", 2, 3, "Building b")


@pytest.mark.parametrize(
    ("status", "line", "expected"),
    [
        ("[%f/%t] ", "[3/9] cc a.c", Step("ninja", 3, 9, "cc a.c")),
        ("[%p %f/%t] ", "[ 33% 3/9] cc a.c", Step("ninja", 3, 9, "cc a.c")),
        ("%f/%t ", "3/9 cc a.c", Step("ninja", 3, 9, "cc a.c")),
        (
            "[%s started, %r running, %u left, %es] ",
            "[5 started, 2 running, 4 left, 1.234s] cc",
            Step("ninja", 3, 9, "cc"),
        ),
        ("(%p) ", "( 50%) cc", Step("ninja", 50, 100, "cc")),
        ("%o/s [%f/%t] ", "12.5/s [3/9] cc", Step("ninja", 3, 9, "cc")),
        ("[%f/%t] ", "[3/9", None),
        ("%e ", "1.5 no counts", None),
    ],
)
def test_custom_ninja_status(status: str, line: str, expected: Step | None) -> None:
    assert NinjaStatusParser(status).parse(line) == expected


def test_custom_ninja_status_in_the_tracker() -> None:
    tracker = ProgressTracker(ninja_status="%f/%t ")
    tracker.feed("7/20 Building CXX object a.cc.o")
    assert tracker.snapshot().step == Step("ninja", 7, 20, "Building CXX object a.cc.o")


def test_failures_are_collected() -> None:
    tracker = ProgressTracker()
    for line in (
        "FAILED: CMakeFiles/x.dir/a.cc.o",
        "make[2]: *** [CMakeFiles/x.dir/build.make:76: CMakeFiles/x.dir/b.cc.o] Error 1",
        "make: *** [Makefile:91: all] Error 2",
    ):
        tracker.feed(line)
    failures = tracker.snapshot().step_failures
    assert failures[0] == "CMakeFiles/x.dir/a.cc.o"
    assert "CMakeFiles/x.dir/b.cc.o" in failures[1]
    assert len(failures) == 3


@pytest.mark.slow
def test_real_ninja_build(tmp_path: Path) -> None:
    """ninja's real output through the tracker: the last step is [N/N], N = ninja's edges."""
    names = write_project(tmp_path / "src", units=8, heavy=())
    build = tmp_path / "build"
    configure(tmp_path / "src", build, "Ninja", build_type="")
    commands = subprocess.run(
        ["ninja", "-C", str(build), "-t", "commands", "all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    with started(
        ["ninja", "-C", str(build), "-j2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as ninja:
        assert ninja.stdout is not None
        tracker = ProgressTracker()
        shown: list[str | None] = []
        for line in ninja.stdout:
            tracker.feed(line)
            shown.append(tracker.render_line(line))
        assert ninja.wait(timeout=120) == 0
    progress = tracker.snapshot()
    assert progress.step is not None
    assert progress.step.tool == "ninja"
    assert progress.step.done == progress.step.total == len(commands)
    # One status line per edge, numbered 1..N in order.
    numbers = [int(m.group(1)) for line in shown if line and (m := re.match(r"\[(\d+)/", line))]
    assert numbers == list(range(1, len(commands) + 1))
    compiled = [line for line in shown if line and "Building CXX object" in line]
    assert len(compiled) == len(names) + 1  # the library's units and main.cc
    assert progress.nix is False and progress.planned == 0
    assert progress.lines == len(shown)


@pytest.mark.slow
def test_real_ninja_build_failure(tmp_path: Path) -> None:
    """A compile error: ninja's FAILED: line names the target."""
    write_project(tmp_path / "src", units=3, heavy=(), depth=5)
    (tmp_path / "src" / "light_1.cc").write_text("this is not C++;\n")
    build = tmp_path / "build"
    configure(tmp_path / "src", build, "Ninja", build_type="")
    result = subprocess.run(
        ["ninja", "-C", str(build), "-j1"], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode != 0
    tracker = ProgressTracker()
    tracker.feed_all(result.stdout.splitlines())
    (failure,) = tracker.snapshot().step_failures
    assert failure.strip() == "CMakeFiles/fixture.dir/light_1.cc.o"


@pytest.mark.slow
def test_make_percentages_out_of_order_never_take_the_bar_back() -> None:
    # Real `make -j2` beside busy loops printed [ 18%] before [  9%]: its jobs report as they
    # finish. Within one run the bar keeps the highest; after 100 % a new run starts over.
    tracker = ProgressTracker()
    seen = []
    for line in [
        "[ 18%] Building CXX object a.o",
        "[  9%] Building CXX object b.o",
        "[ 27%] Building CXX object c.o",
        "[100%] Built target all",
        "[ 50%] Installing x",
    ]:
        tracker.feed(line)
        step = tracker.snapshot().step
        assert step is not None
        seen.append((step.done, step.description))
    assert seen == [
        (18, "Building CXX object a.o"),
        (18, "Building CXX object b.o"),
        (27, "Building CXX object c.o"),
        (100, "Built target all"),
        (50, "Installing x"),
    ]


@pytest.mark.slow(reason="a real make build of the C++ fixture project")
def test_real_make_build(tmp_path: Path) -> None:
    """CMake's Makefiles through real make: percentages rise to 100, one line per object."""
    names = write_project(tmp_path / "src", units=8, heavy=())
    build = tmp_path / "build"
    configure(tmp_path / "src", build, "Unix Makefiles", build_type="")
    with started(
        ["make", "-C", str(build), "-j2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as make:
        assert make.stdout is not None
        tracker = ProgressTracker()
        percents: list[int] = []
        shown: list[str | None] = []
        for line in make.stdout:
            tracker.feed(line)
            shown.append(tracker.render_line(line))
            step = tracker.snapshot().step
            if step is not None and (not percents or percents[-1] != step.done):
                percents.append(step.done)
        assert make.wait(timeout=120) == 0
    progress = tracker.snapshot()
    assert progress.step == Step("make", 100, 100, "Built target fixture_main")
    assert max(percents) == 100 and percents[0] < 50
    assert percents == sorted(percents)
    compiled = [line for line in shown if line and "Building CXX object" in line]
    assert len(compiled) == len(names) + 1  # the library's units and main.cc
