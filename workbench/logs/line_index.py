"""A line-offset index over a growing log file, for showing any line at once.

The supervisor appends to the log; the viewer keeps only byte offsets of line starts (8 bytes a
line) and reads the lines it shows through mmap, so a 2-million-line log costs ~16 MB and any
screenful costs the same to draw. The same habit as toolong's log_file.py.
"""

from __future__ import annotations

import mmap
import os
import re
from array import array
from bisect import bisect_right
from itertools import accumulate
from pathlib import Path
from typing import BinaryIO

CHUNK_BYTES = 4 * 1024 * 1024

ERROR_PATTERN = re.compile(
    rb"(?i)(?:\berror\b|\bfatal\b|FAILED:|undefined reference|Segmentation fault|"
    rb"\bKilled\b|out of memory|\bTraceback\b|cannot allocate memory|"
    # A coloured "error:" (gcc/clang with colours, Nix's messages, JSON-escaped in Nix's log):
    # the colour code's "m" sits right before the word, so \b alone misses it.
    rb"(?:\x1b|\\u001b)\[[0-9;]*m(?:error|fatal)\b)"
)
WARNING_PATTERN = re.compile(rb"(?i)\bwarning\b")


def severity(line: str) -> str | None:
    """ "error", "warning" or None for one log line."""
    data = line.encode("utf-8", "replace")
    if ERROR_PATTERN.search(data):
        return "error"
    if WARNING_PATTERN.search(data):
        return "warning"
    return None


def compile_search(text: str, ignore_case: bool = True) -> re.Pattern[bytes]:
    """The byte pattern `LineIndex.search` uses for a plain search text."""
    return re.compile(re.escape(text.encode("utf-8")), re.IGNORECASE if ignore_case else 0)


class LineIndex:
    """Offsets of every complete line of a file that only grows; `refresh` takes new lines in.

    A last line without its newline yet is shown too (a compiler's half-written message), and
    re-read once it is complete.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._starts = array("Q", [0])  # start of each complete line, plus the next one's
        self._size = 0
        self._map: mmap.mmap | None = None
        self._file: BinaryIO | None = None

    def close(self) -> None:
        """Release the file and its mapping."""
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __len__(self) -> int:
        """Lines, counting an unterminated last line."""
        complete = len(self._starts) - 1
        return complete + (1 if self._size > self._starts[-1] else 0)

    @property
    def size(self) -> int:
        """Bytes indexed so far (a partial last line included)."""
        return self._size

    @property
    def complete_size(self) -> int:
        """Bytes of the complete lines indexed so far (where a partial last line starts)."""
        return self._starts[-1]

    @property
    def buffer(self) -> mmap.mmap | None:
        """The mapped file (read-only), for byte searches over what was indexed."""
        return self._map

    def refresh(self, limit_bytes: int | None = None) -> int:
        """Index what was appended since the last call; returns the number of new lines.

        `limit_bytes` bounds the work of one call (the UI thread calls with a limit; a worker
        indexes a huge file in one go).
        """
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return 0
        if size < self._size:  # truncated or replaced: start again
            self.close()
            self._starts = array("Q", [0])
            self._size = 0
        if size == self._size:
            return 0
        before = len(self)
        if self._file is None:
            self._file = open(self.path, "rb")  # noqa: SIM115 - held for the index's life
        position = first = self._starts[-1]
        end = size if limit_bytes is None else min(size, position + limit_bytes)
        self._file.seek(position)
        want = CHUNK_BYTES
        while position < end:
            chunk = self._file.read(min(want, end - position))
            if not chunk:
                break
            last_newline = chunk.rfind(b"\n")
            if last_newline < 0:
                if position + len(chunk) >= size:
                    break  # an unterminated last line: the rest once it ends
                if limit_bytes is not None and position > first:
                    break  # the limit: the rest next time (from this line's start)
                # One line longer than the read or the limit: read on until its end, or the
                # view would never get past it. Without a limit this must never stop early:
                # the size recorded below would then say that lines not indexed were.
                end, want = size, want * 2
                self._file.seek(position)
                continue
            complete = chunk[: last_newline + 1]
            # split and accumulate run in C: ~10x faster than a find() loop.
            lengths = map(len, complete.split(b"\n")[:-1])
            starts = accumulate((n + 1 for n in lengths), initial=position)
            next(starts)  # `position` is already the last start
            self._starts.extend(starts)
            position += len(complete)
            self._file.seek(position)
        self._size = size if limit_bytes is None or end == size else end
        # The old map is dropped, not closed: a search in another thread may still read it,
        # and it is unmapped once nothing refers to it.
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        return len(self) - before

    def _bounds(self, number: int) -> tuple[int, int]:
        complete = len(self._starts) - 1
        if number < complete:
            return self._starts[number], self._starts[number + 1] - 1
        return self._starts[-1], self._size

    def line(self, number: int) -> str:
        """Line `number` (0-based) without its newline."""
        if not 0 <= number < len(self) or self._map is None:
            raise IndexError(number)
        start, end = self._bounds(number)
        end = min(end, len(self._map))
        return self._map[start:end].decode("utf-8", "replace").rstrip("\r")

    def lines(self, start: int, stop: int) -> list[str]:
        """Lines start..stop-1 (clipped to the file)."""
        return [self.line(n) for n in range(max(0, start), min(stop, len(self)))]

    def line_at_offset(self, offset: int) -> int:
        """The line holding byte `offset`."""
        return bisect_right(self._starts, offset) - 1

    def search(
        self,
        pattern: str | re.Pattern[bytes],
        start_line: int = 0,
        backwards: bool = False,
        ignore_case: bool = True,
        stop_line: int | None = None,
    ) -> int | None:
        """The first line at or after `start_line` (or before it, backwards) that matches.

        The regular expression runs over the mapped file in C, not line by line in Python.
        `stop_line` bounds the lines searched (forwards: up to it, backwards: down to it), so a
        caller can search a huge file in slices and stay responsive between them.
        """
        if self._map is None or len(self) == 0:
            return None
        if isinstance(pattern, str):
            pattern = compile_search(pattern, ignore_case)
        count = len(self)
        if backwards:
            end = self._size if start_line >= count else self._bounds(max(0, start_line))[0]
            begin = 0 if stop_line is None else self._bounds(min(max(0, stop_line), count - 1))[0]
            found = None
            for match in pattern.finditer(self._map, begin, end):
                found = match.start()
            return None if found is None else self.line_at_offset(found)
        start = self._bounds(min(max(0, start_line), count - 1))[0]
        limit = self._size
        if stop_line is not None and stop_line < count:
            limit = self._bounds(max(0, stop_line))[0]
        hit = pattern.search(self._map, start, limit)
        return None if hit is None else self.line_at_offset(hit.start())

    def first_error(self, start_line: int = 0) -> int | None:
        """The first line at or after `start_line` that reads like an error."""
        return self.search(ERROR_PATTERN, start_line)
