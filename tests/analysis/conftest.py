"""The benchmarks' own modules (benchmarks/eta_accuracy.py, eta_recordings.py), imported as the
tests of what they score need them: benchmarks/ is put on the path for the test only."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def benchmark_module() -> Iterator[Callable[[str], ModuleType]]:
    """`benchmark_module("eta_accuracy")`: the module, with benchmarks/ on the path meanwhile."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture
def accuracy(benchmark_module: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_module("eta_accuracy")


@pytest.fixture
def recordings_module(
    benchmark_module: Callable[[str], ModuleType],
) -> tuple[ModuleType, ModuleType]:
    return benchmark_module("eta_recordings"), benchmark_module("eta_accuracy")


@pytest.fixture
def source_size_modules(
    benchmark_module: Callable[[str], ModuleType],
) -> tuple[ModuleType, ModuleType]:
    return benchmark_module("eta_accuracy"), benchmark_module("eta_recordings")
