"""Reading a build back while it runs or after: its log as a person reads it, and one-line views.

The log file holds the build's output byte for byte, Nix's `@nix {json}` lines included;
`LogReader` turns it into readable lines (`name> text` for a Nix builder's line, like
`nix build -L`) with a `ProgressTracker` of its own (`feed`, then `render_line`), reading only
what was appended since the last call and holding back a partial last line until it is
complete (or the build ended).

Everything here that came from the build (log lines, file names, notes, derivation names) is
returned with its control characters made visible (`logs.visible`): these strings go straight
to terminals.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.host.units import byte_size as size  # re-exported: the views' one formatter
from workbench.logs.visible import visible
from workbench.progress import ProgressTracker
from workbench.supervision.history import (
    KILLED,
    LOST,
    STOPPED,
    SUCCEEDED,
    BuildRecord,
    History,
)

_CHUNK = 1 << 20


class LogReader:
    """Incremental, readable lines of a build log."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.offset = 0
        self._pending = b""
        self._tracker = ProgressTracker()

    def _readable(self, lines: list[str]) -> list[str]:
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
        return self._readable(data[:cut].decode("utf-8", "replace").split("\n"))

    def rest(self) -> list[str]:
        """The last line when it has no newline (call once the build ended)."""
        lines = self.read()
        if self._pending:
            lines += self._readable([self._pending.decode("utf-8", "replace")])
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


def duration(seconds: float | None) -> str:
    """1h02m, 3m05s, 12.3s."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def eta_text(live: dict[str, Any]) -> str | None:
    """ "ETA 1m05s (50s-1m30s)": the live view's ETA with the range it is likely in; None when
    the supervisor has none."""
    if live.get("eta_s") is None:
        return None
    low, high = live.get("eta_low_s"), live.get("eta_high_s")
    spread = f" ({duration(low)}–{duration(high)})" if low is not None and high is not None else ""
    return f"ETA {duration(live['eta_s'])}{spread}"


def progress_text(progress: dict[str, Any]) -> str:
    """Progress in words ("ninja 12/40 (30%)", "3/5 derivations, ..."); "" if the log says none."""
    return visible(_progress_words(progress))


def loss_text(record: BuildRecord) -> str:
    """What of the build's output its log lacks (a full disk), in words; "" when nothing."""
    from workbench.supervision.pipeline import describe_loss

    lost = (record.progress or {}).get("output_lost")
    return describe_loss(lost) if isinstance(lost, dict) else ""


def adoption_text(record: BuildRecord) -> str:
    """What became of lost supervisors, in words ("" when one saw the whole build): "adopted
    after its supervisor (pid 123) was lost; 1.2s unobserved (sampled figures miss it)"."""
    if not record.adopted:
        return ""
    lost = ", ".join(str(entry.get("lost_pid")) for entry in record.adopted)
    times = "once" if len(record.adopted) == 1 else f"{len(record.adopted)} times"
    return (
        f"adopted {times} after its supervisor was lost (pid {lost}); "
        f"{duration(record.unobserved_s)} unobserved (sampled figures miss it)"
    )


def _progress_words(progress: dict[str, Any]) -> str:
    parts: list[str] = []
    if progress.get("nix") and progress.get("planned"):
        failed = f", {progress['failed']} failed" if progress.get("failed") else ""
        parts.append(f"{progress.get('done', 0)}/{progress['planned']} derivations{failed}")
        for derivation in progress.get("derivations", [])[:2]:
            step = derivation.get("step")
            inner = f" {step['tool']} {step['done']}/{step['total']}" if step else ""
            phase = f" {derivation['phase']}" if derivation.get("phase") else ""
            parts.append(f"{derivation['name']}{phase}{inner}")
    else:
        step = progress.get("step")
        if step:
            percent = 100 * step["done"] / step["total"] if step["total"] else 0
            parts.append(f"{step['tool']} {step['done']}/{step['total']} ({percent:.0f}%)")
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


def status_line(record: BuildRecord, now: float | None = None) -> str:
    """One line for a running build: progress, ETA, CPU, memory, what compiles; for one whose
    supervisor does not respond, what it last reported, and never an ETA."""
    now = time.time() if now is None else now
    live = record.live or {}
    parts = [f"#{record.id} {record.name} {record.state} {duration(record.elapsed(now))}"]
    progress = progress_text(record.progress or {})
    if progress:
        parts.append(progress)
    silent = responding_text(record, now)
    if silent:
        parts.append(silent)
        live = {}  # neither an ETA nor CPU and memory figures that are no longer live
    if live.get("eta_s") is not None:
        parts.append(eta_text(live) or "")
    if live:
        parts.append(f"CPU {live.get('cpu_cores', 0):.1f}/{live.get('cpus', 0)} cores")
        parts.append(
            f"RSS {size(live.get('rss'))} ({size(live.get('memory_available'))} available)"
        )
        files = [
            os.path.basename(job["file"])
            for job in live.get("jobs", [])
            if job.get("file") and job.get("kind") in ("compiler", "cuda")
        ]
        unique = list(dict.fromkeys(files))
        if live.get("compile_jobs"):
            shown = ", ".join(unique[:3]) + (" ..." if len(unique) > 3 else "")
            parts.append(f"{live['compile_jobs']} compiling: {shown}" if shown else "")
    lost = loss_text(record)
    if lost:
        parts.append(lost)
    adopted = adoption_text(record)
    if adopted:
        parts.append(adopted)
    return visible(" · ".join(part for part in parts if part))


def outcome_line(record: BuildRecord) -> str:
    """How a build ended, in one line."""
    head = f"build #{record.id} ({record.name}) {record.state}"
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

    def __init__(self, history: History, build_id: int) -> None:
        self.history = history
        self.build_id = build_id
        self.record = history.get(build_id)
        self.reader = LogReader(self.record.log_path)

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
