"""How much memory a build may still use: the host's available memory or its cgroup's room.

A build in a container or a systemd slice is OOM-killed at its cgroup's limit long before the
host runs out, so the lower of the two counts. cgroup v2 (`memory.max`, `memory.current`) and
v1 (`memory.limit_in_bytes`, `memory.usage_in_bytes`) are both read; every ancestor's limit
applies, so the tightest one on the way to the root wins. Page cache is reclaimed before an OOM
kill, so the cgroup's inactive file pages count as free (as the kubelet's "working set" does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit number.
_V1_UNLIMITED = 1 << 62


@dataclass(frozen=True, slots=True)
class MemoryState:
    """Memory the build can use now, in bytes."""

    available: int
    """min(host available, tightest cgroup limit − its working set)."""
    total: int
    """min(host RAM, tightest cgroup limit)."""
    cgroup_limit: int | None
    """The tightest cgroup memory limit, None when no cgroup limits the build."""


@dataclass(frozen=True, slots=True)
class _Cgroup:
    directory: str
    version: int
    limit: int


_Mount = tuple[str, str]  # (root of the mount inside the hierarchy, mount point)


def cgroup_mounts(
    mountinfo: str, controller: str = "memory"
) -> tuple[_Mount | None, _Mount | None]:
    """(cgroup v2 mount, cgroup v1 mount of `controller`) from /proc/self/mountinfo."""
    v2 = v1 = None
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        parts, kind = left.split(), right.split()
        if len(parts) < 5 or len(kind) < 3:
            continue
        if kind[0] == "cgroup2" and v2 is None:
            v2 = (parts[3], parts[4])
        elif kind[0] == "cgroup" and controller in kind[2].split(",") and v1 is None:
            v1 = (parts[3], parts[4])
    return v2, v1


def cgroup_directory(mount: _Mount, path: str, root: str = "/") -> tuple[str, str]:
    """(mount directory, path below it) for a cgroup path; a container's mount may start deeper."""
    mount_root, mount_point = mount
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        path = path[len(mount_root) :]
    return os.path.join(root, mount_point.lstrip("/")), path


def _read_int(path: str) -> int | None:
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _tightest(mount: str, relative: str, limit_file: str, version: int) -> _Cgroup | None:
    """The cgroup with the lowest limit from `relative` up to the mount's root."""
    best: _Cgroup | None = None
    relative = relative.strip("/")
    while True:
        directory = os.path.join(mount, relative) if relative else mount
        limit = _read_int(os.path.join(directory, limit_file))
        if limit is not None and limit < _V1_UNLIMITED and (best is None or limit < best.limit):
            best = _Cgroup(directory, version, limit)
        if not relative:
            return best
        relative = relative.rpartition("/")[0]


def find_cgroup_limit(
    cgroup_text: str, mountinfo_text: str, root: str = "/"
) -> tuple[str, int, int] | None:
    """(directory, version, limit) of the tightest memory limit, else None.

    `cgroup_text` is /proc/PID/cgroup, `mountinfo_text` /proc/self/mountinfo; `root` prefixes
    the mount points (tests point it at a directory tree standing in for /sys/fs/cgroup).
    """
    v2_mount, v1_mount = cgroup_mounts(mountinfo_text)
    found: list[_Cgroup] = []
    for line in cgroup_text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "" and v2_mount is not None:
            group = _tightest(*cgroup_directory(v2_mount, path, root), "memory.max", 2)
        elif "memory" in controllers.split(",") and v1_mount is not None:
            group = _tightest(*cgroup_directory(v1_mount, path, root), "memory.limit_in_bytes", 1)
        else:
            continue
        if group is not None:
            found.append(group)
    if not found:
        return None
    best = min(found, key=lambda group: group.limit)
    return best.directory, best.version, best.limit


def host_memory(meminfo: str = "/proc/meminfo") -> tuple[int, int]:
    """(available, total) bytes of the host: MemAvailable and MemTotal, as psutil reads them.

    Read here so that the sampler runs without psutil (shipped to a build host that lacks it);
    psutil only where the file is unreadable or too old to say MemAvailable (kernel < 3.14).
    """
    found: dict[str, int] = {}
    try:
        with open(meminfo) as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                if key in ("MemAvailable", "MemTotal"):
                    found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        found.clear()
    if len(found) == 2:
        return found["MemAvailable"], found["MemTotal"]
    import psutil

    host = psutil.virtual_memory()
    return host.available, host.total


class MemoryProbe:
    """Reads the memory a build may use; finds its cgroup once, reads two small files a sample."""

    def __init__(self, pid: int | None = None, root: str = "/") -> None:
        """`pid`: a process of the build (its cgroup is the one that counts); default: this one."""
        self.cgroup: tuple[str, int, int] | None = None
        proc = os.path.join(root, "proc")
        try:
            with open(os.path.join(proc, str(pid or os.getpid()), "cgroup")) as handle:
                cgroup_text = handle.read()
            with open(os.path.join(proc, "self", "mountinfo")) as handle:
                mountinfo_text = handle.read()
        except OSError:
            return
        self.cgroup = find_cgroup_limit(cgroup_text, mountinfo_text, root)

    def read(self) -> MemoryState:
        """The memory available now."""
        available, total = host_memory()
        if self.cgroup is None:
            return MemoryState(available, total, None)
        directory, version, limit = self.cgroup
        usage_file, stat_key = (
            ("memory.current", "inactive_file")
            if version == 2
            else ("memory.usage_in_bytes", "total_inactive_file")
        )
        usage = _read_int(os.path.join(directory, usage_file)) or 0
        usage -= _stat_value(os.path.join(directory, "memory.stat"), stat_key)
        room = max(0, limit - max(0, usage))
        return MemoryState(min(available, room), min(total, limit), limit)


def _stat_value(path: str, key: str) -> int:
    prefix = key + " "
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith(prefix):
                    return int(line[len(prefix) :])
    except (OSError, ValueError):
        pass
    return 0
