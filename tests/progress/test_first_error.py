"""The failure's summary: Nix's own `error:` line, else the compiler's first error."""

from __future__ import annotations

from pathlib import Path

from workbench.progress import ProgressTracker

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_failed_nix_build_is_summed_up_by_nixs_error_line() -> None:
    tracker = ProgressTracker()
    for line in (FIXTURES / "nix-build-fail.stderr").read_text().splitlines():
        tracker.feed(line)
    first = tracker.snapshot().first_error
    assert first is not None and first.startswith("error: builder for '/nix/store/")
    assert "failed with exit code" in first


def test_a_compiler_error_is_the_summary_of_a_plain_build() -> None:
    tracker = ProgressTracker()
    lines = [
        "[1/3] Building CXX object light_1.cc.o",
        "FAILED: light_1.cc.o",
        "/usr/bin/c++ -c light_1.cc -o light_1.cc.o",
        "light_1.cc:3:12: error: 'nope' was not declared in this scope",
        "light_1.cc:9:1: error: expected ';' before '}' token",
        "ninja: build stopped: subcommand failed.",
    ]
    for line in lines:
        tracker.feed(line)
    progress = tracker.snapshot()
    assert progress.first_error == "light_1.cc:3:12: error: 'nope' was not declared in this scope"
    assert progress.step_failures == ("light_1.cc.o",)


def test_make_and_cmake_errors_without_ninja_and_no_error_no_summary() -> None:
    tracker = ProgressTracker()
    tracker.feed("-- Configuring incomplete, errors occurred!")
    tracker.feed("CMake Error at CMakeLists.txt:4 (find_package):")
    assert tracker.snapshot().first_error == "CMake Error at CMakeLists.txt:4 (find_package):"
    quiet = ProgressTracker()
    quiet.feed("-- the error handling of x is fine")  # no compiler's error shape
    assert quiet.snapshot().first_error is None
