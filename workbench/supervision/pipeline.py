"""The supervisor's log pump: bytes from the build's pipe to the log file and the tracker.

Every chunk read from the pipe is written to the log file at once, unchanged: complete lines
and a trailing partial line alike (a progress bar without a newline, a prompt), so the file is
the build's output byte for byte even if the supervisor dies the next instant. Only complete
lines go to the progress tracker, decoded as UTF-8 with errors replaced; a line is decoded
once it is complete, so a multi-byte character split across two reads is never mangled.
"""

from __future__ import annotations

import os

from workbench.progress import ProgressTracker

READ_SIZE = 1 << 18
# A "line" longer than this without a newline (a binary blob, a runaway progress bar) is fed
# to the tracker in pieces, so the pump's memory stays bounded.
MAX_PENDING = 1 << 20
_KILLED_MARK = "terminated program"


class LogPipeline:
    """Writes chunks to the log and feeds their lines to a `ProgressTracker`."""

    def __init__(self, log_fd: int, tracker: ProgressTracker) -> None:
        self.log_fd = log_fd
        self.tracker = tracker
        self.bytes = 0
        self.killed_compilers: list[str] = []
        """Lines like "g++: fatal error: Killed signal terminated program cc1plus": a compiler
        killed by SIGKILL, most often the OOM killer."""
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        """Write a chunk to the log as it is, then fold its complete lines in."""
        view = memoryview(chunk)
        while view:
            written = os.write(self.log_fd, view)
            view = view[written:]
        self.bytes += len(chunk)
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self._pending += chunk
            if len(self._pending) > MAX_PENDING:
                self._feed_text(self._pending.decode("utf-8", "replace"))
                self._pending = b""
            return
        if self._pending:
            complete = self._pending + chunk[:cut]
            self._pending = chunk[cut + 1 :]
        else:
            complete = chunk[:cut]
            self._pending = chunk[cut + 1 :]
        self._feed_text(complete.decode("utf-8", "replace"))

    def _feed_text(self, text: str) -> None:
        feed = self.tracker.feed
        for line in text.split("\n"):
            feed(line)
        if _KILLED_MARK in text:
            self.killed_compilers.extend(
                line for line in text.split("\n") if "Killed signal terminated program" in line
            )

    def close(self) -> None:
        """The pipe ended: fold in the last line if it had no newline."""
        if self._pending:
            self._feed_text(self._pending.decode("utf-8", "replace"))
            self._pending = b""
