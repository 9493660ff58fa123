"""Program counters of a process's running threads, read with ptrace: registers, not stacks.

A full stack of every thread costs gdb an unwind per thread; where each running thread is
(its program counter and stack pointer) costs a stop and one register read. Sampled a few
dozen times while gdb is still starting, this shows which code every thread spins in, so
threads can be grouped by it and each gets a verdict, however many there are.

Threads are seized (PTRACE_SEIZE: no signal is sent), interrupted one round at a time
(PTRACE_INTERRUPT), read (PTRACE_GETREGSET, NT_PRSTATUS) and continued; after the last round
each is detached, so gdb can attach next. Blocked threads are not touched: their place is the
syscall they wait in. The kernel detaches everything if this process dies part-way.

Each read also keeps a digest of all the thread's general registers and the CPU time the
thread has run (/proc/TID/schedstat, in nanoseconds): a loop caught twice at one address with
the same registers, having run in between, changed nothing the registers hold (a spin on a
flag, a call cycle), while a counting loop's registers differ. Without the CPU time two
reads could be one moment twice: on a busy machine a thread may not run between rounds.

CPU time is user and kernel time together, and only user time runs the program's own
instructions. So each read also keeps what tells kernel time apart: how many times the
thread had been switched in (schedstat's third field), at the read and when the round asked
it to stop: a thread not switched in between its read before and the ask ran nothing but the
stop itself, which is charged as its own time (2-80 µs measured under load, more with an
interrupt's work on top); the page faults the kernel handled for it (/proc/TID/stat's minflt
and majflt, exact counts); and whether the stop came at the end of a system call (x86_64's
orig_rax: the call's number, else -1). A thread that reads a file or maps memory in a loop
stands at one place with the same registers while the kernel does its work; that time is no
evidence of a loop. (The CPU time itself cannot be read at the ask: schedstat's figure for a
thread on a CPU lags until the scheduler next updates it, ticks apart or more; and
/proc/TID/stat's utime counts in clock ticks of 10 ms.)
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

PTRACE_CONT = 7
PTRACE_DETACH = 17
PTRACE_GETREGSET = 0x4204
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_LISTEN = 0x4208
PTRACE_EVENT_STOP = 128
NT_PRSTATUS = 1
WALL = 0x40000000  # __WALL: wait for threads too (they are not children)
STOP_SIGNALS = {signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU}
# Where the program counter and stack pointer sit in NT_PRSTATUS, in 64-bit words:
# x86_64's user_regs_struct (rip, rsp) and aarch64's user_pt_regs (pc, sp).
REGISTER_SLOTS = {"x86_64": (16, 19), "aarch64": (32, 31)}
# x86_64's orig_rax: the number of the system call the thread stopped at the end of, -1 when it
# entered the kernel otherwise (an interrupt, a page fault). aarch64 keeps it out of
# NT_PRSTATUS.
SYSCALL_SLOT = {"x86_64": 15}
WAIT_LIMIT_S = 0.5
LAST_WAIT_LIMIT_S = 10.0  # detaching needs the stop: worth waiting for on a loaded machine


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class RegisterRead(NamedTuple):
    """One read of a stopped thread: pc, sp, a digest of every general register, when
    (seconds on the monotonic clock) and the CPU time it had run (ns; None unknown).

    timeslices and timeslices_asked: how many times it had been switched in, at the read and
    when this round asked it to stop; faults: page faults the kernel had handled for it (minor
    and major); in_syscall: whether the stop came at the end of a system call (None where the
    registers do not say)."""

    pc: int
    sp: int
    state: int
    at: float
    ran_ns: int | None
    timeslices: int | None = None
    timeslices_asked: int | None = None
    faults: int | None = None
    in_syscall: bool | None = None


@dataclass
class PcSamples:
    """Per thread, the registers read; `problem` says why threads were not sampled."""

    rounds: int = 0
    by_thread: dict[int, list[RegisterRead]] = field(default_factory=dict)
    problem: str | None = None


def _ptrace() -> Callable[..., int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).ptrace
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_long
    return function


def _schedstat(tid: int) -> tuple[int | None, int | None]:
    """Nanoseconds the thread has run on a CPU and how many times it was switched in
    (schedstat's first and third fields); None where unreadable."""
    try:
        with open(f"/proc/{tid}/schedstat", "rb") as file:
            fields = file.read().split()
        return int(fields[0]), int(fields[2])
    except (OSError, ValueError, IndexError):
        return None, None


def _faults(tid: int) -> int | None:
    """Page faults the kernel handled for the thread: /proc/TID/stat's minflt + majflt
    (fields 10 and 12), None if unreadable."""
    try:
        with open(f"/proc/{tid}/stat", "rb") as file:
            fields = file.read().rpartition(b")")[2].split()
        # fields[0] is field 3 (state): minflt is field 10, majflt field 12.
        return int(fields[7]) + int(fields[9])
    except (OSError, ValueError, IndexError):
        return None


class PcSampler:
    """Seizes the given threads; `sample()` reads each one's pc and sp; `detach()` ends it."""

    def __init__(self, tids: list[int]) -> None:
        self.samples = PcSamples()
        self._ptrace = _ptrace()
        slots = REGISTER_SLOTS.get(os.uname().machine)
        self._slots = slots
        self._syscall_slot = SYSCALL_SLOT.get(os.uname().machine)
        # Per thread, how many times it had been switched in when the round now under way
        # asked it to stop.
        self._asked: dict[int, int | None] = {}
        self._traced: list[int] = []
        self._pending: set[int] = set()
        if self._ptrace is None or slots is None:
            self.samples.problem = f"no ptrace register layout for {os.uname().machine}"
            return
        self._buffer = (ctypes.c_uint64 * 64)()
        self._iovec = _Iovec(ctypes.addressof(self._buffer), ctypes.sizeof(self._buffer))
        for tid in tids:
            if self._call(PTRACE_SEIZE, tid, 0, 0) == 0:
                self._traced.append(tid)
                continue
            code = ctypes.get_errno()
            if code in (errno.EPERM, errno.EACCES) and self.samples.problem is None:
                self.samples.problem = f"ptrace refused ({os.strerror(code)})"

    def _call(self, request: int, tid: int, address: int, data: int | ctypes.c_void_p) -> int:
        assert self._ptrace is not None
        return int(self._ptrace(request, tid, address, data))

    @property
    def traced(self) -> list[int]:
        return list(self._traced)

    def sample(self, last: bool = False) -> bool:
        """One round: stop each traced thread, read its registers, let it go (or detach it).

        False when no thread is left to sample (they exited, or the process stopped).
        """
        stopped = []
        gone: set[int] = set()
        for tid in self._traced:
            # A thread still owing the stop of an earlier round is not interrupted again.
            if tid in self._pending:
                stopped.append(tid)
                continue
            self._asked[tid] = _schedstat(tid)[1]
            if self._call(PTRACE_INTERRUPT, tid, 0, 0) == 0:
                stopped.append(tid)
            else:
                gone.add(tid)  # ESRCH: it exited
        limit = LAST_WAIT_LIMIT_S if last else WAIT_LIMIT_S
        for tid in stopped:
            status = self._wait_stop(tid, limit)
            if status is None:
                # Not scheduled yet (many threads, few cores): still traced, its stop comes
                # later. Dropping it here would leave it traced for good (and its process
                # unreapable once killed).
                self._pending.add(tid)
                continue
            self._pending.discard(tid)
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                gone.add(tid)
                continue
            stop_signal = os.WSTOPSIG(status)
            event = status >> 16
            if event == PTRACE_EVENT_STOP and stop_signal in STOP_SIGNALS:
                # A group stop (SIGSTOP/SIGTSTP) arrived: leave the thread stopped, untraced.
                self._call(PTRACE_DETACH, tid, 0, 0)
                gone.add(tid)
                continue
            if event == PTRACE_EVENT_STOP:
                self._read(tid)
                inject = 0
            else:  # a signal was being delivered: pass it on untouched
                inject = stop_signal
            request = PTRACE_DETACH if last else PTRACE_CONT
            if self._call(request, tid, 0, inject) != 0 or last:
                gone.add(tid)
        self._traced = [tid for tid in self._traced if tid not in gone]
        self.samples.rounds += 1
        return bool(self._traced) and not last

    def _wait_stop(self, tid: int, limit: float) -> int | None:
        deadline = time.monotonic() + limit
        while True:
            try:
                found, status = os.waitpid(tid, os.WNOHANG | WALL)
            except ChildProcessError:
                return None
            if found == tid:
                return status
            if time.monotonic() > deadline:
                return None
            time.sleep(0.0002)

    def _read(self, tid: int) -> None:
        assert self._slots is not None
        self._iovec.length = ctypes.sizeof(self._buffer)
        if self._call(PTRACE_GETREGSET, tid, NT_PRSTATUS, ctypes.addressof(self._iovec)) != 0:
            return
        pc_slot, sp_slot = self._slots
        words = self._iovec.length // ctypes.sizeof(ctypes.c_uint64)
        ran_ns, timeslices = _schedstat(tid)
        read = RegisterRead(
            pc=int(self._buffer[pc_slot]),
            sp=int(self._buffer[sp_slot]),
            # Tuples of ints hash alike in every run (no hash randomisation): equal
            # registers, equal digest.
            state=hash(tuple(self._buffer[:words])) & 0xFFFF_FFFF_FFFF_FFFF,
            at=time.monotonic(),
            ran_ns=ran_ns,
            timeslices=timeslices,
            timeslices_asked=self._asked.pop(tid, None),
            faults=_faults(tid),
            in_syscall=(
                None
                if self._syscall_slot is None or words <= self._syscall_slot
                # orig_rax is -1 (all bits set) unless the thread entered by a system call.
                else self._buffer[self._syscall_slot] < 1 << 63
            ),
        )
        self.samples.by_thread.setdefault(tid, []).append(read)

    def detach(self) -> None:
        """Let every thread still traced go: interrupt, wait, detach.

        A thread that does not stop even then stays traced until this process exits (the
        kernel detaches it then); it is not forgotten silently.
        """
        if self._traced:
            with contextlib.suppress(OSError):
                self.sample(last=True)
        if self._traced and self.samples.problem is None:
            self.samples.problem = (
                f"{len(self._traced)} thread(s) did not stop to be let go within "
                f"{LAST_WAIT_LIMIT_S:g} s"
            )
