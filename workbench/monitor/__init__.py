"""Live measurement of a build's processes: what runs, what it compiles, CPU and memory.

`Sampler.sample()` (call it at 1 Hz) returns a `Sample`: a `BuildSample` for the whole build and
a `ProcessSample` per process; `PeakTracker` folds samples into a `BuildSummary`. `classify`
names a process's kind and file; `discovery` finds build processes, also under a nix-daemon.
Linux only (reads /proc). Nothing here imports Textual.
"""

from workbench.monitor.classification import Classification, ProcessKind, classify
from workbench.monitor.discovery import HostBuildProcess, find_host_build_processes
from workbench.monitor.memory import MemoryProbe, MemoryState
from workbench.monitor.peaks import BuildSummary, JobRecord, PeakTracker, oom_note
from workbench.monitor.sampler import BuildSample, ProcessSample, Sample, Sampler

__all__ = [
    "BuildSample",
    "BuildSummary",
    "Classification",
    "HostBuildProcess",
    "JobRecord",
    "MemoryProbe",
    "MemoryState",
    "PeakTracker",
    "ProcessKind",
    "ProcessSample",
    "Sample",
    "Sampler",
    "classify",
    "find_host_build_processes",
    "oom_note",
]
