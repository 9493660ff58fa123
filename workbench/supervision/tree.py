"""Finding and ending every process of a build: its process group, its descendants, and more.

A build's processes are not all in its process group: Nix's builders call setsid(), so do some
test runners and daemons; a daemon's builders are not even descendants (they are the daemon's
children, as `nixbld*` users). So a build's processes are found by:

- walking the tree below its root with psutil (and, in the supervisor, below the supervisor:
  it is the child subreaper, so orphans of the build are re-parented to it);
- its process group and its session (the build leads both; setpgid() leaves the session);
- the marker in their environment (`WORKBENCH_BUILD`, set to the build's log path, unique per
  build), which every descendant inherits: it finds a daemon that called setsid() and was
  re-parented to init after its supervisor died;
- the PIDs the sampler attributed to the build (a nix-daemon's builders);
- the build's own cgroup where one could be made (`build_cgroup`): it finds even a process that
  left the session, cleared its environment and was re-parented to init.

A stop sends TERM to the group and every process found; after a grace period, KILL to whatever
is left. Processes are told apart from reused PIDs by start time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from workbench.supervision import build_cgroup


@dataclass(frozen=True)
class Member:
    """A process of the build: PID and start time (psutil's create_time), against PID reuse."""

    pid: int
    started: float
    name: str


def _member(process: psutil.Process) -> Member | None:
    try:
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return Member(process.pid, process.create_time(), process.name())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def _members_where(id_of: Callable[[int], int], wanted: int) -> list[Member]:
    """Live (non-zombie) processes whose `id_of(pid)` (group or session id) is `wanted`."""
    found: list[Member] = []
    for pid in psutil.pids():
        try:
            if id_of(pid) != wanted:
                continue
            member = _member(psutil.Process(pid))
        except (OSError, psutil.Error):
            continue
        if member is not None:
            found.append(member)
    return found


def group_members(pgid: int) -> list[Member]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    return _members_where(os.getpgid, pgid)


BUILD_MARKER = "WORKBENCH_BUILD"
"""The environment variable every process of a build inherits: the build's log path."""


def session_members(sid: int) -> list[Member]:
    """Live processes of session `sid` (the build leads its own session)."""
    return _members_where(os.getsid, sid)


def marked(marker: str) -> list[Member]:
    """Live processes of this user whose environment carries the build's marker."""
    found: list[Member] = []
    me = os.geteuid()
    for process in psutil.process_iter():
        try:
            # Another user's environment cannot be read (and a build's processes are ours or,
            # under a nix-daemon, found through the sampler instead).
            if process.uids().real != me:
                continue
            if process.environ().get(BUILD_MARKER) != marker:
                continue
            member = _member(process)
        except (psutil.Error, OSError):
            continue
        if member is not None:
            found.append(member)
    return found


def descendants(pid: int) -> list[Member]:
    """Live descendants of `pid` (not itself)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    return [member for child in children if (member := _member(child)) is not None]


def collect(
    root: Member | None,
    pgid: int | None,
    extra: Iterable[Member] = (),
    subreaper: bool = False,
    marker: str | None = None,
    cgroup: Path | None = None,
) -> dict[int, Member]:
    """Every live process of the build: root, its group and session, its descendants, the
    processes carrying `marker`, those in its `cgroup`, and `extra`.

    `subreaper`: the caller is the build's child subreaper (the supervisor), so orphans of the
    build were re-parented to it: its own descendants count too.
    """
    found: dict[int, Member] = {}
    if root is not None and is_alive(root):
        found[root.pid] = root
        for member in descendants(root.pid):
            found.setdefault(member.pid, member)
    if pgid is not None and pgid > 1:
        # The build leads its session and group (start_new_session): both ids are its pid.
        for member in group_members(pgid) + session_members(pgid):
            found.setdefault(member.pid, member)
            for below in descendants(member.pid):
                found.setdefault(below.pid, below)
    if marker:
        for member in marked(marker):
            found.setdefault(member.pid, member)
            for below in descendants(member.pid):
                found.setdefault(below.pid, below)
    if subreaper:
        for member in descendants(os.getpid()):
            found.setdefault(member.pid, member)
    found.update((pid, member) for pid, member in in_cgroup(cgroup).items() if pid not in found)
    for member in extra:
        if member.pid not in found and is_alive(member):
            found[member.pid] = member
    found.pop(os.getpid(), None)
    return found


def in_cgroup(cgroup: Path | None) -> dict[int, Member]:
    """Live processes in the build's cgroup: every process of the build, whatever it did
    (group, session and environment left behind), without scanning every process of the host."""
    found: dict[int, Member] = {}
    for pid in build_cgroup.members(cgroup):
        with contextlib.suppress(psutil.Error):
            member = _member(psutil.Process(pid))
            if member is not None:
                found[pid] = member
    found.pop(os.getpid(), None)
    return found


def is_alive(member: Member) -> bool:
    """Whether this very process (same PID and start time) still runs (zombies do not)."""
    try:
        process = psutil.Process(member.pid)
        with process.oneshot():
            if abs(process.create_time() - member.started) > 0.05:
                return False
            return process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def signal_all(members: Iterable[Member], pgid: int | None, signum: int) -> list[str]:
    """Send `signum` to the group and to each member; returns what could not be signalled."""
    problems: list[str] = []
    if pgid is not None and pgid > 1:
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            problems.append(f"process group {pgid}: {exc.strerror}")
    for member in members:
        if not is_alive(member):
            continue
        try:
            os.kill(member.pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            problems.append(f"pid {member.pid} ({member.name}): {exc.strerror}")
    return problems


def terminate(
    root: Member | None,
    pgid: int | None,
    extra: Iterable[Member] = (),
    grace_s: float = 10.0,
    poll_s: float = 0.1,
    marker: str | None = None,
    cgroup: Path | None = None,
) -> list[Member]:
    """TERM the whole tree, KILL what is left after `grace_s`; returns the survivors.

    For processes that are not the caller's children (the CLI ending a build whose supervisor
    is gone). The supervisor does the same steps inside its own loop, since it must reap.
    """
    extra = list(extra)
    members = collect(root, pgid, extra, marker=marker, cgroup=cgroup)
    signal_all(members.values(), pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        # A build may start new processes while it shuts down: they get TERM too.
        now = collect(root, pgid, extra, marker=marker, cgroup=cgroup)
        new = [member for pid, member in now.items() if pid not in members]
        if new:
            signal_all(new, None, signal.SIGTERM)
            members.update({member.pid: member for member in new})
        if not any(is_alive(member) for member in members.values()) and not now:
            return []
        time.sleep(poll_s)
    members.update(collect(root, pgid, extra, marker=marker, cgroup=cgroup))
    signal_all(members.values(), pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        left = [member for member in members.values() if is_alive(member)]
        if not left:
            return []
        time.sleep(poll_s)
    return [member for member in members.values() if is_alive(member)]


def set_child_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux prctl); False if not."""
    import ctypes

    pr_set_child_subreaper = 36
    with contextlib.suppress(OSError, AttributeError):
        # CDLL(None): the symbols already loaded into Python, libc's prctl among them (no
        # find_library, which would run ldconfig in a subprocess).
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0)
    return False
