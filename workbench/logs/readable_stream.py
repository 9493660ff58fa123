"""`workbench logs` (the readable form) as a stream: constant memory, plain output at copy speed.

The readable form of a line is what `nix build -L` would print (a builder's line as
`name> text`, Nix's bookkeeping left out) with terminal rewrites resolved and every control
character made visible (`progress.visible`). Most lines of a plain build's log (ninja, make, cmake)
are already that: a block of lines with no `@nix ` event, no control byte and valid UTF-8 is
written as it is, checked by three passes in C. Only other blocks go line by line. The file is
read in blocks of `BLOCK` bytes, so memory does not grow with the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C scanner json uses, not in typeshed's stub
from typing import BinaryIO

from workbench.progress import ProgressTracker
from workbench.progress.visible import terminal_text, visible

BLOCK = 1 << 20
# A line longer than this without a newline is shown in pieces (memory stays bounded).
MAX_LINE = 8 * BLOCK
# Results never name a derivation; every other event may (a start, in whatever key order).
_RESULT_EVENT = '@nix {"action":"result"'
# Bytes that make a block need the line-by-line path: C0 controls but tab and newline, and DEL
# (mapped to 0 by this table, all else to 1: translate and find run in C at memory speed, where
# a regex search is ten times slower), and UTF-8's encoding of the C1 controls.
_CONTROL_TABLE = bytes(
    0 if (i < 0x20 and i not in (0x09, 0x0A)) or i == 0x7F else 1 for i in range(256)
)
_C1 = re.compile(rb"\xc2[\x80-\x9f]")
# A builder's log line as Nix writes it (sorted keys): '@nix {"action":"result","fields":
# ["TEXT"],"id":N,"type":101}'. Without a backslash in the line, TEXT ends at the next quote.
_LOG_LINE_PREFIX = '@nix {"action":"result","fields":["'
_TEXT_AT = len(_LOG_LINE_PREFIX)
_TEXT_END = '"],"id":'
_TYPE_101 = ',"type":101}'


def _no_controls(block: bytes) -> bool:
    """No control character (but tab and newline) or C1 control in the block: every plain line
    is its readable form as it stands, and so is a builder line's text without a JSON escape."""
    if block.translate(_CONTROL_TABLE).find(0) >= 0:
        return False
    return block.isascii() or b"\xc2" not in block or _C1.search(block) is None


def readable_as_is(block: bytes) -> bool:
    """Whether complete lines are already their own readable form (no event, no control)."""
    if b"@nix " in block or block.translate(_CONTROL_TABLE).find(0) >= 0:
        return False
    if block.isascii():
        return True
    if b"\xc2" in block and _C1.search(block) is not None:
        return False
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class LineCutter:
    """Cuts a byte stream into blocks of complete lines; a partial last line waits for the
    rest, up to MAX_LINE bytes, past which it is given as it is (a runaway line)."""

    def __init__(self) -> None:
        self.pending = b""

    def cut(self, data: bytes) -> tuple[bytes, bool] | None:
        """(complete lines, or a runaway line without its newline; whether runaway), or None
        while only a partial line has come."""
        if self.pending:
            data = self.pending + data
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) <= MAX_LINE:
                self.pending = data
                return None
            self.pending = b""
            return data, True
        self.pending = data[cut + 1 :]
        return data[: cut + 1], False

    def rest(self) -> bytes:
        """The partial last line, taken (the stream ended without its newline)."""
        rest, self.pending = self.pending, b""
        return rest


class ReadableStream:
    """Turns a log's bytes, block by block, into the readable form (UTF-8 bytes)."""

    def __init__(self) -> None:
        # Only for the derivation names of builder lines: fed the `start` events alone.
        self._names = ProgressTracker()
        self._prefixes: dict[str, str] = {}  # derivation name → "name> ", shown (made visible)
        self._cutter = LineCutter()

    def feed(self, data: bytes) -> bytes:
        """Readable bytes for the complete lines of `data` (a partial last line waits)."""
        found = self._cutter.cut(data)
        if found is None:
            return b""
        block, runaway = found
        # A runaway line: show what there is as one line.
        return self.render(block + b"\n" if runaway else block)

    def close(self) -> bytes:
        """The last line when the log does not end with a newline."""
        rest = self._cutter.rest()
        return self.render(rest + b"\n") if rest else b""

    def render(self, block: bytes) -> bytes:
        """Complete lines (ending with a newline) → their readable form."""
        if readable_as_is(block):
            return block  # the copy-speed path
        return self.render_lines(block)

    def render_lines(self, block: bytes) -> bytes:
        """Complete lines known not to be readable as they are → their readable form."""
        text = block.decode("utf-8", "replace")
        return self._plain_lines(text) if _no_controls(block) else self._lines(text)

    def learn_names(self, block: bytes) -> None:
        """Fold in the `start` events of lines whose readable form is not wanted (skipped)."""
        if b"@nix " not in block:
            return
        for line in block.decode("utf-8", "replace").split("\n"):
            if line.startswith("@nix ") and not line.startswith(_RESULT_EVENT):
                self._names.feed(line)

    def _plain_lines(self, text: str) -> bytes:
        """`_lines` for a block without control characters (`_no_controls`): a plain line is
        itself, a builder's line is cut out of its JSON by position (decoded by JSON's scanner
        only where it holds an escape); other events as in `_lines`. The same bytes as `_lines`
        (tests/logs compare them), without a second tracker pass over every builder line."""
        names = self._names
        by_activity = names.activity_names
        prefixes = self._prefixes
        shown: list[str] = []
        append = shown.append
        for line in text.split("\n")[:-1]:
            if not line.startswith("@nix "):
                append(line)
                continue
            if line.startswith(_LOG_LINE_PREFIX) and line.endswith(_TYPE_101):
                if "\\" in line:  # an escape: JSON's own scanner decodes the text
                    try:
                        words, end = scanstring(line, _TEXT_AT)
                    except ValueError:
                        end = -1
                    end -= 1  # the closing quote
                    words = terminal_text(words) if end >= 0 else ""
                else:
                    end = line.find('"', _TEXT_AT)
                    words = line[_TEXT_AT:end]
                if end >= 0 and line.startswith(_TEXT_END, end):
                    source = by_activity.get(line[end + len(_TEXT_END) : -len(_TYPE_101)])
                    if source is None:
                        append(words)
                        continue
                    prefix = prefixes.get(source)
                    if prefix is None:
                        prefix = prefixes[source] = f"{visible(source)}> "
                    append(prefix + words)
                    continue
            if not line.startswith(_RESULT_EVENT):
                names.feed(line)
            rendered = names.render_line(line)
            if rendered is not None:
                append(rendered)
        if not shown:
            return b""
        shown.append("")
        return "\n".join(shown).encode("utf-8", "replace")

    def _lines(self, text: str) -> bytes:
        names = self._names
        shown: list[str] = []
        append = shown.append
        for line in text.split("\n")[:-1]:
            if line.startswith("@nix "):
                if not line.startswith(_RESULT_EVENT):
                    names.feed(line)  # learns which activity builds which derivation
                rendered = names.render_line(line)
                if rendered is not None:
                    append(rendered)
            else:
                append(terminal_text(line.rstrip("\r")))
        if not shown:
            return b""
        shown.append("")
        return "\n".join(shown).encode("utf-8", "replace")


def readable_blocks(source: BinaryIO, block: int = BLOCK) -> Iterator[bytes]:
    """The readable form of everything `source` holds, as UTF-8 blocks."""
    stream = ReadableStream()
    while data := source.read(block):
        out = stream.feed(data)
        if out:
            yield out
    out = stream.close()
    if out:
        yield out
