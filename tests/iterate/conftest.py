"""Fixtures of the iterate tests: the fixture source tree, its patch series, the real CLI.

The source is tests/patch_fixture.py's: the sample project with 36 translation units (one
heavy) and a series in patches/ beside the `config_copy` configs (tune-light-3 and tune-light-7
enabled for the cpu flavour and every variant; three broken patches disabled). The tests run
the real `workbench` CLI (tests/supervision/supervised.py's Bench: every process it starts is
killed at the end), which runs real git, cmake, ninja and g++ under the real supervisor.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from iterate_loop import Loop
from patch_fixture import write_fixture_series, write_fixture_source
from supervision.supervised import Bench

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import set_setting


@pytest.fixture
def loop(tmp_path: Path, config_copy: Path) -> Iterator[Loop]:
    """The fixture source and series, a state directory, and the CLI; -O0 for quick builds."""
    source = tmp_path / "source"
    write_fixture_source(source)
    series = write_fixture_series(config_copy, source)
    # The tests count what is rebuilt, not how fast: no optimisation makes each compile quick.
    set_setting(config_copy, load_matrix(config_copy), "optimization_flags", "-O0")
    bench = Bench(tmp_path / "state")
    try:
        yield Loop(config_copy, source, series, bench)
    finally:
        bench.cleanup()
