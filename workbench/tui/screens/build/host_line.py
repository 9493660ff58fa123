"""The build screen's line about the rest of the host, in as many words as its width holds.

At 160 columns it is the line `attach` and `status` print (`follow.contention_text`). At 80 it
was cut to "1 other build pro…": the count of other builds, what the line is read for, lost its
noun. Shorter forms drop the secondary words first (where: the cores are this host's; the mean;
"processes" of "other processes"), so every form is a whole sentence.
"""

from __future__ import annotations

from workbench.planning.preflight import counted
from workbench.progress.live_view import LiveView
from workbench.progress.visible import visible
from workbench.reading.follow import contention_text


def host_forms(live: LiveView) -> tuple[str, ...]:
    """The line about the other load on this host, longest first (the first is
    `contention_text`'s); () when the supervisor measured none."""
    full = contention_text(live)
    other = live.other
    if not full or other is None:
        return ()
    builds = counted(other.build_processes) if other.build_processes else ""
    if other.samples:
        now, mean = f"{other.cpu_cores:.1f}", f"{other.mean_cpu_cores:.1f}"
        cpu = [
            f"other processes use {now} of {live.cpus} cores (mean {mean})",
            f"other processes use {now} of {live.cpus} cores",
            f"others use {now} of {live.cpus} cores",
        ]
    else:
        cpu = [""]
    forms = [full] + ["; ".join(part for part in (use, builds) if part) for use in cpu]
    return tuple(visible(form) for form in dict.fromkeys(form for form in forms if form))
