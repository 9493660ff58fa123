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
from io import BytesIO
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C scanner json uses, not in typeshed's stub
from typing import BinaryIO

from workbench.progress import ProgressTracker
from workbench.progress.nix_log import ACT_BUILDS, ACT_COPY_PATHS
from workbench.progress.visible import terminal_text, visible

BLOCK = 1 << 20
# A line longer than this without a newline is shown in pieces (memory stays bounded).
MAX_LINE = 8 * BLOCK
# Results never name a derivation; every other event may (a start, in whatever key order).
_RESULT_EVENT = '@nix {"action":"result"'
# Bytes that make a block need the line-by-line path: C0 controls but tab and newline, and DEL
# (each looked for by `in` with an int, memchr in C: 31 of them cost half of one translate of
# the block through a table, the fastest of the other passes in C; a regex search is ten times
# slower), and UTF-8's encoding of the C1 controls.
_CONTROL_BYTES = tuple(i for i in (*range(0x20), 0x7F) if i not in (0x09, 0x0A))
_C1 = re.compile(rb"\xc2[\x80-\x9f]")
_C2 = 0xC2  # (the first byte of C1's UTF-8, an int needle: `in` with bytes raises inside first)
_TAB = ord("\t")
# A builder's log line as Nix writes it (sorted keys): '@nix {"action":"result","fields":
# ["TEXT"],"id":N,"type":101}'. Without a backslash in the line, TEXT ends at the next quote.
_LOG_LINE_PREFIX = '@nix {"action":"result","fields":["'
_TEXT_AT = len(_LOG_LINE_PREFIX)
_TEXT_END = '"],"id":'
_TYPE_101 = ',"type":101}'
_ID_AT = len(_TEXT_END)
# The first characters of a builder's TEXT (raw, without an escape) or a plain line that the
# tracker folds (tracker.py's _SPECIAL_FIRST less the control characters, absent here) ...
_SPECIAL_FIRST = frozenset("[FmR")
# ... and of TEXT as JSON writes it (an escape may be any of them).
_SPECIAL_JSON_FIRST = frozenset("[FmR\\\r\x1b")
_ID_KEY = '],"id":'
_ID_KEY_LENGTH = len(_ID_KEY)
_ID_END = -len(_TYPE_101)

# A result whose fields hold no string (progress counts, 105): never shown, whatever its type.
_PROGRESS_COUNTS = re.compile(
    r'@nix \{"action":"result","fields":\[[-+0-9.eE, ]*\],"id":\d+,"type":\d+\}'
)
_RESULT_PREFIX = '@nix {"action":"result","fields":['
_RESULT_AT = len(_RESULT_PREFIX)
_NUMBERS = "-+0123456789.eE, "  # what the pattern's fields may hold
_TYPE_105 = ',"type":105}'
# the activities whose progress counts the tracker keeps
_KEPT_COUNTS = frozenset((ACT_BUILDS, ACT_COPY_PATHS))
# The same as UTF-8, for the shared pass over a block's bytes (`render_folding`).
_LOG_LINE_PREFIX_BYTES = _LOG_LINE_PREFIX.encode()
_TEXT_END_BYTES = _TEXT_END.encode()
_TYPE_101_BYTES = _TYPE_101.encode()
_TYPE_105_BYTES = _TYPE_105.encode()
_RESULT_PREFIX_BYTES = _RESULT_PREFIX.encode()
_ID_KEY_BYTES = _ID_KEY.encode()
_NUMBERS_BYTES = _NUMBERS.encode()
# (an int needle: `in` tests bytes by memchr; a bytes needle goes through an exception first)
_QUOTE = ord('"')
_BACKSLASH = ord("\\")
_BRACKET = ord("[")
_SPECIAL_FIRST_BYTES = frozenset(map(ord, _SPECIAL_FIRST))  # a line's first byte, an int
_SPECIAL_JSON_FIRST_BYTES = frozenset(map(ord, _SPECIAL_JSON_FIRST))
# The shared pass's lines keep their newline (`BytesIO.readlines`): what it cuts by, as kept
# slice objects (a slice built for each line costs as much as the test).
_TYPE_101_LINE = _TYPE_101_BYTES + b"\n"
_TYPE_105_LINE = _TYPE_105_BYTES + b"\n"
_ID_LINE_END = -len(_TYPE_101_LINE)
_HEAD_AT = slice(_TEXT_AT)
_RESULT_AT_SLICE = slice(_RESULT_AT)
_NIX_BYTES = b"@nix "
_NIX_AT = slice(len(_NIX_BYTES))
_NOTHING = slice(0, 0)
# What no line ends with (each ends with one newline): the tail of no id.
_NO_TAIL = b"\n\n"
# Escaped TEXTs decoded are kept (the same warning comes again and again) up to this many, each
# at most this long.
_UNESCAPED_KEPT = 1024
_UNESCAPED_LENGTH = 1024
_NEWLINE = b"\n"
_AT = ord("@")
_CLOSE = ord("]")
_PERCENT = ord("%")
_NEWLINE_BYTE = ord("\n")


def _plain_text_end(line: str, tabs: bool) -> int:
    """Where TEXT ends in a builder line `@nix {"action":"result","fields":["TEXT"],"id":N,
    "type":101}` whose TEXT can be taken as it stands (no escape, no raw tab: JSON refuses a
    raw tab), else 0. `tabs`: whether the block holds a tab at all (most hold none)."""
    end = line.find('"', _TEXT_AT)
    if (
        line.startswith(_TEXT_END, end)
        and line.endswith(_TYPE_101)
        and "\\" not in line
        and not (tabs and "\t" in line[_TEXT_AT:end])
    ):
        return end
    return 0


def _utf8(text: str) -> bytes:
    """`text` as UTF-8, a lone surrogate (JSON may write one) as "?"."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _no_controls(block: bytes) -> bool:
    """No control character (but tab and newline) or C1 control in the block: every plain line
    is its readable form as it stands, and so is a builder line's text without a JSON escape."""
    if _has_control(block):
        return False
    return block.isascii() or _C2 not in block or _C1.search(block) is None


def _pass_takes(block: bytes, text: str, tracker: ProgressTracker) -> bool:
    """Whether the shared pass (`ReadableStream.render_folding`) can take a block: not with a
    custom NINJA_STATUS (any line may be progress), a tab (JSON refuses a raw one in TEXT),
    bytes that are not UTF-8 (or a U+FFFD: the same to the decoder) or a control character."""
    return not (
        tracker.folds_every_line or _TAB in block or "\ufffd" in text or not _no_controls(block)
    )


def _has_control(block: bytes) -> bool:
    """Whether the block holds a C0 control byte but tab and newline, or DEL."""
    # (a loop: any() over a generator or a map of `block.__contains__` costs more a byte)
    for byte in _CONTROL_BYTES:  # noqa: SIM110
        if byte in block:
            return True
    return False


def readable_as_is(block: bytes, decoded: str | None = None) -> bool:
    """Whether complete lines are already their own readable form (no event, no control).

    `decoded`: the block as the caller already decoded it (UTF-8, errors replaced), if it has:
    without a replacement character in it the block is valid UTF-8, not decoded again."""
    if block.find(b"@nix ") >= 0 or _has_control(block):
        return False
    if block.isascii():
        return True
    if _C2 in block and _C1.search(block) is not None:
        return False
    if decoded is not None and "\ufffd" not in decoded:
        return True
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


class _Prefixes(dict[str, str]):
    """Activity id digits → "name> " for its builder lines ("" for an id without a name, not
    kept: the name may come with a later start event)."""

    def __init__(self, names: dict[str, str]) -> None:
        super().__init__()
        self._names = names  # the name tracker's own dict: id digits → derivation name

    def __missing__(self, activity: str) -> str:
        source = self._names.get(activity)
        if source is None:
            return ""
        prefix = self[activity] = f"{visible(source)}> "
        return prefix


class ReadableStream:
    """Turns a log's bytes, block by block, into the readable form (UTF-8 bytes)."""

    def __init__(self) -> None:
        # Only for the derivation names of builder lines: fed the `start` events alone.
        self._names = ProgressTracker()
        self._cutter = LineCutter()
        self._by_id = _Prefixes(self._names.activity_names)
        # escaped TEXT of a builder line (its JSON bytes) -> (decoded, as UTF-8, whether it is
        # not printable): `render_folding`
        self._unescaped: dict[bytes, tuple[str, bytes, bool]] = {}

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
                self._learn(line)

    def _plain_lines(self, text: str) -> bytes:
        """`_lines` for a block without control characters (`_no_controls`): a plain line is
        itself, a builder's line is cut out of its JSON by position (decoded by JSON's scanner
        only where it holds an escape), progress counts are dropped by one pattern; other events
        as in `_lines`. The same bytes as `_lines` (tests/logs compare them), without a second
        tracker pass over every builder line."""
        prefixes = self._by_id
        tabs = "\t" in text
        shown: list[str] = []
        append = shown.append
        for line in text[:-1].split("\n"):
            if not line.startswith("@nix "):
                append(line)
                continue
            if line.startswith(_LOG_LINE_PREFIX):
                end = _plain_text_end(line, tabs)
                if end:
                    append(prefixes[line[end + _ID_AT : _ID_END]] + line[_TEXT_AT:end])
                    continue
            elif _PROGRESS_COUNTS.fullmatch(line) is not None:
                continue  # a result without a string: never shown
            rendered = self._event_line(line)
            if rendered is not None:
                append(rendered)
        if not shown:
            return b""
        shown.append("")
        return "\n".join(shown).encode("utf-8", "replace")

    def render_folding(
        self, block: bytes, text: str, tracker: ProgressTracker
    ) -> tuple[bytes, Exception | None]:
        """The readable form of complete lines and, in the same pass, `tracker.feed` of each:
        (rendered bytes, the first exception the tracker raised on a line, else None).

        The supervisor's pump with the readable map on (issue 23 item 4: one parse per line,
        shared). `block` is the lines' bytes (each with its newline), `text` the same decoded
        (UTF-8, errors replaced) without the last newline. The pass works on the block's bytes,
        cut into lines once (by `BytesIO.readlines`, memchr, each line keeping its newline): a
        builder's line is cut once, its TEXT and id serving both sides; the readable form is
        "name> TEXT", written as the bytes it was cut from (valid UTF-8: no decode and encode
        of it); a line is decoded only where the tracker parses it (a failure, a phase, an
        error, make's percentage, an event: the lines that `ProgressTracker.feed_lines` hands
        to `fold`) or JSON's scanner decodes its TEXT (an escape). Ninja's status lines are kept
        unparsed for the tracker (as bytes, decoded when parsed) and the rest counted, as
        `feed_lines` does. Progress counts (105) are never shown and, for an activity whose
        counts are not kept, folded to nothing. The same bytes as `render_lines` and the same
        tracker as `feed` line by line (tests/logs compare them). A tracker that raises on a
        line is bypassed for that line, as the pump did.

        What a line costs is its operations, each a few hundred instructions in CPython
        (benchmarks/history_store.py --instructions, valgrind): a slice or a method call
        (arguments parsed) costs more than a test of one byte; `in` with a bytes needle goes
        through a raised and cleared TypeError (~2,500 instructions: `find` instead); an int
        needle is memchr. So what a builder's line of the id seen last shares with the one
        before (its tail '"],"id":N,"type":101}', its "name> ", its derivation) is kept, and
        such a line is cut by two calls that make one object each (`removesuffix` of the tail,
        `removeprefix` of the head: TEXT, where slicing both ends and comparing them made three
        objects and cost twice as much); an escaped TEXT seen before (a warning repeated) is
        taken as JSON's scanner decoded it then; what holds for the whole block is tested
        once: whether any byte could make a "[" line make's percentage ('%') or an error
        ("rror"). Whole-block passes in C cost too (~3 instructions a byte for a substring
        search or a regular expression's ~60, ~8 for bytes.split and bytes.count of one byte,
        against ~0.1 for memchr), so the lines are cut by readlines and each test kept to the
        lines it is about."""
        if not _pass_takes(block, text, tracker):
            return self.render_lines(block), tracker.feed_lines(text.split("\n"))  # each alone
        return self._render_folding(block, tracker)

    def fold_lines(
        self, block: bytes, text: str, tracker: ProgressTracker, *, as_is: bool = False
    ) -> Exception | None:
        """`tracker.feed_lines` of complete lines (`block` and `text` as for `render_folding`)
        by `render_folding`'s pass, its readable text left unused: the pump with the readable
        map off (a supervisor that adopted a build), and with it on for lines that are their
        own readable form (`as_is`: the caller found them so, `readable_as_is`: only what else
        the pass needs is tested). The pass costs about two thirds of `feed_lines`'s split into
        str lines and tests on them on a Nix log, and half on a plain one (issue 23 item 4); a
        block the pass does not take goes to `feed_lines`. The first exception the tracker
        raised on a line, else None."""
        if as_is:
            takes = not (tracker.folds_every_line or _TAB in block)
        else:
            takes = _pass_takes(block, text, tracker)
        if not takes:
            return tracker.feed_lines(text.split("\n"))
        return self._render_folding(block, tracker)[1]

    def _render_folding(
        self, block: bytes, tracker: ProgressTracker
    ) -> tuple[bytes, Exception | None]:
        """`render_folding`'s pass, for a block it takes (`_pass_takes`)."""
        error: Exception | None = None
        by_id = self._by_id
        unescaped = self._unescaped
        steps, running, types = tracker.block_hooks()
        fold_after = tracker.fold_after
        fold_builder = tracker.fold_builder
        known = tracker.knows_tool_error
        shown: list[bytes] = []
        append = shown.append
        last: bytes | None = None  # the latest line the tracker was not handed (a person reads)
        # Of the builder id seen last: its tail '"],"id":N,"type":101}\n' (_NO_TAIL: none yet,
        # or an event was folded since, which may have named or started an id), the slice of
        # a line that is its TEXT with its closing quote, the id's digits, its "name> " (UTF-8)
        # and its running derivation.
        tail = _NO_TAIL
        quoted_at = _NOTHING
        activity = ""
        prefix = b""
        drv = None
        # the tail '],"id":N,"type":105}\n' of the progress counts (105) seen last of an
        # activity whose counts are not kept
        counts_tail = _NO_TAIL
        # whether any line may read as an error (most blocks of a clean build: none, and the
        # test per line is left out) ...
        errors = not known and block.find(b"rror") >= 0
        # ... and whether every "[" line is a ninja status to keep unparsed (no '%': none is
        # make's percentage; no "rror": none is an error to fold)
        statuses = _PERCENT not in block and not errors
        # where in `shown` the TEXTs JSON's scanner decoded that may hold a control are, and
        # those TEXTs
        decoded_at: list[int] = []
        decoded_texts: list[str] = []
        # (the module's constants the loop reads on every line, as locals)
        head_at, head, text_at = _HEAD_AT, _LOG_LINE_PREFIX_BYTES, _TEXT_AT
        quote, backslash, newline = _QUOTE, _BACKSLASH, _NEWLINE
        special, bracket, at, nix_at, nix_bytes = (
            _SPECIAL_FIRST_BYTES,
            _BRACKET,
            _AT,
            _NIX_AT,
            _NIX_BYTES,
        )
        # a builder's TEXT to fold, as JSON decodes it (None: fold the line as it is)
        folded: str | None = None
        lines = BytesIO(block).readlines()
        for line in lines:
            # (a line keeps its newline; `removesuffix` and `removeprefix` cut a line by what
            # it ends and starts with in one call each, where a slice and a comparison cost
            # two operations and an object more)
            rest = line.removesuffix(tail)
            tailed = rest != line
            if not tailed:
                first = line[0]
                if first != at:
                    headed = False
                elif (
                    (counted := line.removesuffix(counts_tail)) != line
                    and (numbers := counted.removeprefix(_RESULT_PREFIX_BYTES)) != counted
                    and not numbers.strip(_NUMBERS_BYTES)
                ):
                    continue  # the progress counts of the activity seen last: nothing to fold
                elif headed := line[head_at] == head:
                    # a builder line of another id than the one seen last (or the first since
                    # an event): its tail, from the last '"],"id":' (what lies before it is
                    # TEXT if it has no quote, or if JSON's scanner ends a string there)
                    end = line.rfind(_TEXT_END_BYTES, text_at)
                    if end >= 0 and line.endswith(_TYPE_101_LINE):
                        tail = line[end:]
                        quoted_at = slice(text_at, end - len(line) + 1)
                        activity = line[end + _ID_AT : _ID_LINE_END].decode()
                        prefix = by_id[activity].encode("utf-8", "replace")
                        drv = running(activity)
                        rest = line[:end]
                        tailed = True
            if tailed and (words := rest.removeprefix(head)) != rest:
                # a builder line of the id seen last: TEXT is what lies between the two
                if quote not in words and backslash not in words:
                    # TEXT as it stands: the common line
                    append(prefix)
                    append(words)
                    append(newline)
                    first = line[text_at]  # (the tail's quote if TEXT is empty)
                    if first not in special:
                        last = line
                        continue
                    if first == bracket and (
                        statuses
                        or (
                            words[4:6] != b"%]"
                            and words[:6].isascii()  # (else the 5th character need not be
                            # byte 5)
                            and (known or not errors or words.find(b"rror") < 0)
                        )
                    ):
                        steps((words, drv))  # ninja's status: kept unparsed
                        last = line
                        continue
                    folded, digits = words.decode(), activity  # (folded below)
                    builder = False
                else:
                    # TEXT holds an escape (or a quote): JSON's scanner decodes it once, as
                    # the whole of a string (its closing quote the tail's first byte); the same
                    # TEXT again (a warning repeated) is taken from what it gave
                    found = unescaped.get(words)
                    if found is None:
                        decoded = line[quoted_at].decode()
                        try:
                            words_text, end = scanstring(decoded, 0)
                        except ValueError:
                            end = -1
                        same = end == len(decoded)
                        if same:
                            shown_text = _utf8(words_text)
                            control = not words_text.isprintable()
                            if len(words) <= _UNESCAPED_LENGTH:
                                if len(unescaped) >= _UNESCAPED_KEPT:
                                    unescaped.clear()
                                unescaped[words] = words_text, shown_text, control
                    else:
                        words_text, shown_text, control = found
                        same = True
                    shown_prefix, digits = prefix, activity
                    builder = True
            else:
                if tailed:  # the tail of the id seen last, not its head
                    first = line[0]
                    headed = first == at and line[head_at] == head
                builder = False
                if first != at or line[nix_at] != nix_bytes:
                    append(line)
                    if first not in special:
                        if known or not errors or line.find(b"rror") < 0:
                            last = line
                            continue
                    elif first == bracket and (
                        statuses
                        or (
                            line[4:6] != b"%]"
                            and line[:6].isascii()  # as above
                            and (known or not errors or line.find(b"rror") < 0)
                        )
                    ):
                        steps((line[:-1], None))  # ninja's status: kept unparsed
                        last = line
                        continue
                    decoded = line[:-1].decode()
                elif headed:
                    builder = True
                    same = False
                elif (
                    line.endswith(_TYPE_105_LINE) and line[_RESULT_AT_SLICE] == _RESULT_PREFIX_BYTES
                ):
                    # Nix's progress counts ('...fields":[2,9,1,0],"id":N,"type":105}'): never
                    # shown, and folded to nothing but for a Builds or CopyPaths activity (as
                    # `ProgressTracker._progress` folds them); by a few tests on its bytes, the
                    # pattern and the tracker's JSON decoder only for other shapes
                    close = line.find(_CLOSE, _RESULT_AT)
                    digits_bytes = line[close + _ID_KEY_LENGTH : _ID_LINE_END]
                    if (
                        line.startswith(_ID_KEY_BYTES, close)
                        and digits_bytes.isdigit()  # ASCII digits only, for bytes
                        and not line[_RESULT_AT:close].strip(_NUMBERS_BYTES)
                    ):
                        if types.get(int(digits_bytes)) not in _KEPT_COUNTS:
                            # (the next counts of this activity: by their tail alone, above)
                            counts_tail = line[close:]
                            continue
                        decoded = line[:-1].decode()
                    else:
                        decoded = line[:-1].decode()
                        if _PROGRESS_COUNTS.fullmatch(decoded) is None:
                            rendered = self._event_line(decoded)
                            tail = counts_tail = _NO_TAIL  # a start may have named an id again
                            if rendered is not None:
                                append(rendered.encode("utf-8", "replace"))
                                append(_NEWLINE)
                else:
                    decoded = line[:-1].decode()
                    if _PROGRESS_COUNTS.fullmatch(decoded) is None:  # counts are never shown
                        rendered = self._event_line(decoded)
                        tail = counts_tail = _NO_TAIL  # a start may have named an id again
                        if rendered is not None:
                            append(rendered.encode("utf-8", "replace"))
                            append(_NEWLINE)
            if builder:
                if not same:
                    decoded = line[:-1].decode()
                    if line.endswith(_TYPE_101_LINE):
                        # an escape, the TEXT of any id: JSON's scanner decodes TEXT once
                        try:
                            words_text, end = scanstring(decoded, _TEXT_AT)
                        except ValueError:
                            end = -1
                        if end >= 0 and decoded.startswith(_ID_KEY, end):
                            digits = decoded[end + _ID_KEY_LENGTH : _ID_END]
                            shown_prefix = by_id[digits].encode("utf-8", "replace")
                            shown_text = _utf8(words_text)
                            control = same = True
                if same:
                    # TEXT decoded (of the id seen last or of any id): shown visible, folded
                    # if its first character (as JSON writes it) may be progress
                    # (shown as decoded, made visible at the end if any has a control)
                    append(shown_prefix)
                    if control:
                        decoded_at.append(len(shown))
                        decoded_texts.append(words_text)
                    append(shown_text)
                    append(newline)
                    if line[text_at] not in _SPECIAL_JSON_FIRST_BYTES:
                        last = line
                        continue
                    folded = words_text
                else:
                    rendered = self._event_line(decoded)
                    tail = counts_tail = _NO_TAIL  # a start may have named an id again
                    if rendered is not None:
                        append(rendered.encode("utf-8", "replace"))
                        append(_NEWLINE)
            # The tracker folds the line: a builder's TEXT that may be progress (`folded`, as
            # JSON decodes it, of the id `digits`), or any other line as it is (`decoded`).
            try:
                if folded is None:
                    fold_after(None if last is None else last[:-1].decode(), decoded)
                else:
                    fold_builder(
                        None if last is None else last[:-1].decode(),
                        line[:-1].decode(),
                        folded,
                        digits,
                    )
            except Exception as raised:  # a parser bug must not stop the pump
                error = error or raised
            last = folded = None
            known = tracker.knows_tool_error
        nix = block.startswith(b"@nix ") or block.find(b"\n@nix ") >= 0
        tracker.end_block(len(lines), None if last is None else last[:-1].decode(), nix)
        if decoded_at:
            # A decoded TEXT may hold a control character (an escape: \u001b, \r, \n): then
            # each that does is shown as `terminal_text` shows it. One test over all of them.
            shown_texts = b"".join([shown[index] for index in decoded_at])
            if _NEWLINE_BYTE in shown_texts or not _no_controls(shown_texts):
                for index, words_text in zip(decoded_at, decoded_texts, strict=True):
                    if not words_text.isprintable():
                        shown[index] = terminal_text(words_text).encode("utf-8", "replace")
        return b"".join(shown), error

    def _learn(self, line: str) -> None:
        """Fold an event other than a result into the names (a start may name an activity, or
        name it again: the "name> " kept per id goes)."""
        self._names.feed(line)
        self._by_id.clear()

    def _event_line(self, line: str) -> str | None:
        """One `@nix` line as `_lines` shows it, a builder's line cut out of its JSON by
        position (the block holds no control character)."""
        names = self._names
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
                if "\t" in words:
                    end = -1  # a raw tab: JSON's scanner refuses the line, as `_lines` does
            if end >= 0 and line.startswith(_TEXT_END, end):
                return self._by_id[line[end + _ID_AT : _ID_END]] + words
        if not line.startswith(_RESULT_EVENT):
            self._learn(line)
        return names.render_line(line)

    def _lines(self, text: str) -> bytes:
        names = self._names
        shown: list[str] = []
        append = shown.append
        for line in text.split("\n")[:-1]:
            if line.startswith("@nix "):
                if not line.startswith(_RESULT_EVENT):
                    self._learn(line)  # which activity builds which derivation
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
