"""What a stop signals: every process of the build (its cgroup, else group, session, marker)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workbench.supervision import tree

if TYPE_CHECKING:
    from workbench.history.records import BuildRecord
    from workbench.monitor import Sample


def daemon_members(last_sample: Sample | None) -> list[tree.Member]:
    """Processes the sampler attributed to the build that are not our descendants."""
    if last_sample is None:
        return []
    return [
        tree.Member(p.pid, p.started, p.tool)
        for p in last_sample.processes
        if p.derivation is not None
    ]


def collect(
    cgroup: Path | None,
    record: BuildRecord,
    root: tree.Member | None,
    pgid: int | None,
    last_sample: Sample | None,
) -> dict[int, tree.Member]:
    if cgroup is not None and not record.nix:
        # Its cgroup holds every process of the build, whatever it did: the scans of
        # every process on the host (group, session, marker) would find nothing more.
        # A daemon's builders are not in it: a Nix build takes the long way.
        return tree.in_cgroup(cgroup)
    return tree.collect(
        root,
        pgid,
        daemon_members(last_sample),
        subreaper=True,
        marker=record.log_path,
        cgroup=cgroup,
    )
