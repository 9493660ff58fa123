"""Live measurement of a build's processes: what runs, what it compiles, CPU and memory.

`Sampler.sample()` (call it at 1 Hz) returns a `Sample`: a `BuildSample` for the whole build and
a `ProcessSample` per process (`workbench.analysis.build_peaks` folds samples into a build's
measurements). `classify` names a process's kind and file; `discovery` finds build processes,
also under a nix-daemon. Linux only (reads /proc). Nothing here imports Textual.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.monitor.classification import Classification, ProcessKind, classify
    from workbench.monitor.discovery import HostBuildProcess, find_host_build_processes
    from workbench.monitor.memory import MemoryProbe, MemoryState
    from workbench.monitor.sampler import BuildSample, ProcessSample, Sample, Sampler

# Each name's module, imported on first use (PEP 562): importing one of them (the CLI's preflight
# needs only discovery) no longer imports them all, which every build's start paid for.
_MODULE_OF = {
    "Classification": "classification",
    "ProcessKind": "classification",
    "classify": "classification",
    "HostBuildProcess": "discovery",
    "find_host_build_processes": "discovery",
    "MemoryProbe": "memory",
    "MemoryState": "memory",
    "BuildSample": "sampler",
    "ProcessSample": "sampler",
    "Sample": "sampler",
    "Sampler": "sampler",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next use is a plain lookup
    return value


__all__ = [
    "BuildSample",
    "Classification",
    "HostBuildProcess",
    "MemoryProbe",
    "MemoryState",
    "ProcessKind",
    "ProcessSample",
    "Sample",
    "Sampler",
    "classify",
    "find_host_build_processes",
]
