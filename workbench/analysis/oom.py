"""What a memory cgroup's OOM killer did to a build, said with the numbers.

The cgroup that counts is the one with the tightest memory limit above the build's process
(`monitor.memory.MemoryProbe`; for a Nix daemon's builders, the daemon's). Its kill counter is
`oom_kill` in `memory.oom_control` (cgroup v1, Linux 4.13+) or in `memory.events` (v2); a rise
between the build's start and its end means the kernel killed processes of the build for
memory, which is then said as "killed (OOM) while compiling X; N jobs x Y GiB peak = T GiB > the
Z GiB limit of memory cgroup ...".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.host.units import GIB
from workbench.monitor.memory import MemoryProbe


@dataclass(frozen=True)
class CgroupMemory:
    """The build's limiting memory cgroup."""

    directory: str
    version: int
    limit: int


def limiting_cgroup(pid: int | None = None) -> CgroupMemory | None:
    """The memory cgroup with the tightest limit above `pid` (default: this process)."""
    found = MemoryProbe(pid).cgroup
    if found is None:
        return None
    directory, version, limit = found
    return CgroupMemory(directory, version, limit)


def oom_kills(cgroup: CgroupMemory) -> int | None:
    """The cgroup's OOM kill counter, None when it cannot be read."""
    name = "memory.oom_control" if cgroup.version == 1 else "memory.events"
    try:
        with open(os.path.join(cgroup.directory, name)) as handle:
            for line in handle:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def oom_note(
    killed: int, files: Sequence[str], jobs: int, peak_job_bytes: int, cgroup: CgroupMemory
) -> str:
    """ "killed (OOM) while compiling a.cc, b.cc; 4 jobs x 0.52 GiB peak = 2.08 GiB > the 1.40 GiB
    limit of memory cgroup ..." (sizes divided by 1024³, so GiB)."""
    shown = ", ".join(os.path.basename(f) for f in files[:4])
    if len(files) > 4:
        shown += f" and {len(files) - 4} more"
    what = f" while compiling {shown}" if shown else ""
    total = jobs * peak_job_bytes
    relation = ">" if total > cgroup.limit else "near"
    return (
        f"killed (OOM){what}; {jobs} jobs x {peak_job_bytes / GIB:.2f} GiB peak = "
        f"{total / GIB:.2f} GiB {relation} the {cgroup.limit / GIB:.2f} GiB limit of memory cgroup "
        f"{cgroup.directory} (v{cgroup.version}); the OOM killer killed {killed} process(es)"
    )
