"""The supervisor's log pump: bytes from the build's pipe to the log file and the tracker.

Every chunk read from the pipe is written to the log file at once, unchanged: complete lines
and a trailing partial line alike (a progress bar without a newline, a prompt), so the file is
the build's output byte for byte even if the supervisor dies the next instant. Only complete
lines go to the progress tracker, decoded as UTF-8 with errors replaced; a line is decoded
once it is complete, so a multi-byte character split across two reads is never mangled.

Nothing here may raise, or the supervisor would stop reading and the build would die of SIGPIPE
on its next write. A write that fails (the state directory's disk full: ENOSPC, EDQUOT; an I/O
error: EIO) loses that chunk from the file, never from the tracker: `OutputLoss` counts the
bytes, where in the file they are missing and why, and every later chunk tries again, so the log
resumes as soon as there is room. A line in the log marks each gap. A tracker that raises on
some line (a parser bug) is reported once and bypassed for that line.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.logs.readable_map import ReadableMapWriter
from workbench.logs.readable_stream import ReadableStream
from workbench.progress import ProgressTracker

READ_SIZE = 1 << 18
# A "line" longer than this without a newline (a binary blob, a runaway progress bar) is fed
# to the tracker in pieces, so the pump's memory stays bounded.
MAX_PENDING = 1 << 20
# (the whole phrase: a longer needle is found sooner, and a line is kept only if it has it)
_KILLED_MARK = "Killed signal terminated program"
# Gaps listed one by one; past this many only the totals grow.
MAX_GAPS = 20


@dataclass
class OutputLoss:
    """Output of the build that could not be written to its log, and why."""

    bytes: int = 0
    """Bytes of the build's output missing from the log."""
    gaps: list[tuple[int, int]] = field(default_factory=list)
    """(offset in the log file where bytes are missing, how many), the first MAX_GAPS."""
    gap_count: int = 0
    reason: str = ""
    """The first failure, e.g. "ENOSPC: No space left on device"."""

    def to_json(self) -> dict[str, Any]:
        """What the history keeps (in the build's progress) and `status --json` prints."""
        return {
            "bytes": self.bytes,
            "gaps": [list(gap) for gap in self.gaps],
            "gap_count": self.gap_count,
            "reason": self.reason,
        }

    def describe(self) -> str:
        """One line for a note: "output lost: 1.2 MB in 2 gaps, the first at byte 4096 ..."."""
        return describe_loss(self.to_json())


def describe_loss(loss: dict[str, Any]) -> str:
    """An `OutputLoss.to_json()` in words ("" when nothing was lost)."""
    lost = loss.get("bytes") or 0
    if not lost:
        return ""
    count = loss.get("gap_count") or 1
    gaps = loss.get("gaps") or []
    where = f", the first at byte {gaps[0][0]:,} of the log" if gaps else ""
    amount = f"{lost:,} bytes" if lost < 1 << 20 else f"{lost / (1 << 20):.1f} MB"
    plural = "gap" if count == 1 else "gaps"
    return (
        f"output lost: {amount} of the build's output could not be written to its log "
        f"({loss.get('reason') or 'write failed'}), in {count} {plural}{where}"
    )


def _reason(error: OSError) -> str:
    name = errno.errorcode.get(error.errno or 0, "error")
    return f"{name}: {error.strerror or error}"


class LogPipeline:
    """Writes chunks to the log and feeds their lines to a `ProgressTracker`."""

    def __init__(
        self,
        log_fd: int,
        tracker: ProgressTracker,
        say: Callable[[str], None] | None = None,
        offset: int = 0,
        readable: ReadableMapWriter | None = None,
    ) -> None:
        """`offset`: the log file's size when the pipeline starts (where its gaps are counted).

        `readable`: fed every byte that reaches the log (gap markers too), in order, to keep
        the log's readable form beside it (`logs.readable_map`)."""
        self.log_fd = log_fd
        self.tracker = tracker
        self.readable = readable
        self._say = say
        self.bytes = 0
        """Bytes of output read from the build (written or lost)."""
        self.offset = offset
        """Bytes in the log file: the build's output written so far plus the gap markers."""
        self.loss = OutputLoss()
        self.killed_compilers: deque[str] = deque(maxlen=5)
        """Lines like "g++: fatal error: Killed signal terminated program cc1plus": a compiler
        killed by SIGKILL, most often the OOM killer."""
        self._pending = b""
        self._ends_line = True  # whether the last byte written to the file was a newline
        self._gap: list[int] | None = None  # [offset, bytes] of the gap being lost now
        self._tracker_failed = False
        self._append_error: OSError | None = None
        # (the shared pass's own state where no writer of the readable form has one)
        self._stream = ReadableStream()

    def feed(self, chunk: bytes) -> None:
        """Write a chunk to the log as it is, then fold its complete lines in.

        With the readable form on, its writer and the tracker share one decode, one split and
        one pass over the lines (`ReadableStream.render_folding`) whenever the writer waits on
        the same partial line as the pump (always, but after a write failure or a runaway
        line): issue 23 item 4, the map on at most 1.2x the pump without it. With it off, the
        tracker is fed by the same pass over the block's bytes (`ReadableStream.fold_lines`)."""
        written = self._write(chunk)
        self.bytes += len(chunk)
        readable = self.readable
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if readable is not None and written:
                readable.feed(chunk[:written])
            self._pending += chunk
            if len(self._pending) > MAX_PENDING:
                self._feed_text(self._pending.decode("utf-8", "replace"))
                self._pending = b""
            return
        before = self._pending
        # (each a copy less of the block: the partial line joined to a view of the chunk, the
        # decode from a view)
        block = b"".join((before, memoryview(chunk)[: cut + 1])) if before else chunk[: cut + 1]
        self._pending = chunk[cut + 1 :]
        text = str(memoryview(block)[:-1], "utf-8", "replace")
        if readable is None:
            # the map off: the same pass over the block's bytes, for the tracker alone
            error = self._stream.fold_lines(block, text, self.tracker)
        elif written == len(chunk) and not readable.failure and readable.pending == before:
            error = readable.feed_folding(block, text, self._pending, self.tracker)
        else:
            if written:
                readable.feed(chunk[:written])
            self._feed_text(text)
            return
        self._tracker_error(error)
        if _KILLED_MARK in text:
            self._killed(text, text.split("\n"))

    def replay(self, chunk: bytes) -> None:
        """Fold in output already in the log (a supervisor adopting a build reads the log its
        lost predecessor wrote): to the tracker only, never written again."""
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self._pending += chunk
            return
        complete, self._pending = self._pending + chunk[:cut], chunk[cut + 1 :]
        self._feed_text(complete.decode("utf-8", "replace"))

    def replay_end(self) -> None:
        """The log so far is folded in: its last line without a newline is the start of the
        next output (the pipe's next bytes continue it)."""
        self._ends_line = not self._pending

    def say(self, text: str) -> None:
        """Tell the supervisor's log; a failure to (the same full disk) is ignored."""
        if self._say is not None:
            with contextlib.suppress(Exception):
                self._say(text)

    def _write(self, chunk: bytes) -> int:
        """Write `chunk` whole, or count what could not be written; how much of it went into
        the log (the readable form's writer is fed it by `feed`). Never raises."""
        try:
            if self._gap is not None:
                self._close_gap()
        except OSError as error:
            self._lose(len(chunk), error)
            return 0
        written = self._append(chunk, readable=False)
        if written < len(chunk):
            self._lose(len(chunk) - written, self._append_error or OSError(errno.EIO, "?"))
            return written
        if chunk:
            self._ends_line = chunk.endswith(b"\n")
        return written

    def _append(self, data: bytes, readable: bool = True) -> int:
        """Append to the log as much of `data` as goes; how much did (the readable form is fed
        exactly that, unless `readable` is false: the caller feeds it). A failure is kept in
        `_append_error`."""
        view = memoryview(data)
        self._append_error = None
        try:
            while view:
                written = os.write(self.log_fd, view)
                view = view[written:]
                self.offset += written
        except OSError as error:
            self._append_error = error
        done = len(data) - len(view)
        if done and readable and self.readable is not None:
            self.readable.feed(data[:done] if view else data)
        return done

    def _lose(self, count: int, error: OSError) -> None:
        loss = self.loss
        if not loss.reason:
            loss.reason = _reason(error)
        loss.bytes += count
        if self._gap is None:
            self._gap = [self.offset, 0]
            loss.gap_count += 1
            if len(loss.gaps) < MAX_GAPS:
                loss.gaps.append((self.offset, 0))
            self.say(
                f"cannot write the build's output to its log at byte {self.offset:,} "
                f"({_reason(error)}); still reading it, retrying with every chunk"
            )
        self._gap[1] += count
        if loss.gap_count <= MAX_GAPS:
            loss.gaps[-1] = (self._gap[0], self._gap[1])

    def _close_gap(self) -> None:
        """Room again: mark the gap in the file (raises OSError while there is none)."""
        assert self._gap is not None
        where, lost = self._gap
        marker = (
            f"workbench: {lost:,} bytes of the build's output are missing here: they could not "
            f"be written to this log ({self.loss.reason})\n"
        ).encode()
        if not self._ends_line:
            marker = b"\n" + marker
        written = self._append(marker)
        if written < len(marker):
            # What of the marker went in stays (the log is as it is); the gap goes on.
            if written:
                self._ends_line = False
            raise self._append_error or OSError(errno.EIO, "?")
        self._ends_line = True
        self._gap = None
        self.say(f"writing the log again after a gap of {lost:,} bytes at byte {where:,}")

    def flush_gap(self) -> None:
        """Mark a gap still open at the end (when there is room by then); never raises."""
        if self._gap is not None:
            try:
                self._close_gap()
            except OSError:
                return

    def _feed_text(self, text: str) -> None:
        lines = text.split("\n")
        self._tracker_error(self.tracker.feed_lines(lines))
        self._killed(text, lines)

    def _tracker_error(self, error: Exception | None) -> None:
        """A line the tracker raised on (a parser bug) was skipped: said once, reading goes on."""
        if error is not None and not self._tracker_failed:
            self._tracker_failed = True
            self.say(f"the progress tracker failed on a line ({error!r}); reading goes on")

    def _killed(self, text: str, lines: list[str]) -> None:
        if _KILLED_MARK in text:
            self.killed_compilers.extend(line for line in lines if _KILLED_MARK in line)

    def close(self) -> None:
        """The pipe ended: fold in the last line if it had no newline; mark an open gap."""
        if self._pending:
            self._feed_text(self._pending.decode("utf-8", "replace"))
            self._pending = b""
        self.flush_gap()
        if self.readable is not None:
            self.readable.close()
