"""What a memory cgroup's OOM killer did to a build, said with the numbers.

The cgroup that counts is the one with the tightest memory limit above the build's process
(`monitor.memory.MemoryProbe`); for a Nix build through a nix-daemon, whose builders are the
daemon's children and inherit its cgroups, the daemon's (`nix_daemon_pid` finds the daemon
listening on the client's socket). Its kill counter is
`oom_kill` in `memory.oom_control` (cgroup v1, Linux 4.13+) or in `memory.events` (v2); a rise
between the build's start and its end means the kernel killed processes of the build for
memory, which is then said as "killed (OOM) while compiling X; N jobs x Y GiB peak = T GiB > the
Z GiB limit of memory cgroup ...".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
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


_DEFAULT_STATE_DIR = "/nix/var/nix"
_LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags: a listening socket


def nix_daemon_socket(environ: Mapping[str, str]) -> str | None:
    """The daemon socket a Nix client with this environment builds through; None when it builds
    in-process. NIX_REMOTE=daemon or unix://PATH say so; unset or empty is Nix's "auto": the
    client's own store when it may read and write the state directory (root on a single-user
    install, even before its first command made `db/` there), else the daemon where its socket
    exists. As Nix 2.8 (Debian's nix-bin) decides it: src/libstore/store-api.cc,
    `getStoreType`, `access(stateDir, R_OK | W_OK)`; 2.2x's `resolveStoreConfig` keeps that
    order. (Later releases that try the daemon first when its socket exists are not modelled.)"""
    state = environ.get("NIX_STATE_DIR") or _DEFAULT_STATE_DIR
    default = environ.get("NIX_DAEMON_SOCKET_PATH") or f"{state}/daemon-socket/socket"
    remote = environ.get("NIX_REMOTE", "")
    if remote == "daemon":
        return default
    if remote.startswith("unix://"):
        return remote[len("unix://") :].partition("?")[0] or default
    if remote == "" and not os.access(state, os.R_OK | os.W_OK) and os.path.exists(default):
        return default
    return None


def nix_daemon_pid(environ: Mapping[str, str], proc: str = "/proc") -> int | None:
    """The nix-daemon listening on the socket this environment's Nix client uses (None: none,
    or not one to be told apart). The socket's inode is matched with the processes' open files
    where they can be read (root); else the one nix-daemon whose parent is not one."""
    socket = nix_daemon_socket(environ)
    if socket is None:
        return None
    inodes: set[str] = set()
    try:
        with open(os.path.join(proc, "net", "unix")) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if len(fields) >= 8 and fields[7] == socket and int(fields[3], 16) & _LISTENING:
                    inodes.add(f"socket:[{fields[6]}]")
    except (OSError, ValueError):
        pass
    daemons = _nix_daemons(proc)
    for pid in daemons:
        try:
            descriptors = os.listdir(os.path.join(proc, str(pid), "fd"))
            for descriptor in descriptors:
                if os.readlink(os.path.join(proc, str(pid), "fd", descriptor)) in inodes:
                    return pid
        except OSError:
            continue
    listeners = [pid for pid, parent in daemons.items() if parent not in daemons]
    return listeners[0] if len(listeners) == 1 else None


def _nix_daemons(proc: str) -> dict[int, int]:
    """nix-daemon processes: pid -> parent pid."""
    found: dict[int, int] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "stat")) as handle:
                stat = handle.read()
        except OSError:
            continue
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        if name == "nix-daemon":
            found[int(entry)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    return found


def build_cgroup(nix: bool, environ: Mapping[str, str]) -> CgroupMemory | None:
    """The limiting memory cgroup of a build this process starts: a Nix build through a daemon
    runs in the daemon's cgroups, anything else in this process's."""
    daemon = nix_daemon_pid(environ) if nix else None
    return limiting_cgroup(daemon)


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
