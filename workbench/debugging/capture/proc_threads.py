"""What the kernel says about a process and its threads, read from /proc without stopping it.

The debugger stops threads while it reads them, so a thread's real state (running or blocked)
and its CPU use are read here, between samples, while no debugger is attached.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

STATE_WORDS = {
    "R": "running",
    "S": "sleeping",
    "D": "uninterruptible wait",
    "T": "stopped",
    "t": "traced",
    "Z": "zombie",
    "X": "dead",
    "I": "idle",
}


@dataclass(frozen=True)
class Stat:
    """The fields of /proc/PID/stat (or a task's stat) the workbench uses."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    cpu_ticks: int


def parse_stat(text: str) -> Stat:
    """Parse a stat line; comm may hold spaces and parentheses, so split at the last ')'."""
    left, _, right = text.rpartition(")")
    pid_text, _, comm = left.partition(" (")
    fields = right.split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return Stat(
        pid=int(pid_text),
        comm=comm,
        state=fields[0],
        ppid=int(fields[1]),
        pgrp=int(fields[2]),
        cpu_ticks=int(fields[11]) + int(fields[12]),
    )


def _read_small(path: str) -> str:
    """A small /proc file's text in one open and read, without pathlib's and io's layers:
    a look at 64 threads reads 128 such files, between samples and while gdb loads."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 8192).decode(errors="replace")
    finally:
        os.close(fd)


def read_stat(pid: int, tid: int | None = None, proc: Path = PROC) -> Stat | None:
    """The process's (or one thread's) stat, or None when it is gone."""
    path = f"{proc}/{pid}/stat" if tid is None else f"{proc}/{pid}/task/{tid}/stat"
    try:
        return parse_stat(_read_small(path))
    except (OSError, ValueError, IndexError):
        return None


def read_status(pid: int | str, proc: Path = PROC) -> dict[str, str]:
    """/proc/PID/status as a dict of field → value text; empty when unreadable."""
    try:
        text = (proc / str(pid) / "status").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def read_wchan(pid: int, tid: int, proc: Path = PROC) -> str | None:
    """The kernel function a blocked thread sleeps in; None where hidden ("0") or unreadable."""
    try:
        text = _read_small(f"{proc}/{pid}/task/{tid}/wchan").strip()
    except OSError:
        return None
    return text if text and text != "0" else None


IO_FIELDS = ("rchar", "wchar", "syscr", "syscw")


def read_io(pid: int, tid: int, proc: Path = PROC) -> dict[str, int] | None:
    """A thread's /proc/PID/task/TID/io counters (bytes read and written, read and write
    calls, all kinds of file: terminals and pipes too); None where unreadable."""
    try:
        text = _read_small(f"{proc}/{pid}/task/{tid}/io")
    except OSError:
        return None
    counters: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in IO_FIELDS:
            try:
                counters[key] = int(value)
            except ValueError:
                return None
    return counters if len(counters) == len(IO_FIELDS) else None


def thread_ids(pid: int, proc: Path = PROC) -> list[int]:
    """The process's thread ids (empty when it is gone)."""
    try:
        return sorted(int(name) for name in os.listdir(proc / str(pid) / "task"))
    except (OSError, ValueError):
        return []


def command_line(pid: int, proc: Path = PROC) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def executable(pid: int, proc: Path = PROC) -> str | None:
    try:
        return os.readlink(proc / str(pid) / "exe")
    except OSError:
        return None


def exists(pid: int, proc: Path = PROC) -> bool:
    """True while the process exists and is not a zombie or dead."""
    stat = read_stat(pid, proc=proc)
    return stat is not None and stat.state not in ("Z", "X")


def stack_bytes_used(pid: int, stack_pointer: int, proc: Path = PROC) -> int | None:
    """How far the stack mapping holding `stack_pointer` is used: its end minus the pointer.

    Stacks grow down, so the distance from the mapping's top grows with the call depth.
    """
    try:
        maps = (proc / str(pid) / "maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        span = line.split(" ", 1)[0]
        start_text, _, end_text = span.partition("-")
        try:
            start, end = int(start_text, 16), int(end_text, 16)
        except ValueError:
            continue
        if start <= stack_pointer < end:
            return end - stack_pointer
    return None
