"""A cgroup of the build's own, so that nothing it starts can slip away unseen.

A process can leave the build's process group and session (setsid), drop the build's marker
from its environment (`env -i`) and, once the supervisor is gone, be re-parented to init: then
no walk of the process tree finds it. Cgroup membership is inherited by every fork and cannot be
left without write access to the hierarchy, so where the supervisor can make a cgroup (as root,
or in a delegated cgroup v2 subtree) the build runs in one, and `cgroup.procs` lists every
process of it, whatever it did.

The cgroup is made below the supervisor's own, in the unified (v2) hierarchy or else the v1
`pids` or `freezer` one: only for membership, with no controller enabled and no limit, so the
build's memory and CPU accounting stay where they were. Its path is kept in `builds/N/cgroup`
(0600) for the CLI (`stop`, a lost build's leftovers). It is removed once empty. Where none can
be made, the build runs as before and leftovers are found by group, session, marker and the
subreaper alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from workbench.history import private_state
from workbench.monitor.memory import cgroup_directory, cgroup_mounts

RECORD_NAME = "cgroup"
PREFIX = "workbench-"
# v1 hierarchies tried, in order, where there is no unified one to use.
_V1_CONTROLLERS = ("pids", "freezer")
_CGROUP_ROOT = "/sys/fs/cgroup"
ABANDONED_AFTER_S = 60.0


def _name(log_path: Path) -> str:
    digest = hashlib.sha256(str(log_path).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{PREFIX}{os.geteuid()}-{digest[:16]}"


def _parents() -> list[Path]:
    """The supervisor's own cgroups that a child cgroup could go below, best first."""
    try:
        cgroups = Path("/proc/self/cgroup").read_text()
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    found: list[Path] = []
    for controller in _V1_CONTROLLERS:
        v2, v1 = cgroup_mounts(mountinfo, controller)
        for line in cgroups.splitlines():
            hierarchy, _, rest = line.partition(":")
            controllers, _, path = rest.partition(":")
            if hierarchy == "0" and controllers == "" and v2 is not None:
                mount = v2
            elif controller in controllers.split(",") and v1 is not None:
                mount = v1
            else:
                continue
            directory, relative = cgroup_directory(mount, path)
            parent = Path(directory, relative.strip("/"))
            if parent not in found:
                found.append(parent)
    # The unified hierarchy first (the same for every controller asked).
    return sorted(found, key=lambda parent: not (parent / "cgroup.controllers").exists())


def create(log_path: Path) -> tuple[Path | None, str]:
    """Make the build's cgroup and record it beside the log: (its directory, "") or (None, why)."""
    reasons: list[str] = []
    for parent in _parents():
        _remove_abandoned(parent)
        directory = parent / _name(log_path)
        try:
            directory.mkdir(exist_ok=True)
        except OSError as error:
            reasons.append(f"{parent}: {error.strerror}")
            continue
        try:
            fd = private_state.open_private(
                log_path.with_name(RECORD_NAME), os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            )
            try:
                os.write(fd, str(directory).encode())
            finally:
                os.close(fd)
        except OSError as error:
            with contextlib.suppress(OSError):
                directory.rmdir()
            return None, f"cannot record it: {error.strerror}"
        return directory, ""
    return None, "; ".join(reasons) or "no cgroup hierarchy found"


def _remove_abandoned(parent: Path) -> None:
    """Empty cgroups of this user's earlier builds whose supervisor was killed before it could
    remove them (nothing else would: `status` removes a lost build's only when it looks). Only
    those a minute old: a supervisor starting now has an empty one until its build starts."""
    now = time.time()
    for directory in parent.glob(f"{PREFIX}{os.geteuid()}-*"):
        with contextlib.suppress(OSError):
            if now - directory.stat().st_ctime > ABANDONED_AFTER_S:
                directory.rmdir()  # refused (EBUSY) while any process is in it


@contextlib.contextmanager
def entered(directory: Path) -> Iterator[bool]:
    """The calling process inside the build's cgroup for the block (whether it got in).

    The supervisor starts the build within this block, so the build is in its cgroup from its
    first instruction: nothing it forks is ever outside. (A preexec_fn in the child would do
    the same, but it makes subprocess fork instead of vfork: 5 ms more per build, measured.)
    The supervisor goes back to its own cgroup, the parent, right after.
    """
    try:
        (directory / "cgroup.procs").write_text("0")
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            (directory.parent / "cgroup.procs").write_text("0")


def recorded(log_path: Path) -> Path | None:
    """The build's cgroup as recorded beside its log, if it is one of ours and still there."""
    try:
        text = log_path.with_name(RECORD_NAME).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    directory = Path(text)
    # Never trust the file beyond what the workbench writes there: a cgroup of this build.
    if not text.startswith(_CGROUP_ROOT + "/") or directory.name != _name(log_path):
        return None
    if ".." in directory.parts or not (directory / "cgroup.procs").is_file():
        return None
    return directory


def members(directory: Path | None) -> list[int]:
    """PIDs in the build's cgroup and any cgroup below it (all of its processes, wherever they
    went: a build that runs a workbench build of its own has that one's cgroup nested in it)."""
    if directory is None:
        return []
    found: list[int] = []
    for folder, _subfolders, _files in os.walk(directory):
        try:
            text = Path(folder, "cgroup.procs").read_text()
        except OSError:
            continue
        found += [int(line) for line in text.split() if line.isdigit()]
    return found


def remove(directory: Path | None, log_path: Path) -> bool:
    """Remove the build's cgroup once it is empty (and its record); whether it is gone."""
    if directory is None:
        return True
    try:
        directory.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        return False  # processes still in it (EBUSY): kept for `stop`
    with contextlib.suppress(OSError):
        log_path.with_name(RECORD_NAME).unlink()
    return True
