"""Reading `.ninja_log` incrementally while ninja appends to it.

ninja writes one line per output of every edge it ran, when the edge finishes:
`start_ms \t end_ms \t mtime \t output \t command_hash`, after a `# ninja log vN` header (v5,
v6 and v7 are in use; all five fields are the same in each, v7 only changed the hash function;
ninja's src/build_log.cc). Times are milliseconds since that ninja process started.

`NinjaLogReader.at_build_start(path)` remembers what the log held before the build (those
entries are not the build's, but each output's latest of them is what it took in the tree's
earlier runs: `before_build`), then `read_new()` returns only the entries appended since, in
file order, at the cost of the new bytes only. ninja may rewrite the whole log ("recompacting"
it when it loads, through a new file renamed over the old one: src/build_log.cc Recompact); the
reader notices the new inode or a shorter file, reads it again and returns only entries it has
not seen and that were not there before the build. A reader told to `hold_open()` keeps the log
it last read open, and reads the rest from it once the path is gone (a Nix builder's directory
is removed right after its ninja wrote the last entries).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from workbench.errors import WorkbenchError

LOG_NAME = ".ninja_log"
_HEADER = b"# ninja log v"
SUPPORTED_VERSIONS = (5, 6, 7)


class NinjaLogError(WorkbenchError):
    """A `.ninja_log` that is not one (wrong header, unknown version)."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line of `.ninja_log`: one output of one edge."""

    start_ms: int
    end_ms: int
    mtime: int
    output: str
    command_hash: str


def parse_line(line: bytes) -> LogEntry | None:
    """One log line, or None when it is not a well-formed entry."""
    fields = line.split(b"\t")
    if len(fields) != 5:
        return None
    try:
        start, end, mtime = int(fields[0]), int(fields[1]), int(fields[2])
    except ValueError:
        return None
    return LogEntry(
        start,
        end,
        mtime,
        fields[3].decode("utf-8", "surrogateescape"),
        fields[4].decode("ascii", "replace"),
    )


def header_version(first_line: bytes) -> int:
    """The version a log's first line declares; NinjaLogError when it is no ninja log."""
    if not first_line.startswith(_HEADER):
        raise NinjaLogError(f"not a ninja log: its first line is {first_line[:40]!r}")
    try:
        return int(first_line[len(_HEADER) :].strip())
    except ValueError:
        raise NinjaLogError(f"not a ninja log version: {first_line[:40]!r}") from None


class NinjaLogReader:
    """New entries of one `.ninja_log` since a build started; see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.version: int | None = None
        self.malformed = 0
        """Lines that were not entries (a torn write, a foreign line)."""
        self._offset = 0
        self._inode: tuple[int, int] | None = None
        self._partial = b""
        self._before: set[int] = set()
        self.before_build: dict[str, float] = {}
        """Each output's seconds in its latest entry the log held before the build (ninja's
        earlier runs of this tree, watched or not; `at_build_start`); empty for a new log."""
        self._returned: set[int] = set()
        self._pending: list[LogEntry | None] = []
        self._hold = False
        self._held: BinaryIO | None = None

    @classmethod
    def at_build_start(cls, path: Path) -> NinjaLogReader:
        """A reader that leaves out what the log holds now (earlier builds' entries)."""
        reader = cls(path)
        reader._skip_existing()
        return reader

    @classmethod
    def whole(cls, path: Path) -> NinjaLogReader:
        """A reader that returns every entry of the log, old ones too."""
        return cls(path)

    def _skip_existing(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                data = handle.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise NinjaLogError(f"{self.path}: cannot read ({exc.strerror})") from None
        self._inode = (stat.st_dev, stat.st_ino)
        complete = data.rfind(b"\n") + 1
        self._offset = complete
        lines = data[:complete].split(b"\n")
        if lines and lines[0].startswith(_HEADER):
            self.version = header_version(lines[0])
        # Identities of what was there: a recompacted log repeats them, and they are not ours.
        self._before = {hash(line) for line in lines[1:] if line}
        # Later lines are later runs (a recompacted log holds one line per output).
        for line in lines[1:]:
            entry = parse_line(line) if line else None
            if entry is not None and entry.end_ms >= entry.start_ms:
                self.before_build[entry.output] = (entry.end_ms - entry.start_ms) / 1000.0

    def take_back(self, lines: Iterable[bytes]) -> None:
        """Count these existing lines as new after all (written by the running ninja before the
        reader found its log): the next `read_new` returns them first."""
        taken = list(lines)
        if not taken:
            return
        wanted = {hash(line) for line in taken}
        self._before -= wanted
        self._pending = [parse_line(line) for line in reversed(taken)]
        for entry in self._pending:
            if entry is not None:
                self.before_build.pop(entry.output, None)
        self._returned |= wanted

    def hold_open(self) -> None:
        """Keep the log open between reads, so that what ninja wrote last can still be read
        after the log's directory was removed; `close()` lets go of it."""
        self._hold = True

    def close(self) -> None:
        """Let go of the log held open (`hold_open`)."""
        self._hold = False
        if self._held is not None:
            self._held.close()
            self._held = None

    def _open(self) -> BinaryIO:
        """The log by its path; when the path is gone, the one held open (if any)."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 (held, or closed by the caller)
        except FileNotFoundError:
            if self._held is None:
                raise
            return self._held
        if self._hold:
            if self._held is not None:
                self._held.close()
            self._held = handle
        return handle

    def _read_tail(self) -> tuple[bytes, bool] | None:
        """The bytes after the offset, and whether the file was rewritten since the last read."""
        handle = self._open()
        with contextlib.nullcontext(handle) if handle is self._held else handle:
            stat = os.fstat(handle.fileno())
            inode = (stat.st_dev, stat.st_ino)
            rewritten = self._inode is not None and (
                inode != self._inode or stat.st_size < self._offset
            )
            if rewritten:
                # Recompacted (or deleted and started again): read it all, keep only the new.
                self._offset = 0
                self._partial = b""
                self.version = None
            self._inode = inode
            if stat.st_size <= self._offset:
                return None
            handle.seek(self._offset)
            return handle.read(), rewritten

    def read_new(self) -> list[LogEntry]:
        """Entries appended since the last call (complete lines only), in file order."""
        taken = [entry for entry in self._pending if entry is not None]
        self._pending = []
        try:
            read = self._read_tail()
        except FileNotFoundError:
            return taken
        except OSError as exc:
            raise NinjaLogError(f"{self.path}: cannot read ({exc.strerror})") from None
        if read is None:
            return taken
        data, rewritten = read
        self._offset += len(data)
        data = self._partial + data
        complete = data.rfind(b"\n") + 1
        self._partial = data[complete:]
        lines = data[:complete].split(b"\n")
        lines.pop()  # the empty string after the last newline
        if self.version is None and lines:
            self.version = header_version(lines[0])
            if self.version < SUPPORTED_VERSIONS[0]:
                raise NinjaLogError(
                    f"{self.path}: ninja log v{self.version} is older than v5 (ninja before "
                    "1.6); rebuild with a newer ninja"
                )
            lines = lines[1:]
        seen = self._returned
        entries: list[LogEntry] = taken
        append = entries.append
        for line in lines:
            if not line or line[0] == 35:  # "#": a header repeated by a rewrite
                continue
            key = hash(line)
            if rewritten and (key in self._before or key in seen):
                continue
            seen.add(key)
            entry = parse_line(line)
            if entry is None:
                self.malformed += 1
                continue
            append(entry)
        return entries


def read_all(path: Path) -> list[LogEntry]:
    """Every entry of a log, in file order."""
    return NinjaLogReader.whole(path).read_new()
