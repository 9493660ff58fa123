"""The readable form of a log, made while the log is written, so `workbench logs` only copies.

Rendering a log when it is read costs a pass in Python over every line that is not readable as
it is (each `@nix` event of a Nix build is a JSON document): minutes for a large Nix log, where
`--raw` takes a second. So the supervisor's pump, which reads every line anyway, keeps beside
`build.log`:

- `build.readable`: the readable form of those stretches of the log that are not readable as
  they are (a `@nix ` event, a control byte, invalid UTF-8; `logs.readable_stream`);
- `build.readable.map`: fixed-size records, each saying where the readable form of one stretch
  of the log lies: in `build.log` itself (plain lines, most of a ninja, make or cmake build: no
  copy is kept) or in `build.readable`.

`copy_readable` then copies byte ranges with sendfile(2), at the speed of `--raw`. What no record
covers (the tail of a running build, a log from before maps existed, a map cut short by a full
disk or a supervisor that died) is rendered line by line as before. A stretch goes back to
"as it is" only after `SETTLE` bytes of plain lines in a row, so a build that colours a warning
every few lines gives a few long stretches, not one per line.

The writer never raises (the pump must not stop): the first failed write ends the map there,
and readers render the rest. Records are written after the bytes they point at, and a reader
trusts a record only if those bytes are there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from workbench.logs.readable_stream import BLOCK, LineCutter, ReadableStream, readable_as_is
from workbench.progress import ProgressTracker

# source, raw start, raw end, offset in the source, length
RECORD = struct.Struct("<Q4Q")
IN_LOG = 0
IN_READABLE = 1
# Plain bytes in a row after which a stretch kept in build.readable goes back to the log.
SETTLE = 1 << 16
# A record at least this often while one stretch grows, so a running build's readers copy most.
RECORD_EVERY = 1 << 20


def readable_paths(log_path: Path) -> tuple[Path, Path]:
    """(build.readable, build.readable.map) beside a build's log."""
    stem = log_path.with_suffix("")
    return stem.with_name(stem.name + ".readable"), stem.with_name(stem.name + ".readable.map")


@dataclass(frozen=True)
class Stretch:
    """Where the readable form of the log's bytes [raw_start, raw_end) lies."""

    source: int
    raw_start: int
    raw_end: int
    offset: int
    length: int


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class ReadableMapWriter:
    """Fed exactly the bytes appended to the log, in order; keeps the two files beside it."""

    def __init__(
        self,
        readable_fd: int,
        map_fd: int,
        raw_offset: int,
        *,
        settle: int = SETTLE,
        record_every: int = RECORD_EVERY,
    ) -> None:
        """`raw_offset`: the log's size when writing starts (earlier bytes stay unmapped)."""
        self._settle = settle
        self._record_every = record_every
        self._readable_fd = readable_fd
        self._map_fd = map_fd
        self._readable_size = os.fstat(readable_fd).st_size
        self._stream = ReadableStream()
        self._cutter = LineCutter()
        self._raw = raw_offset  # end of the complete lines taken so far
        self._source = IN_LOG
        self._start_raw = raw_offset  # the open stretch: where it starts in the log
        self._start_offset = raw_offset  # ... and in its source
        self._plain_run = 0
        self.failure = ""
        """Why the map stopped (the first failed write), "" while it goes on."""

    def feed(self, data: bytes) -> None:
        """Bytes just written to the log."""
        if self.failure or not data:
            return
        found = self._cutter.cut(data)
        if found is None:
            return
        block, runaway = found
        if runaway:  # shown in pieces, each as a line of its own
            self._take(block, self._stream.render_lines(block + b"\n"))
        else:
            self._take(block, None if readable_as_is(block) else self._stream.render_lines(block))

    @property
    def pending(self) -> bytes:
        """The partial last line fed so far (waiting for its newline)."""
        return self._cutter.pending

    def feed_folding(
        self, block: bytes, text: str, rest: bytes, tracker: ProgressTracker
    ) -> Exception | None:
        """Bytes just written to the log, already cut and decoded by the pump: `block` the
        complete lines that end with them (what was `pending` first), `text` the same decoded
        without the last newline, `rest` the partial line after them. The tracker is fed the
        lines in the same pass as they are rendered (`ReadableStream.render_folding`); the first
        exception it raised on a line, else None."""
        self._cutter.pending = rest
        if self.failure:
            return tracker.feed_lines(text.split("\n"))
        if readable_as_is(block, text):
            error = self._stream.fold_lines(block, text, tracker, as_is=True)
            self._take(block, None)
            return error
        rendered, error = self._stream.render_folding(block, text, tracker)
        self._take(block, rendered)
        return error

    def close(self) -> None:
        """The log ended: its last line (without a newline) too, and the last record."""
        if self.failure:
            return
        rest = self._cutter.rest()
        if rest:
            self._take(rest, self._stream.render_lines(rest + b"\n"))
        self._record()

    def _take(self, lines: bytes, rendered: bytes | None) -> None:
        """Complete lines of the log; `rendered` their readable form, None if they are it."""
        try:
            if rendered is None:
                if self._source == IN_READABLE:
                    self._append(lines)
                    self._plain_run += len(lines)
            else:
                if self._source == IN_LOG:
                    self._record()
                    self._source = IN_READABLE
                    self._start_offset = self._readable_size
                self._append(rendered)
                self._plain_run = 0
            self._raw += len(lines)
            if self._source == IN_READABLE and self._plain_run >= self._settle:
                self._record()
                self._source = IN_LOG
                self._start_offset = self._raw
            elif self._raw - self._start_raw >= self._record_every:
                self._record()
        except OSError as error:
            self.failure = f"{errno.errorcode.get(error.errno or 0, 'OSError')}: {error.strerror}"

    def _append(self, data: bytes) -> None:
        _write_all(self._readable_fd, data)
        self._readable_size += len(data)

    def _record(self) -> None:
        """Write the open stretch's record; the next stretch starts where it ended."""
        if self._raw == self._start_raw:
            return
        if self._source == IN_LOG:
            length = self._raw - self._start_raw
        else:
            length = self._readable_size - self._start_offset
        _write_all(
            self._map_fd,
            RECORD.pack(self._source, self._start_raw, self._raw, self._start_offset, length),
        )
        self._start_raw = self._raw
        self._start_offset = self._raw if self._source == IN_LOG else self._readable_size


def read_stretches(map_path: Path, log_size: int, readable_size: int) -> list[Stretch]:
    """The map's records that can be trusted: in order, each pointing at bytes that exist."""
    try:
        data = map_path.read_bytes()
    except OSError:
        return []
    stretches: list[Stretch] = []
    end = 0
    for fields in RECORD.iter_unpack(data[: len(data) - len(data) % RECORD.size]):
        stretch = Stretch(*fields)
        size = log_size if stretch.source == IN_LOG else readable_size
        if (
            stretch.source not in (IN_LOG, IN_READABLE)
            or stretch.raw_start < end
            or stretch.raw_end > log_size
            or stretch.offset + stretch.length > size
        ):
            break  # torn, or not this log's: render from here on
        stretches.append(stretch)
        end = stretch.raw_end
    return stretches


def copy_range(source_fd: int, out_fd: int, offset: int, length: int) -> None:
    """Copy bytes of a file to `out_fd` in the kernel (sendfile), by read and write if not."""
    while length > 0:
        try:
            sent = os.sendfile(out_fd, source_fd, offset, min(length, 1 << 30))
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            break
        if sent == 0:
            return  # the file is shorter than said (truncated meanwhile)
        offset += sent
        length -= sent
    while length > 0:
        chunk = os.pread(source_fd, min(length, BLOCK), offset)
        if not chunk:
            return
        _write_all(out_fd, chunk)
        offset += len(chunk)
        length -= len(chunk)


def _rendered(log_fd: int, start: int, end: int, stream: ReadableStream) -> Iterator[bytes]:
    """The readable form of the log's bytes [start, end) (whole lines), block by block."""
    offset = start
    while offset < end:
        data = os.pread(log_fd, min(BLOCK, end - offset), offset)
        if not data:
            break
        offset += len(data)
        out = stream.feed(data)
        if out:
            yield out
    out = stream.close()
    if out:
        yield out


def _learn_names(log_fd: int, end: int, stream: ReadableStream) -> None:
    """Teach `stream` the derivation names of the log's first `end` bytes (not rendered)."""
    lines = LineCutter()
    offset = 0
    while offset < end:
        data = os.pread(log_fd, min(BLOCK, end - offset), offset)
        if not data:
            break
        offset += len(data)
        found = lines.cut(data)
        if found is not None:
            stream.learn_names(found[0])


def copy_log(log_path: Path, out_fd: int) -> None:
    """Write a build's log as it is (`--raw`) to `out_fd`; a missing log writes nothing."""
    try:
        log_fd = os.open(log_path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        copy_range(log_fd, out_fd, 0, os.fstat(log_fd).st_size)
    finally:
        os.close(log_fd)


def copy_readable(log_path: Path, out_fd: int) -> None:
    """Write the readable form of a build's log to `out_fd`: mapped stretches copied, the rest
    rendered. A missing log writes nothing."""
    readable_path, map_path = readable_paths(log_path)
    try:
        log_fd = os.open(log_path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    readable_fd = -1
    try:
        log_size = os.fstat(log_fd).st_size
        with contextlib.suppress(OSError):
            readable_fd = os.open(readable_path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        readable_size = os.fstat(readable_fd).st_size if readable_fd >= 0 else 0
        stretches = read_stretches(map_path, log_size, readable_size) if readable_fd >= 0 else []
        position = 0
        for stretch in stretches:
            if stretch.raw_start > position:
                _render_hole(log_fd, position, stretch.raw_start, out_fd)
            source = log_fd if stretch.source == IN_LOG else readable_fd
            copy_range(source, out_fd, stretch.offset, stretch.length)
            position = stretch.raw_end
        if position < log_size:
            _render_hole(log_fd, position, log_size, out_fd)
    finally:
        os.close(log_fd)
        if readable_fd >= 0:
            os.close(readable_fd)


def _render_hole(log_fd: int, start: int, end: int, out_fd: int) -> None:
    stream = ReadableStream()
    if start:
        _learn_names(log_fd, start, stream)
    for block in _rendered(log_fd, start, end, stream):
        _write_all(out_fd, block)
