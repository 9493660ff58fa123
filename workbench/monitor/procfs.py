"""Direct reads of Linux's /proc for the sampler's hot loop.

Why not psutil here: benchmarks/sampler_cost.py measured psutil (cached Process objects,
oneshot(), cpu_times() + memory_info() + ppid(), children(recursive=True) to find new
processes) at ~70 ms per sample for 500 processes, 7% of a core at 1 Hz and 14 times the 0.5%
budget; these direct reads take ~2.5 ms. One /proc/PID/stat read gives everything the sampler
needs each second (state, parent, CPU times of the process and of its waited-for children,
threads, start time, RSS), and a held descriptor re-reads it with one pread(). The kernel takes
~4 µs to produce a stat file but well under 1 µs for /proc/PID/schedstat, whose run time tells
whether a process ran at all since the last sample; most of a build's processes did not.
psutil is still used for the host's memory figures.

A held descriptor belongs to the process it was opened for: once that process is gone, reads
fail with ESRCH even if its PID is reused, so a reused PID can never be mistaken for the old one.
"""

from __future__ import annotations

import os
import pwd
import time
from typing import NamedTuple

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
PROC = "/proc"


class Stat(NamedTuple):
    """The fields of /proc/PID/stat the sampler uses (times in clock ticks, RSS in pages)."""

    comm: str
    state: str
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int
    threads: int
    starttime: int
    rss_pages: int
    flags: int
    """The kernel's PF_* flags: PF_FORKNOEXEC says a forked process has not exec'd yet."""


# /proc/PID/stat's flags: set by fork, cleared by exec (include/linux/sched.h).
PF_FORKNOEXEC = 0x00000040
# ... and set for a kernel thread, which never runs a program (and keeps PF_FORKNOEXEC).
PF_KTHREAD = 0x00200000
# ... and set once a process is exiting: it runs no program again (a zombie keeps it).
PF_EXITING = 0x00000004


def parse_stat(data: bytes) -> Stat | None:
    """/proc/PID/stat's bytes as a Stat; None if they are not in the kernel's format."""
    # comm may hold spaces and parentheses: it runs from the first "(" to the last ")".
    open_at = data.find(b"(")
    close_at = data.rfind(b")")
    if open_at < 0 or close_at < open_at:
        return None
    fields = data[close_at + 2 :].split(b" ", 22)
    if len(fields) < 22:
        return None
    try:
        return Stat(
            data[open_at + 1 : close_at].decode("utf-8", "replace"),
            fields[0].decode("ascii", "replace"),
            int(fields[1]),
            int(fields[11]),
            int(fields[12]),
            int(fields[13]),
            int(fields[14]),
            int(fields[17]),
            int(fields[19]),
            int(fields[21]),
            int(fields[6]),
        )
    except ValueError:
        return None


def list_pids() -> dict[int, int]:
    """Every visible PID with the inode of its /proc directory.

    The inode comes free with the directory listing and changes when a PID is reused (the
    kernel makes a new /proc/PID inode for the new process), so a cached "not ours" verdict
    can be checked without reading the process again.
    """
    result: dict[int, int] = {}
    with os.scandir(PROC) as entries:
        for entry in entries:
            name = entry.name
            if name.isdigit():
                result[int(name)] = entry.inode()
    return result


class PidScanner:
    """Lists /proc each sample and says which PIDs may be processes not judged before.

    A PID is worth a look if it was not listed last time, or if the kernel handed it out
    again since: a process that was "not ours" may have ended and its PID gone to a new
    build process within one interval (pid_max is often 32768). The kernel's last allocated
    PID (/proc/sys/kernel/ns_last_pid) tells which PIDs it handed out since the last scan,
    so one listdir() and a few set operations find both, with no per-PID work in Python.
    Where that file is missing (kernels without CONFIG_CHECKPOINT_RESTORE), the inode of
    each /proc/PID directory, which the kernel renews for a new process, tells instead.
    """

    def __init__(self) -> None:
        self._names: set[str] = set()
        self._inodes: dict[int, int] = {}
        self._last: int | None = None
        self._last_fd = _open_path(f"{PROC}/sys/kernel/ns_last_pid")
        self._pid_max = _read_int(f"{PROC}/sys/kernel/pid_max") or 4194304

    def scan(self) -> tuple[set[str], set[int]]:
        """(every /proc entry name now, PIDs that may be new processes since the last scan)."""
        if self._last_fd is None:
            return self._scan_inodes()
        last = self._read_last()
        names = set(os.listdir(PROC))
        fresh = names - self._names
        candidates = {int(name) for name in fresh if name.isdigit()}
        previous = self._last
        if previous is not None and last is not None and last != previous:
            handed_out = (last - previous) % self._pid_max
            if handed_out * 4 > len(names):
                # Many PIDs handed out: test the listed ones rather than the range.
                for name in names:
                    if name.isdigit() and _within(int(name), previous, last):
                        candidates.add(int(name))
            else:
                for offset in range(1, handed_out + 1):
                    pid = (previous + offset) % self._pid_max
                    if str(pid) in names:
                        candidates.add(pid)
        self._names, self._last = names, last
        return names, candidates

    def _read_last(self) -> int | None:
        assert self._last_fd is not None
        data = read_fd(self._last_fd)
        try:
            return int(data) if data else None
        except ValueError:
            return None

    def _scan_inodes(self) -> tuple[set[str], set[int]]:
        names: set[str] = set()
        inodes: dict[int, int] = {}
        candidates: set[int] = set()
        old = self._inodes
        with os.scandir(PROC) as entries:
            for entry in entries:
                name = entry.name
                names.add(name)
                if name.isdigit():
                    pid, inode = int(name), entry.inode()
                    inodes[pid] = inode
                    if old.get(pid) != inode:
                        candidates.add(pid)
        self._names, self._inodes = names, inodes
        return names, candidates

    def close(self) -> None:
        """Close the descriptor on ns_last_pid."""
        if self._last_fd is not None:
            os.close(self._last_fd)
            self._last_fd = None


def _within(pid: int, previous: int, last: int) -> bool:
    """Whether the kernel handed `pid` out after `previous`, up to `last` (wrapping)."""
    if previous < last:
        return previous < pid <= last
    return pid > previous or pid <= last


def _open_path(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return None


def open_file(pid: int, name: str) -> int | None:
    """An open descriptor on /proc/PID/NAME, or None if the process is gone or hidden."""
    try:
        return os.open(f"{PROC}/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def open_stat(pid: int) -> int | None:
    """An open descriptor on /proc/PID/stat, or None if the process is gone or hidden."""
    return open_file(pid, "stat")


def read_fd(fd: int) -> bytes | None:
    """The current contents behind a held /proc descriptor; None once the process is gone."""
    try:
        data = os.pread(fd, 1024, 0)
    except OSError:
        return None
    return data or None


def read_stat(pid: int) -> tuple[bytes, Stat] | None:
    """Read /proc/PID/stat once, without keeping a descriptor."""
    fd = open_stat(pid)
    if fd is None:
        return None
    try:
        data = read_fd(fd)
    finally:
        os.close(fd)
    if data is None:
        return None
    stat = parse_stat(data)
    return None if stat is None else (data, stat)


def read_cmdline(pid: int) -> list[str]:
    """argv of a process; [] for a zombie, a kernel thread or one that is gone."""
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    if not data:
        return []
    if data.endswith(b"\0"):
        data = data[:-1]
    return [part.decode("utf-8", "replace") for part in data.split(b"\0")]


def read_environ(pid: int, names: tuple[str, ...]) -> dict[str, str]:
    """The given variables of a process's environment (as it was at exec); {} if unreadable."""
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as handle:
            data = handle.read()
    except OSError:
        return {}
    wanted = {name.encode(): name for name in names}
    found: dict[str, str] = {}
    for item in data.split(b"\0"):
        key, equals, value = item.partition(b"=")
        if equals and key in wanted:
            found[wanted[key]] = value.decode("utf-8", "replace")
    return found


def read_cwd(pid: int) -> str | None:
    """The working directory of a process, None if it cannot be read."""
    try:
        return os.readlink(f"{PROC}/{pid}/cwd")
    except OSError:
        return None


def uid_of(pid: int) -> int | None:
    """The real user id a process runs as (the owner of /proc/PID), None if gone."""
    try:
        return os.stat(f"{PROC}/{pid}").st_uid
    except OSError:
        return None


def raise_open_file_limit(wanted: int = 65536) -> int:
    """Raise this process's soft limit on open files towards `wanted` (never past the hard
    limit); returns the new soft limit.

    The sampler keeps two descriptors per build process and leaves itself half the soft limit;
    Debian's default soft limit of 1024 covers about 220 processes. A supervisor calls this
    once at start-up; processes it starts inherit the raised limit, so set theirs back with
    `preexec_fn`/`process_group` setup if that matters.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


_USER_NAMES: dict[int, str] = {}


def user_name(uid: int) -> str:
    """The name of a user id, or the number as text; cached (the user list rarely changes)."""
    name = _USER_NAMES.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        _USER_NAMES[uid] = name
    return name


def boot_time() -> float:
    """Epoch seconds when the machine booted: process start times count from it.

    From CLOCK_BOOTTIME, the clock the kernel counts start times on, rather than /proc/stat's
    btime: btime is whole seconds, which would put a process's start up to a second early.
    """
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    try:
        with open(f"{PROC}/stat", "rb") as handle:
            for line in handle:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    import psutil  # only where /proc/stat is unreadable

    return psutil.boot_time()
