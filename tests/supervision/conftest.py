"""Fixtures of the supervision tests: a bench (state dir + cleanup) and the C++ fixture project."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor.cxx_project import configure, write_project
from supervised import Bench

needs_cxx_tools = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("cmake", "ninja", "g++")),
    reason="needs cmake, ninja and g++ (scripts/test.sh installs them)",
)


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """The CLI against a private state directory; every process it started dies at the end."""
    state = tmp_path / "state"
    bench = Bench(state)
    try:
        yield bench
    finally:
        bench.cleanup()


@pytest.fixture
def cxx_project(tmp_path: Path) -> tuple[Path, Path]:
    """The generated C++ project (12 units, 3 heavy), configured for ninja: (checkout, build).

    No CMAKE_BUILD_TYPE (-O0): a heavy unit compiles in about two seconds, a light one in under
    half of one, so a heavy job outlasts any light one by more than the 1 s sampling interval
    (its measured time is a lower bound, up to one interval short) and a -j1 build takes about
    ten seconds on two cores.
    """
    checkout = tmp_path / "checkout"
    source = checkout / "src"
    build = checkout / "build"
    write_project(source)
    (checkout / ".git").mkdir(parents=True)  # a checkout root, as the lock sees it
    configure(source, build, "Ninja", build_type="")
    return checkout, build
