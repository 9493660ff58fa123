"""What the detectors share: thresholds, program-counter evidence, words for a thread."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from workbench.debugging.bridge import bridge_names
from workbench.debugging.cpp_names import display_name
from workbench.debugging.model import (
    Frame,
    PcHit,
    ThreadActivity,
    ThreadStack,
)

MIN_RECURSION_REPEATS = 8
MAX_CYCLE_PERIOD = 12
MAX_CYCLE_START = 16
MAX_LOOP_TOP = 4  # frames above an unchanging base in a tail-call loop
MAX_LOOP_FUNCTIONS = 8
# Program-counter samples of a thread that moves: many distinct addresses, or a stack depth
# that swings by more than this many bytes (recursion, calls in and out of deep helpers).
BUSY_DISTINCT_ADDRESSES = 48
BUSY_STACK_SPREAD = 4096
LOOP_STACK_SPREAD = 2048
# A spin is judged from program counters alone only when the thread was caught this often,
# and more than half of those reads fell on addresses it was caught at more than once.
MIN_STILL_HITS = 4
# CPU time a thread must have run between two reads for them to be two moments: each stop
# and continue costs it a few microseconds of kernel time without running a user
# instruction (2–20 µs measured here, up to 78 µs at load 15), while a thread scheduled
# between rounds runs 0.5 ms and more. Where the sampler recorded how many times the thread
# had been switched in, a thread not switched in between its read before and the round's ask
# to stop ran nothing but the stop, whatever CPU time the stop was charged.
MIN_RAN_BETWEEN_NS = 100_000


@dataclass(frozen=True)
class PcEvidence:
    """What one thread's program-counter samples show.

    places: how often each function (or `?? in LIB` where there are no symbols) was hit;
    top_level: the places hit at the outermost stack pointer seen (functions that jump to
    each other run there, callees run deeper); spread: outermost minus innermost stack
    pointer; unnamed: hits in code without symbols outside the system libraries.
    """

    hits: int
    places: Counter[str]
    samples: tuple[PcHit, ...]
    addresses: int
    top_level: frozenset[str]
    spread: int
    unnamed: tuple[PcHit, ...]

    @property
    def span(self) -> float:
        """Seconds between the first and the last read (0 where times were not recorded)."""
        times = [hit.at for hit in self.samples if hit.at is not None]
        return max(times) - min(times) if times else 0.0

    def ran_between(self) -> list[PcHit]:
        """The reads with registers taken after the thread had run its own code since its read
        before. Two reads with no CPU time between them (beyond the stop's own few
        microseconds), or with the thread not switched in before the round asked it to stop,
        are one moment read twice, as a busy machine may not schedule a thread between rounds.
        CPU time the kernel spent for the thread does not count either, as it
        runs none of the program's instructions (a file read, pages mapped, its progress out of
        the registers' sight): the read is left out when the kernel handled page faults for the
        thread since the read before, or when the stop came at the end of a system call. The
        first read counts."""
        kept: list[PcHit] = []
        before: PcHit | None = None
        for hit in self.samples:
            if hit.state is None or hit.ran_ns is None:
                continue
            if before is None or _ran_own_code(before, hit):
                kept.append(hit)
            before = hit
        return kept

    @property
    def cpu_ns(self) -> int:
        """CPU time the thread ran from its first read to its last (0 if not known)."""
        times = [hit.ran_ns for hit in self.samples if hit.ran_ns is not None]
        return max(times) - min(times) if times else 0

    @property
    def revisits(self) -> tuple[int, int, int]:
        """(reads at addresses caught more than once, how many of those addresses showed
        different registers on different reads, how many addresses were caught more than once)."""
        states: dict[int, list[int]] = {}
        for hit in self.ran_between():
            assert hit.state is not None
            states.setdefault(hit.address, []).append(hit.state)
        repeated = {address: seen for address, seen in states.items() if len(seen) >= 2}
        reads = sum(len(seen) for seen in repeated.values())
        changed = sum(1 for seen in repeated.values() if len(set(seen)) > 1)
        return reads, changed, len(repeated)

    @property
    def still(self) -> bool | None:
        """Whether the thread stood still in a tight loop: True when most reads fell on
        addresses caught more than once and, at each, every register was the same every time
        (nothing a register holds changed: no counter, no pointer moving on); False when the
        registers at one address differed (it computes); None when the reads cannot say."""
        if self.moving or self.unnamed or self.spread > LOOP_STACK_SPREAD:
            return None
        reads, changed, _addresses = self.revisits
        if changed:
            return False
        independent = len(self.ran_between())
        if independent < MIN_STILL_HITS or reads * 2 <= independent:
            return None
        return True

    @property
    def moving(self) -> bool:
        """The thread goes through much code or in and out of calls: it makes progress."""
        return (
            len(self.places) > MAX_LOOP_FUNCTIONS
            or self.addresses > BUSY_DISTINCT_ADDRESSES
            or self.spread > BUSY_STACK_SPREAD
        )


def _ran_own_code(before: PcHit, hit: PcHit) -> bool:
    """Whether the thread ran at least MIN_RAN_BETWEEN_NS between the two reads, was switched
    in before the round asked it to stop, and shows no sign that the kernel spent that time
    for it (page faults handled, a system call ended)."""
    assert before.ran_ns is not None and hit.ran_ns is not None
    if hit.ran_ns - before.ran_ns < MIN_RAN_BETWEEN_NS:
        return False
    if (
        hit.timeslices_asked is not None
        and before.timeslices is not None
        and hit.timeslices_asked <= before.timeslices
    ):
        return False
    if hit.in_syscall:
        return False
    return before.faults is None or hit.faults is None or hit.faults == before.faults


def pc_evidence(hits: tuple[PcHit, ...]) -> PcEvidence | None:
    """Summarise a thread's program-counter samples (None when there are none)."""
    if not hits:
        return None
    outermost = max(hit.sp for hit in hits)
    innermost = min(hit.sp for hit in hits)
    unnamed = tuple(
        hit
        for hit in hits
        if hit.function is None and not (hit.library and SYSTEM_LIBRARY.search(hit.library))
    )
    return PcEvidence(
        hits=len(hits),
        places=Counter(hit.place() for hit in hits),
        samples=hits,
        addresses=len({hit.address for hit in hits}),
        top_level=frozenset(hit.place() for hit in hits if hit.sp == outermost),
        spread=outermost - innermost,
        unnamed=unnamed,
    )


SYSTEM_LIBRARY = re.compile(
    r"/(libc|libpthread|libstdc\+\+|libgcc_s|libm|ld-linux[^/]*|ld64)[.-][^/]*$|/ld-[^/]*$"
)


def describe(thread: ThreadStack) -> str:
    name = f' "{thread.name}"' if thread.name else ""
    return f"thread {thread.gdb_id} (LWP {thread.tid}{name})"


def user_frame(frames: tuple[Frame, ...] | list[Frame]) -> Frame | None:
    """The innermost frame of the program itself: not libc, libstdc++, the loader or std::."""
    for frame in frames:
        name = frame.function or ""
        if not name or name.startswith(("std::", "__gnu_cxx::", "__")):
            continue
        if frame.library and SYSTEM_LIBRARY.search(frame.library):
            continue
        return frame
    return None


def where(thread: ThreadStack) -> str:
    frame = user_frame(thread.frames)
    if frame is None:
        return ""
    return f" in {short(frame.function or '??')} ({frame.location(full=False)})"


def static_name(symbol: str | None) -> str | None:
    """gdb's `guard variable for f()::x` → `f()::x`."""
    if symbol and symbol.startswith("guard variable for "):
        return symbol.removeprefix("guard variable for ")
    return symbol


def sampled_stub_callers(pc: PcEvidence | None) -> set[str]:
    """Functions whose program counters sat just above Provider_GetHost's on the stack: its
    caller, a bridge stub (the samples never catch the host method's single jump)."""
    if pc is None:
        return set()
    host_sps = [
        hit.sp for hit in pc.samples if hit.function and bridge_names.is_get_host(hit.function)
    ]
    if not host_sps:
        return set()
    inner = min(host_sps)
    return {
        hit.function
        for hit in pc.samples
        if hit.function
        and not bridge_names.is_get_host(hit.function)
        and inner < hit.sp <= inner + 64
    }


def thread_list(tids: list[int], histories: dict[int, list[ThreadStack]]) -> str:
    ids = [histories[tid][-1].gdb_id for tid in tids if tid in histories]
    shown = ", ".join(str(gdb_id) for gdb_id in sorted(ids)[:12])
    return f"threads {shown}" + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")


def user_name(history: list[ThreadStack]) -> str:
    frame = user_frame(history[-1].frames)
    return frame.function if frame and frame.function else "??"


def wrote_text(activity: ThreadActivity) -> str:
    io = activity.io
    return (
        f"wrote {io.get('wchar', 0)} bytes in {io.get('syscw', 0)} write calls and made "
        f"{io.get('syscr', 0)} read calls over {activity.io_seconds:.1f} s observed "
        "(/proc io counters)"
    )


def more_samples(taken: int) -> str:
    """Advice on sampling again, given only where more samples could still tell: after five
    or more that all saw the same, more would see the same too."""
    if taken < 5:
        return "More samples (--samples 5) show whether it ever leaves"
    return (
        f"All {taken} samples saw it there: more would not tell; whether it ends shows in its "
        "output, or in `bt` again in a while"
    )


def places(evidence: PcEvidence) -> str:
    return ", ".join(short(name) for name, _ in evidence.places.most_common(4))


def brief_stack(thread: ThreadStack) -> str:
    """A few frames around the program's own innermost frame: where it waits, in its terms."""
    frames = list(thread.frames)
    user = user_frame(frames)
    at = frames.index(user) if user else 0
    chosen = frames[max(0, at - 2) : at + 2] if user else frames[:5]
    return " ← ".join(short(frame.function or "??") for frame in chosen)


def activity_text(activity: ThreadActivity | None) -> str:
    if activity is None:
        return "no /proc observations"
    share = activity.cpu_share
    parts = [f"R in {activity.states.get('R', 0)} of {activity.observations} looks"]
    if share is not None:
        parts.append(f"{share * 100:.0f}% CPU")
    return ", ".join(parts)


def short(name: str) -> str:
    """Drop the outer namespaces and long template arguments: fits on a line."""
    return display_name(name)
