"""Before a launch: which other build processes run on this host, and what they are.

The builder flake's discipline was `pgrep -f "onnxruntime\\|nvcc"` before every build. This is
that check done properly: one pass over /proc through the monitor's classification (ninja,
make, C/C++ compilers, nvcc and its passes, linkers, and anything running as a `nixbld*` user),
each with PID, user, kind and the file it works on.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable

import psutil

from workbench.monitor import HostBuildProcess, find_host_build_processes


def own_lineage() -> set[int]:
    """This process and its ancestors: a `make` that runs workbench is not another build."""
    pids = {os.getpid()}
    try:
        process: psutil.Process | None = psutil.Process()
        while process is not None:
            pids.add(process.pid)
            process = process.parent()
    except psutil.Error:
        pass
    return pids


def other_build_processes(exclude: Iterable[int] = ()) -> list[HostBuildProcess]:
    """Build processes on this host now, leaving out our own lineage and `exclude`."""
    return find_host_build_processes(exclude=own_lineage() | set(exclude))


def counted(count: int) -> str:
    """ "1 other build process", "3 other build processes"."""
    return f"{count} other build process{'' if count == 1 else 'es'}"


# The census line `describe` writes, whose parenthesis (what runs, whose) `census_detail`
# reads back from a summary a supervisor stored.
_CENSUS_DETAIL = re.compile(r"run on this host (\(.*\))")


def census_detail(summary: str) -> str:
    """What runs and whose, of a `describe` summary line: "(1 ninja; user(s) root)"; ""."""
    found = _CENSUS_DETAIL.search(summary)
    return found.group(1) if found else ""


def describe(processes: list[HostBuildProcess], limit: int = 8) -> list[str]:
    """A summary line and one line per process (the first `limit`), for the warning."""
    if not processes:
        return []
    kinds = Counter(process.tool for process in processes)
    users = sorted({process.user for process in processes})
    summary = (
        f"{len(processes)} other build process(es) run on this host "
        f"({', '.join(f'{count} {tool}' for tool, count in kinds.most_common(6))}; "
        f"user(s) {', '.join(users)}); this build will compete with them for cores and memory"
    )
    lines = [summary]
    for process in processes[:limit]:
        what = f" {process.file}" if process.file else ""
        where = f" in {process.cwd}" if process.cwd else ""
        lines.append(
            f"  pid {process.pid} {process.tool} ({process.kind.value}, user {process.user})"
            f"{what}{where}"
        )
    if len(processes) > limit:
        lines.append(f"  ... and {len(processes) - limit} more")
    return lines
