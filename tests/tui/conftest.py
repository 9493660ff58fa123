"""Fixtures of the TUI tests: the real CLI against a private state directory, the C++ fixture
project, and the app on a recorded host (no probing of this one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor.cxx_project import configure, write_project
from recorded_host import recorded_doctor
from supervision.supervised import Bench

from workbench.tui.app import WorkbenchApp, make_app


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """The CLI against a private state directory; every process it started dies at the end."""
    bench = Bench(tmp_path / "state")
    try:
        yield bench
    finally:
        bench.cleanup()


@pytest.fixture
def cxx_project(tmp_path: Path) -> tuple[Path, Path]:
    """The generated C++ project configured for ninja (no optimisation): (checkout, build)."""
    checkout = tmp_path / "checkout"
    source = checkout / "src"
    build = checkout / "build"
    write_project(source)
    (checkout / ".git").mkdir(parents=True)  # a checkout root, as the lock sees it
    configure(source, build, "Ninja", build_type="")
    return checkout, build


@pytest.fixture
def tui(config_copy: Path, bench: Bench):
    """A factory of the app on the bench's state directory and a recorded H100 host."""

    def make() -> WorkbenchApp:
        return make_app(str(config_copy), str(bench.state), doctor=recorded_doctor())

    return make
