"""Fixtures of the TUI tests: the real CLI against a private state directory, the C++ fixture
project, and the app on a recorded host (no probing of this one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from supervision.supervised import Bench

from workbench.tui.app import WorkbenchApp, make_app


@pytest.fixture
def tui(config_copy: Path, bench: Bench):
    """A factory of the app on the bench's state directory and a recorded H100 host."""

    def make() -> WorkbenchApp:
        return make_app(str(config_copy), str(bench.state), doctor=recorded_doctor())

    return make
