"""Reading a build back while it runs or after: its log as a person reads it, and one-line views.

The log file holds the build's output byte for byte, Nix's `@nix {json}` lines included;
`LogReader` turns it into readable lines (`name> text` for a Nix builder's line, like
`nix build -L`) with a `ProgressTracker` of its own (`feed`, then `render_line`), reading only
what was appended since the last call and holding back a partial last line until it is
complete (or the build ended).

Everything here that came from the build (log lines, file names, notes, derivation names) is
returned with its control characters made visible (`progress.visible`): these strings go straight
to terminals.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from workbench.history.records import KILLED, LOST, STOPPED, SUCCEEDED, BuildRecord
from workbench.history.store import History
from workbench.host.units import byte_size
from workbench.host.units import duration as duration  # re-exported: the views' one formatter
from workbench.progress import ProgressTracker
from workbench.progress.live_view import EtaView, LiveView, ProgressView
from workbench.progress.visible import visible
from workbench.supervision.ending import adoption_text as adoption_text  # re-exported

size = byte_size  # re-exported: the views' one formatter

_CHUNK = 1 << 20


class LogReader:
    """Incremental, readable lines of a build log."""

    def __init__(self, path: Path | str, raw: bool = False) -> None:
        """`raw`: the lines as written (Nix's @nix lines and control bytes included), each
        byte kept through the decoding (surrogateescape) for a writer that encodes alike."""
        self.path = Path(path)
        self.offset = 0
        self._pending = b""
        self._tracker = ProgressTracker()
        self.raw = raw
        self._errors = "surrogateescape" if raw else "replace"

    def _readable(self, lines: list[str]) -> list[str]:
        if self.raw:
            return lines
        tracker = self._tracker
        feed, render = tracker.feed, tracker.render_line
        shown: list[str] = []
        for line in lines:
            # Fold first: a builder's line is named after its derivation, which the tracker
            # learns from the events before it.
            feed(line)
            text = render(line)
            if text is not None:
                shown.append(text)
        return shown

    def read(self) -> list[str]:
        """Complete lines appended since the last call, readable; [] when nothing new."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(4 * _CHUNK)  # bounded: a 2 GiB backlog is read in steps
        except FileNotFoundError:
            return []
        if not data:
            return []
        self.offset += len(data)
        data = self._pending + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._pending = data
            return []
        self._pending = data[cut + 1 :]
        return self._readable(data[:cut].decode("utf-8", self._errors).split("\n"))

    def rest(self) -> list[str]:
        """The last line when it has no newline (call once the build ended)."""
        lines = self.read()
        if self._pending:
            lines += self._readable([self._pending.decode("utf-8", self._errors)])
            self._pending = b""
        return lines

    def skip_to_tail(self, count: int) -> list[str]:
        """Read everything there is now; return only the last `count` readable lines."""
        tail: deque[str] = deque(maxlen=count)
        while True:
            before = self.offset
            tail.extend(self.read())
            if self.offset == before:
                return list(tail)


def eta_text(eta: EtaView | None) -> str | None:
    """ "ETA 1m05s (50s–1m30s)": the ETA with the range it is likely in ("first build" when
    nothing earlier supports it; "50s–?" when the range has no upper end: what follows is not
    counted, the basis says what); None when the supervisor has none."""
    if eta is None:
        return None
    spread = ""
    if eta.low_s is not None:
        high = "?" if eta.high_s is None else duration(eta.high_s)
        spread = f" ({duration(eta.low_s)}–{high})"
    first = ", first build: no history" if eta.first_build else ""
    return f"ETA {duration(eta.remaining_s)}{spread}{first}"


def progress_text(progress: ProgressView) -> str:
    """Progress in words ("ninja 12/40 (30%)", "3/5 derivations, ..."); "" if the log says none."""
    return visible(_progress_words(progress))


def loss_text(record: BuildRecord) -> str:
    """What of the build's output its log lacks (a full disk), in words; "" when nothing."""
    from workbench.supervision.pipeline import describe_loss

    lost = record.progress_view.output_lost
    return describe_loss(dict(lost)) if lost else ""


def _whole_percent(done: int, total: int) -> int:
    """`done` of `total` in whole percent, cut down (integers: 29 of 100 is 29, not the 28 that
    flooring 100 * 0.29 in floats gives)."""
    return 100 * done // total if total > 0 else 0


def _progress_words(progress: ProgressView) -> str:
    parts: list[str] = []
    if progress.nix and progress.planned:
        failed = f", {progress.failed} failed" if progress.failed else ""
        parts.append(f"{progress.done}/{progress.planned} derivations{failed}")
        for derivation in progress.derivations[:2]:
            step = derivation.step
            inner = f" {step.tool} {step.done}/{step.total}" if step else ""
            phase = f" {derivation.phase}" if derivation.phase else ""
            parts.append(f"{derivation.name}{phase}{inner}")
    elif progress.step is not None:
        step = progress.step
        # Cut down, never rounded up: 299 of 300 is 99%, not 100% with an edge still running
        # (and the bar beside it says the same).
        parts.append(
            f"{step.tool} {step.done}/{step.total} ({_whole_percent(step.done, step.total)}%)"
        )
    elif progress.nothing_to_do:
        parts.append("ninja: no work to do")
    return ", ".join(parts)


def responding_text(record: BuildRecord, now: float | None = None) -> str:
    """ "not responding: no report for 40s (its supervisor, pid 12, is stopped)" for a running
    build whose supervisor has been silent for REPORT_STALE_S or more; "" otherwise."""
    if record.responding(now):
        return ""
    silent = record.silent_s(now) or 0.0
    why = ""
    if record.supervisor_pid is not None:
        import psutil

        try:
            state = psutil.Process(record.supervisor_pid).status()
        except psutil.Error:
            state = None
        if state in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
            why = f" (its supervisor, pid {record.supervisor_pid}, is stopped)"
        elif state is not None:
            why = f" (its supervisor, pid {record.supervisor_pid}, is busy or starved)"
    return f"not responding: no report for {duration(silent)}{why}; figures as last reported"


def running_text(live: LiveView, limit: int = 3) -> str:
    """ "compiling a.cc, b.cc (+2)": what the sampler saw the build work on at its latest sample;
    "" when it saw nothing."""
    if not live.running:
        return ""
    names = [os.path.basename(edge.what) or edge.what for edge in live.running]
    more = f" (+{len(names) - limit})" if len(names) > limit else ""
    return "running: " + ", ".join(names[:limit]) + more


def peak_text(live: LiveView) -> str:
    """ "peak 1.08 GiB": the build's own peak RSS since it started; "" before any sample."""
    return f"peak {size(live.peak.rss)}" if live.sampled and live.peak.rss else ""


def contention_text(live: LiveView) -> str:
    """ "others on host: 3.1 cores now, 2.4 mean; 10 other build processes" ; "" when none."""
    other = live.other
    if other is None:
        return ""
    parts = []
    if other.samples:
        parts.append(
            f"other processes use {other.cpu_cores:.1f} of {live.cpus} cores "
            f"(mean {other.mean_cpu_cores:.1f})"
        )
    if other.build_processes:
        from workbench.planning.preflight import counted

        parts.append(f"{counted(other.build_processes)} on this host")
    return "; ".join(parts)


# What a status line narrower than its parts keeps first (lower first): the build and its state,
# a supervisor's silence, progress, the ETA, what was lost or adopted, the build's peak, what
# compiles now, then CPU, memory and the other builds. A part is kept whole or left out: a
# figure cut off ("CPU 1.9" of "CPU 1.9/2 cores", "peak 1…") says something else.
_HEAD, _SILENT, _PROGRESS, _ETA, _LOST, _ADOPTED, _PEAK, _RUNNING, _CPU, _RSS, _OTHERS = range(11)


def status_line(record: BuildRecord, now: float | None = None, width: int | None = None) -> str:
    """One line for a running build: progress, ETA, CPU, memory, what compiles; for one whose
    supervisor does not respond, what it last reported, and never an ETA. `width`: at most
    this many characters (a terminal's line): the parts that matter least are left out whole
    (`_HEAD` ... `_OTHERS`), never cut."""
    now = time.time() if now is None else now
    live = record.live_view
    parts: list[tuple[int, str]] = [
        (_HEAD, f"#{record.id} {record.name} {record.state} {duration(record.elapsed(now))}")
    ]
    parts.append((_PROGRESS, progress_text(record.progress_view)))
    silent = responding_text(record, now)
    if silent:
        parts.append((_SILENT, silent))
        live = LiveView()  # neither an ETA nor CPU and memory figures that are no longer live
    parts.append((_ETA, eta_text(live.eta) or ""))
    if live.sampled:
        if live.cpu_cores is None:
            parts.append((_CPU, "CPU not measured yet"))
        else:
            parts.append((_CPU, f"CPU {live.cpu_cores:.1f}/{live.cpus} cores"))
        parts.append((_RSS, f"RSS {size(live.rss)} ({size(live.memory_available)} available)"))
        parts.append((_PEAK, peak_text(live)))
        parts.append((_RUNNING, running_text(live)))
        parts.append((_OTHERS, contention_text(live)))
    parts.append((_LOST, loss_text(record)))
    parts.append((_ADOPTED, adoption_text(record)))
    shown = [(rank, visible(text)) for rank, text in parts if text]
    line = " · ".join(text for _, text in shown)
    while width is not None and len(line) > width and len(shown) > 1:
        least = max(rank for rank, _ in shown)
        shown = [(rank, text) for rank, text in shown if rank != least]
        line = " · ".join(text for _, text in shown)
    if width is not None and len(line) > width:
        line = line[: max(0, width - 1)] + "…"
    return line


def outcome_line(record: BuildRecord) -> str:
    """How a build ended, in one line."""
    head = f"build #{record.id} ({record.name}) {record.state}"
    if not record.state.known:
        return visible(
            f"{head}: a state this workbench does not know (its history was written by a newer "
            "version); that version says how the build went"
        )
    if record.state == SUCCEEDED:
        lost = loss_text(record)
        return visible(f"{head} in {duration(record.duration_s)}" + (f"; {lost}" if lost else ""))
    detail = record.note or ""
    if record.state in (STOPPED, KILLED, LOST):
        return visible(f"{head} after {duration(record.elapsed())}: {detail}".rstrip(": "))
    return visible(f"{head} after {duration(record.duration_s)}: {detail}".rstrip(": "))


def exit_code(record: BuildRecord) -> int:
    """What the CLI exits with after following a build: its exit status, 128+signal, or 1."""
    if record.exit_status is not None:
        return record.exit_status
    if record.signal is not None:
        return 128 + record.signal
    return 0 if record.state == SUCCEEDED else 1


@dataclass
class Update:
    """What changed since the last poll of a followed build."""

    lines: list[str]
    record: BuildRecord
    done: bool


class Follower:
    """Follows one build: new readable log lines and its latest record, until it ended."""

    def __init__(self, history: History, build_id: int, raw: bool = False) -> None:
        self.history = history
        self.build_id = build_id
        self.record = history.get(build_id)
        self.reader = LogReader(self.record.log_path, raw=raw)

    def backlog(self, count: int = 20) -> list[str]:
        """The last `count` lines written so far (read past everything before them)."""
        return self.reader.skip_to_tail(count)

    def poll(self) -> Update:
        """New lines; `done` once the build ended and its log was read to the end."""
        from workbench.supervision import liveness

        record = self.history.get(self.build_id)
        if record.active:
            record = liveness.check(self.history, [record])[0]
        self.record = record
        if record.active:
            return Update(self.reader.read(), record, False)
        # Ended: everything the supervisor wrote is in the file now.
        lines: list[str] = []
        while True:
            before = self.reader.offset
            lines += self.reader.read()
            if self.reader.offset == before:
                break
        lines += self.reader.rest()
        return Update(lines, record, True)
