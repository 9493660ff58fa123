"""The logs tests drive the real CLI: the supervision tests' bench (state dir + cleanup)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from supervision.supervised import Bench


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """The CLI against a private state directory; every process it started dies at the end."""
    bench = Bench(tmp_path / "state")
    try:
        yield bench
    finally:
        bench.cleanup()
