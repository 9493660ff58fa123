"""Folds a build's log lines, Nix internal-json or plain, into a `Progress` snapshot.

The supervisor calls `ProgressTracker.feed(line)` for every line the build writes (stdout and
stderr, decoded as UTF-8 with errors="replace"), and `snapshot()` whenever it wants the state,
for example once a second. Folding and showing are apart: `feed` only folds, and `render(line)`
turns one line into what a person reads (a builder's line with its derivation's name, as
`nix build -L` shows it; None for Nix's bookkeeping events). A log view renders only the lines
on screen, so the pipeline's cost per line is the fold alone.

`feed` is the hot path. Nix writes a builder's log line (most of a Nix build's log) as
'@nix {"action":"result","fields":["TEXT"],"id":N,"type":101}' with sorted keys; unless TEXT
can be progress, a failure or a phase (its first character tells), the line is folded by a
few string tests and no JSON is decoded. Plain lines cost the same few tests.

The tracker is not thread-safe: feed and snapshot from one thread, or hold a lock around both.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C scanner json uses, not in typeshed's stub
from operator import itemgetter
from typing import Any, TypeGuard

from workbench.progress import nix_log
from workbench.progress.nix_log import (
    ACT_BUILD,
    ACT_BUILDS,
    ACT_COPY_PATHS,
    LVL_INFO,
    RES_BUILD_LOG_LINE,
    RES_POST_BUILD_LOG_LINE,
    RES_PROGRESS,
    RES_SET_EXPECTED,
    RES_SET_PHASE,
    derivation_name,
)
from workbench.progress.steps import (
    MAKE,
    MAX_DIGITS,
    NINJA,
    NinjaStatusParser,
    Step,
    bounded_int,
    clean_terminal_line,
    make_percent,
    ninja_counts,
)
from workbench.progress.visible import terminal_text, visible

# Nix writes JSON with sorted keys, so a builder's log line always starts like this; the fast
# path below reads the string with json's C scanner and never builds a dict for it.
_LOG_LINE_PREFIX = '@nix {"action":"result","fields":["'
_TEXT_AT = len(_LOG_LINE_PREFIX)  # where the string's characters start
_ID_KEY = '],"id":'
_ID_AT = len(_ID_KEY)
_TYPE_101 = ',"type":101}'
_TYPE_101_NEWLINE = _TYPE_101 + "\n"
_RESULT_PREFIX = '@nix {"action":"result","fields":['
_TYPE_105 = ',"type":105}'
_TYPE_105_NEWLINE = _TYPE_105 + "\n"
_RESULT_AT = len(_RESULT_PREFIX)
_KEPT_COUNTS = frozenset((ACT_BUILDS, ACT_COPY_PATHS))  # the progress counts kept
_TEXT_END = '"],"id":'
_TEXT_END_LENGTH = len(_TEXT_END)
_ID_END = -len(_TYPE_101)
# Only text starting with one of these can be progress, failures or phases ("\\" in JSON: an
# escape such as \u001b or \r, which must be decoded to know).
_SPECIAL_FIRST = frozenset("[\r\x1bFmR")
_SPECIAL_JSON_FIRST = _SPECIAL_FIRST | {"\\"}

_DRV_IN_QUOTES = re.compile(r"'(/nix/store/[^'\s]+\.drv)'")
_WILL_BE_BUILT = re.compile(
    r"^these (\d+) derivations will be built:|^this derivation will be built:"
)
_PHASE_LINE = "Running phase: "
_KEEP_FAILURES = 20
# The failure summary is one line; a compiler's can be a kilobyte of template names.
_KEEP_ERROR = 300
# Counts at or past this are not a build's (Nix's are far below): ignored, so that sums and the
# float division of a progress fraction never meet a number too large for them.
_COUNT_LIMIT = 10**MAX_DIGITS

_StepTuple = tuple[str, int, int, str]
# ninja status lines kept unparsed at most (then the latest is parsed): bounded memory.
_UNPARSED_STEPS = 1024


@dataclass(frozen=True, slots=True)
class DerivationState:
    """A derivation Nix is building now."""

    drv_path: str
    name: str
    phase: str | None
    """The stdenv phase ("configurePhase", "buildPhase", ...), None before the first one."""
    step: Step | None
    """The latest ninja/make progress in this derivation's log."""
    started: float
    """Epoch seconds when the tracker saw the build start."""


@dataclass(frozen=True, slots=True)
class FinishedDerivation:
    """A derivation whose build ended while the tracker watched."""

    drv_path: str
    name: str
    started: float
    ended: float
    failed: bool


@dataclass(frozen=True, slots=True)
class Progress:
    """What a build has done so far, as the log tells it."""

    planned: int
    """Derivations Nix will build in this run (0 for a build that is not Nix)."""
    running: int
    done: int
    failed: int
    derivations: tuple[DerivationState, ...]
    """The derivations being built now, oldest first."""
    failed_derivations: tuple[str, ...]
    """Names of the derivations whose builder failed."""
    step: Step | None
    """The latest ninja/make progress line anywhere in the log: a plain build's progress."""
    step_failures: tuple[str, ...]
    """The latest targets ninja ("FAILED: x.o") or make ("*** [...] Error 1") reported failed."""
    paths_copied: int
    """Store paths substituted/copied so far (CopyPaths progress)."""
    paths_to_copy: int
    lines: int
    """Lines fed so far."""
    last_line: str
    """The latest line a person would read, rendered ("name> text" for a builder's line)."""
    nix: bool
    """Whether any `@nix` line was seen, i.e. the derivation counts mean something."""
    first_error: str | None = None
    """The failure's summary: Nix's first `error:` message, else the first line that reads as
    a compiler's or build tool's error ("x.cc:3:1: error: ...", "CMake Error ...")."""


class _Running:
    __slots__ = ("drv_path", "name", "phase", "started", "step")

    def __init__(self, drv_path: str, started: float) -> None:
        self.drv_path = drv_path
        self.name = derivation_name(drv_path)
        self.phase: str | None = None
        self.step: _StepTuple | None = None
        self.started = started


class ProgressTracker:
    """Folds log lines into progress; see the module docstring for how the supervisor uses it."""

    def __init__(self, ninja_status: str | None = None, clock: Any = time.time) -> None:
        """`ninja_status`: the NINJA_STATUS the build runs with, if it is not ninja's default."""
        self._ninja = NinjaStatusParser(ninja_status) if ninja_status else None
        self._ninja_counts = self._ninja.counts if self._ninja else ninja_counts
        self._clock = clock
        self._types: dict[int, int] = {}
        self._running: dict[int, _Running] = {}
        self._builds: dict[int, tuple[int, int, int, int]] = {}
        self._copies: dict[int, tuple[int, int, int, int]] = {}
        self._finished: list[FinishedDerivation] = []
        self._failed_paths: dict[str, None] = {}
        self._planned_names: dict[str, None] = {}
        self._planned_said = 0
        self._collecting_plan = False
        self._step: _StepTuple | None = None
        # ninja status lines not parsed yet (text, its derivation): `_parse_steps`. The text
        # may be the line's UTF-8 bytes (the readable map's shared pass works on bytes).
        self._unparsed: list[tuple[str | bytes, _Running | None]] = []
        self._failures: deque[str] = deque(maxlen=_KEEP_FAILURES)
        self._nix_error: str | None = None
        self._tool_error: str | None = None
        self._nix = False
        self._running_text: dict[str, _Running] = {}  # the same, keyed by the id's digits
        self._names: dict[str, str] = {}  # every Build activity's id digits -> derivation name
        self._last = ""  # the latest line a person would read, as fed
        self.lines = 0
        """Lines fed so far."""

    # -- folding ----------------------------------------------------------------------------

    def feed(self, line: str) -> None:
        """Fold one line (with or without its newline) into the progress."""
        self.lines += 1
        self.fold(line)

    def fold(self, line: str) -> None:
        """`feed` for a line the caller counts (`end_block`): a block's pass that folds most
        lines itself hands the others to this."""
        if line.startswith("@nix "):
            self._nix = True
            if line.startswith(_LOG_LINE_PREFIX):
                if line[_TEXT_AT : _TEXT_AT + 1] not in _SPECIAL_JSON_FIRST and self._ninja is None:
                    # A builder's line that is no progress: nothing to fold but "seen".
                    if line.endswith(_TYPE_101_NEWLINE) or line.endswith(_TYPE_101):
                        self._last = line
                        return
                else:
                    found = self._log_line(line)
                    if found is not None:
                        self._plain(found[0], self._running_text.get(found[1]))
                        self._last = line
                        return
            elif line.startswith(_RESULT_PREFIX) and self._progress(line):
                return
            self._feed_nix(line)
            return
        if line[:1] in _SPECIAL_FIRST or self._ninja is not None:
            self._plain(line.rstrip("\r\n"), None)
        elif self._tool_error is None and "rror" in line:
            self._note_error(line.rstrip("\r\n"))
        self._last = line

    def feed_lines(self, lines: list[str]) -> Exception | None:
        """`feed` each line, never raising: the first exception a line raised, else None.

        The pump's path with the readable map off (one call per block of lines; with it on,
        `ReadableStream.render_folding` makes the same pass). Most lines are folded here by a
        few string tests, without a call: a line `feed` would only count and remember (a
        builder's line that is no progress; a plain line that is no progress and no error), a
        ninja status (kept unparsed, as `_plain` keeps it), progress counts (105) of an activity
        whose counts are not kept; the lines are counted once for the block. The others go
        through `fold`. A line that raises (a parser bug) is counted and skipped, as the pump
        skips it. Measured (benchmarks/history_store.py): a call per line was most of the
        pump's time on a Nix log (issue 23 item 4)."""
        error: Exception | None = None
        fold = self.fold
        if self._ninja is not None:  # a custom NINJA_STATUS: any line may be progress
            for line in lines:
                try:
                    fold(line)
                except Exception as raised:  # a parser bug must not stop the pump
                    error = error or raised
            self.lines += len(lines)
            return error
        fold_after = self.fold_after
        steps, running, types = self.block_hooks()
        known = self._tool_error is not None
        last: str | None = None
        nix = False
        for line in lines:
            if line[:_TEXT_AT] == _LOG_LINE_PREFIX:
                nix = True
                first = line[_TEXT_AT : _TEXT_AT + 1]
                if first not in _SPECIAL_JSON_FIRST:
                    if line.endswith(_TYPE_101):
                        last = line
                        continue
                elif first == "[":
                    end = line.find('"', _TEXT_AT)
                    text = line[_TEXT_AT:end]
                    if (
                        text[4:6] != "%]"
                        and line.startswith(_TEXT_END, end)
                        and line.endswith(_TYPE_101)
                        and text.isascii()
                        and text.isprintable()  # no escape, no control: JSON's scanner agrees
                        and "\\" not in text
                        and (known or "rror" not in text)
                    ):
                        # ninja's status, kept unparsed as `_plain` keeps it
                        steps((text, running(line[end + _TEXT_END_LENGTH : _ID_END])))
                        last = line
                        continue
            elif line.endswith(_TYPE_105) and line[:_RESULT_AT] == _RESULT_PREFIX:
                # progress counts: `_progress` folds them to nothing but for a Builds or
                # CopyPaths activity (int() reads more than ASCII digits: it decides the rest)
                nix = True
                close = line.find("]", _RESULT_AT)
                digits = line[close + _ID_AT : _ID_END]
                if (
                    line.startswith(_ID_KEY, close)
                    and digits.isdigit()
                    and digits.isascii()
                    and types.get(int(digits)) not in _KEPT_COUNTS
                ):
                    continue
            elif line[:1] not in _SPECIAL_FIRST:
                if (known or "rror" not in line) and line[:5] != "@nix ":
                    last = line
                    continue
            elif (
                line[:1] == "["
                and line[4:6] != "%]"
                and line[-1:] != "\r"
                and (known or "rror" not in line)
            ):
                steps((line, None))
                last = line
                continue
            try:
                fold_after(last, line)
            except Exception as raised:  # as above
                error = error or raised
            last = None
            known = self._tool_error is not None
        self.end_block(len(lines), last, nix)
        return error

    def block_hooks(
        self,
    ) -> tuple[Callable[[tuple[str | bytes, Any]], None], Callable[[str], Any], dict[int, int]]:
        """What a block's pass folds without a call (`feed_lines`, the readable form's shared
        pass): (append a ninja status line's (text, derivation) to those kept unparsed, the text
        as str or as valid UTF-8 bytes (decoded when parsed); the running derivation of a
        builder's id digits; every activity's type by id). The pass says at its end how many
        lines it went through (`end_block`)."""
        return self._unparsed.append, self._running_text.get, self._types

    def end_block(self, count: int, last: str | None, nix: bool) -> None:
        """A block's pass went through `count` lines (those it handed to `fold` among them):
        `last` the latest it folded itself that a person reads (None: none since its last
        call to `fold`), `nix` whether an `@nix` line was among them."""
        self.lines += count
        if last is not None:
            self._last = last
        if nix:
            self._nix = True
        if len(self._unparsed) >= _UNPARSED_STEPS:
            self._parse_steps()

    @property
    def folds_every_line(self) -> bool:
        """Whether any line may be progress (a custom NINJA_STATUS): then no line is skipped."""
        return self._ninja is not None

    @property
    def knows_tool_error(self) -> bool:
        """Whether the first compiler or build tool error is kept (later ones are not looked
        for: a plain line is then only counted)."""
        return self._tool_error is not None

    def fold_after(self, last: str | None, line: str) -> None:
        """`fold(line)`, the block's pass having folded lines before it itself, the latest a
        person reads `last` (None: none since its last call)."""
        if last is not None:
            self._last = last
        self.fold(line)

    def fold_builder(self, last: str | None, line: str, text: str, activity: str) -> None:
        """`fold_after(last, line)` for a builder's line whose TEXT (as JSON decodes it) and id
        digits the caller has cut out of it as `_log_line` would."""
        if last is not None:
            self._last = last
        self._nix = True
        self._plain(text, self._running_text.get(activity))
        self._last = line

    def feed_all(self, lines: Iterable[str]) -> int:
        """Fold many lines (a recorded log) in; returns how many."""
        feed = self.feed
        count = 0
        for line in lines:
            feed(line)
            count += 1
        return count

    def _progress(self, line: str) -> bool:
        """The fast path for Progress results (105), many while Nix downloads: whether folded.

        '@nix {"action":"result","fields":[DONE,EXPECTED,RUNNING,FAILED],"id":N,"type":105}'
        """
        if line.endswith(_TYPE_105_NEWLINE):
            tail = len(line) - len(_TYPE_105_NEWLINE)
        elif line.endswith(_TYPE_105):
            tail = len(line) - len(_TYPE_105)
        else:
            return False
        close = line.find("]", len(_RESULT_PREFIX))
        if close < 0 or not line.startswith(_ID_KEY, close):
            return False
        try:
            activity = int(line[close + _ID_AT : tail])
            act_type = self._types.get(activity)
            if act_type != ACT_BUILDS and act_type != ACT_COPY_PATHS:
                return True  # a download's or another activity's progress: nothing to fold
            done, expected, running, failed = map(int, line[len(_RESULT_PREFIX) : close].split(","))
        except ValueError:
            return False  # not the shape expected: the JSON decoder decides
        if min(done, expected, running, failed) < 0:
            return True
        if max(done, expected, running, failed) >= _COUNT_LIMIT:
            return True
        numbers = (done, expected, running, failed)
        if act_type == ACT_BUILDS:
            self._builds[activity] = numbers
        else:
            self._copies[activity] = numbers
        return True

    @staticmethod
    def _log_line(line: str) -> tuple[str, str] | None:
        """(TEXT, N's digits) of a line shaped like Nix's builder log line, else None."""
        if line.endswith(_TYPE_101_NEWLINE):
            tail = len(line) - len(_TYPE_101_NEWLINE)
        elif line.endswith(_TYPE_101):
            tail = len(line) - len(_TYPE_101)
        else:
            return None
        try:
            text, end = scanstring(line, _TEXT_AT)
        except ValueError:
            return None
        if not line.startswith(_ID_KEY, end):
            return None
        return text, line[end + _ID_AT : tail]

    def _plain(self, text: str, drv: _Running | None) -> None:
        """Progress, failures and phases in a line of text (a builder's or the build's own)."""
        if self._tool_error is None and "rror" in text:
            self._note_error(text)
        first = text[:1]
        if first == "[":
            # Steps are kept as tuples here and become `Step`s in snapshot(): cheaper per line.
            step: _StepTuple | None = None
            if text[4:6] == "%]":
                found = make_percent(text)
                if found is not None:
                    if self._unparsed:
                        self._parse_steps()  # the step before this one, for the order below
                    done = found[0]
                    previous = drv.step if drv is not None else self._step
                    # make -j prints its jobs' percentages out of order (18, 9, 27 under load):
                    # within one run the bar never goes back. After 100, a lower one is a new run.
                    if previous is not None and previous[0] == MAKE and done < previous[1] < 100:
                        done = previous[1]
                    step = (MAKE, done, 100, found[1])
            else:
                # ninja's status: parsed when read (`_parse_steps`), only the latest of a run
                # of them (most are replaced before anyone looks: issue 23 item 4).
                unparsed = self._unparsed
                unparsed.append((text, drv))
                if len(unparsed) >= _UNPARSED_STEPS:
                    self._parse_steps()
                return
            if step is not None:
                self._step = step
                if drv is not None:
                    drv.step = step
        elif first == "\r" or first == "\x1b":
            text = clean_terminal_line(text)
            if text[:1] == "[":
                self._plain(text, drv)
        elif first == "F":
            if text.startswith("FAILED: "):
                self._failures.append(text[8:])
        elif first == "m":
            if text.startswith("make") and "***" in text:
                self._failures.append(text.partition("***")[2].strip())
        elif first == "R":
            if drv is not None and text.startswith(_PHASE_LINE):
                # nixpkgs' stdenv prints this beside the SetPhase result; older logs only this.
                drv.phase = text[len(_PHASE_LINE) :].strip() or drv.phase
        elif self._ninja is not None:
            # A custom NINJA_STATUS need not start with "[".
            counts = self._ninja.counts(text)
            if counts is not None:
                if self._unparsed:
                    self._parse_steps()
                self._step = (NINJA, *counts)
                if drv is not None:
                    drv.step = self._step

    def _parse_steps(self) -> None:
        """Parse the ninja status lines kept since the last time, newest first, until the
        newest valid one overall and per derivation is found: the steps feeding each line in
        turn would leave. A line the parser raises on is skipped (as the pump skips it)."""
        # A copy, the list itself emptied: `block_hooks` hands out its append.
        unparsed = self._unparsed[:]
        self._unparsed.clear()
        counts_of = self._ninja_counts
        overall = False
        found: set[_Running] = set()
        # the derivations among them: once each has its step and the overall one is found,
        # the older lines change nothing (a block's pass keeps thousands)
        derivations = len(set(map(itemgetter(1), unparsed)) - {None})
        for text, drv in reversed(unparsed):
            wanted = drv is not None and drv not in found
            if overall and len(found) == derivations:
                break
            if overall and not wanted:
                continue
            try:
                counts = counts_of(text if type(text) is str else text.decode())  # type: ignore[union-attr]
            except Exception:  # a parser bug must not stop the pump
                continue
            if counts is None:
                continue
            step = (NINJA, *counts)
            if not overall:
                self._step = step
                overall = True
            if wanted:
                drv.step = step  # type: ignore[union-attr]  # wanted: drv is not None
                found.add(drv)  # type: ignore[arg-type]

    def _feed_nix(self, line: str) -> None:
        """Any other `@nix` line: decode the JSON and fold the event in."""
        value = nix_log.decode(line)
        if value is None:
            return
        try:
            shown = self._nix_event(value)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
            # Well-formed JSON with fields of unexpected types: ignore the line, never crash.
            return
        if shown:
            self._last = line

    def _nix_event(self, value: dict[str, Any]) -> bool:
        """Fold a decoded event in; whether a person would read it (`render` shows it)."""
        action = value.get("action")
        if action == "result":
            return self._result(value.get("id"), value.get("type"), value.get("fields"))
        if action == "start":
            return self._start(value)
        if action == "stop":
            self._stop(value.get("id"))
            return False
        if action == "msg":
            text = value.get("msg")
            if isinstance(text, str):
                self._message(text)
                return True
        return False

    def _result(self, activity: Any, kind: Any, fields: Any) -> bool:
        if not isinstance(fields, list) or not fields:
            return False
        if kind in (RES_BUILD_LOG_LINE, RES_POST_BUILD_LOG_LINE):
            text = fields[0]
            if not isinstance(text, str):
                return False
            self._plain(text, self._running.get(activity))
            return True
        if kind == RES_SET_PHASE:
            drv = self._running.get(activity)
            if drv is not None and isinstance(fields[0], str):
                drv.phase = fields[0]
            return False
        if kind == RES_PROGRESS:
            numbers = _four_ints(fields)
            if numbers is not None:
                act_type = self._types.get(activity)
                if act_type == ACT_BUILDS:
                    self._builds[activity] = numbers
                elif act_type == ACT_COPY_PATHS:
                    self._copies[activity] = numbers
            return False
        # SetExpected [activityType, expected] on the Realise activity: used until Progress.
        if (
            kind == RES_SET_EXPECTED
            and len(fields) >= 2
            and fields[0] == ACT_BUILDS
            and _is_int(fields[1])
            and 0 <= fields[1] < _COUNT_LIMIT
        ):
            self._planned_said = max(self._planned_said, fields[1])
        return False

    def _start(self, value: dict[str, Any]) -> bool:
        activity = value.get("id")
        kind = value.get("type")
        if not _is_int(activity) or not _is_int(kind):
            return False
        self._types[activity] = kind
        if kind == ACT_BUILD:
            fields = value.get("fields")
            if isinstance(fields, list) and fields and isinstance(fields[0], str):
                drv = _Running(fields[0], self._clock())
                self._running[activity] = drv
                self._running_text[str(activity)] = drv
                self._names[str(activity)] = drv.name
        return _shown_start(value)

    def _stop(self, activity: Any) -> None:
        if not _is_int(activity):
            return
        self._types.pop(activity, None)
        drv = self._running.pop(activity, None)
        self._running_text.pop(str(activity), None)
        if drv is not None:
            failed = drv.drv_path in self._failed_paths
            self._finished.append(
                FinishedDerivation(drv.drv_path, drv.name, drv.started, self._clock(), failed)
            )

    def _note_error(self, text: str) -> None:
        """Keep the first line that reads as a compiler's or build tool's error."""
        if (
            ": error: " in text
            or ": fatal error: " in text
            or text.startswith(("error:", "ERROR:", "CMake Error", "fatal error:"))
        ):
            self._tool_error = clean_terminal_line(text).strip()[:_KEEP_ERROR]

    def _message(self, raw: str) -> None:
        text = nix_log.strip_ansi(raw)
        if self._nix_error is None and text.startswith("error:"):
            self._nix_error = text.strip().splitlines()[0][:_KEEP_ERROR] if text.strip() else None
        if self._collecting_plan:
            candidate = text.strip()
            if candidate.startswith("/nix/store/") and candidate.endswith(".drv"):
                self._planned_names[candidate] = None
                return
            self._collecting_plan = False
        found = _WILL_BE_BUILT.match(text)
        if found is not None:
            self._collecting_plan = True
            count = bounded_int(found.group(1)) if found.group(1) else 1
            if count is not None:
                self._planned_said = max(self._planned_said, count)
        elif "failed" in text or "Cannot build" in text:
            # "builder for '/nix/store/...drv' failed with exit code 2" (Nix 2.x);
            # "Cannot build '/nix/store/...drv'." (Nix 2.19+). Not "dependencies couldn't be
            # built", which names a derivation that never ran.
            path = _DRV_IN_QUOTES.search(text)
            if path is not None and "dependencies couldn't be built" not in text:
                self._mark_failed(path.group(1))

    def _mark_failed(self, drv_path: str) -> None:
        self._failed_paths[drv_path] = None
        # The error message comes after the activity stopped: correct the finished record.
        for index in range(len(self._finished) - 1, -1, -1):
            record = self._finished[index]
            if record.drv_path == drv_path:
                self._finished[index] = FinishedDerivation(
                    record.drv_path, record.name, record.started, record.ended, True
                )
                break

    # -- reading ----------------------------------------------------------------------------

    def snapshot(self) -> Progress:
        """The progress so far, as an immutable value."""
        if self._unparsed:
            self._parse_steps()
        running = tuple(
            DerivationState(d.drv_path, d.name, d.phase, _step(d.step), d.started)
            for d in self._running.values()
        )
        failed_names = tuple(derivation_name(path) for path in self._failed_paths)
        own_done = sum(1 for record in self._finished if not record.failed)
        if self._builds:
            # Nix's own counts; its "expected" drops a derivation once it failed.
            done = sum(numbers[0] for numbers in self._builds.values())
            failed = max(sum(numbers[3] for numbers in self._builds.values()), len(failed_names))
            planned = sum(numbers[1] for numbers in self._builds.values()) + failed
            count_running = max(sum(numbers[2] for numbers in self._builds.values()), len(running))
        else:
            done, failed, count_running = own_done, len(failed_names), len(running)
            planned = self._planned_said
        planned = max(planned, done + failed + count_running)
        copied = sum(numbers[0] for numbers in self._copies.values())
        to_copy = sum(numbers[1] for numbers in self._copies.values())
        return Progress(
            planned=planned,
            running=count_running,
            done=done,
            failed=failed,
            derivations=running,
            failed_derivations=failed_names,
            step=_step(self._step),
            step_failures=tuple(self._failures),
            paths_copied=copied,
            paths_to_copy=to_copy,
            lines=self.lines,
            last_line=self.last_line,
            nix=self._nix,
            first_error=self._nix_error or self._tool_error,
        )

    def render(self, line: str) -> tuple[str | None, str] | None:
        """(source, text): a line as a person reads it; None for Nix's bookkeeping events.

        `source` is the derivation whose builder wrote the line (None for the build's own
        output and Nix's messages). Builder lines of derivations that already finished still
        get their name. Reads the tracker's state, never changes it.
        """
        if line.startswith("@nix "):
            found = self._log_line(line) if line.startswith(_LOG_LINE_PREFIX) else None
            if found is not None:
                return self._names.get(found[1]), _clean(found[0])
            value = nix_log.decode(line)
            return None if value is None else self._render_event(value)
        return None, _clean(line.rstrip("\r\n"))

    def render_line(self, line: str) -> str | None:
        """A line as `nix build -L` prints it ("name> text"), None for bookkeeping events."""
        shown = self.render(line)
        if shown is None:
            return None
        source, text = shown
        # A real store name has no control character; one from a forged event may.
        return text if source is None else f"{visible(source)}> {text}"

    def _render_event(self, value: dict[str, Any]) -> tuple[str | None, str] | None:
        action = value.get("action")
        if action == "msg":
            text = value.get("msg")
            return (None, terminal_text(text)) if isinstance(text, str) else None
        if action == "start":
            if not _shown_start(value):
                return None
            return None, terminal_text(value["text"])
        if action == "result" and value.get("type") in (
            RES_BUILD_LOG_LINE,
            RES_POST_BUILD_LOG_LINE,
        ):
            fields = value.get("fields")
            if isinstance(fields, list) and fields and isinstance(fields[0], str):
                activity = value.get("id")
                name = self._names.get(str(activity)) if _is_int(activity) else None
                return name, _clean(fields[0])
        return None

    @property
    def activity_names(self) -> dict[str, str]:
        """Build activity id digits → derivation name, every one seen (the tracker's own)."""
        return self._names

    @property
    def last_line(self) -> str:
        """The latest line a person would read, rendered as `nix build -L` shows it."""
        return self.render_line(self._last) or "" if self._last else ""

    def finished(self) -> tuple[FinishedDerivation, ...]:
        """Every derivation build that ended, in order (for the history's per-derivation times)."""
        return tuple(self._finished)

    def planned_derivations(self) -> tuple[str, ...]:
        """Store paths of the derivations Nix said it will build ("these N derivations ...")."""
        return tuple(self._planned_names)

    def derivation_paths(self) -> tuple[str, ...]:
        """Store paths of every derivation planned or started: what the sampler attributes
        builders by (their `.drv` files name the store paths they build)."""
        paths = dict.fromkeys(self._planned_names)
        paths.update(dict.fromkeys(d.drv_path for d in self._running.values()))
        paths.update(dict.fromkeys(record.drv_path for record in self._finished))
        return tuple(paths)

    def derivation_names(self) -> tuple[str, ...]:
        """Names of every derivation planned or started."""
        names = dict.fromkeys(derivation_name(path) for path in self._planned_names)
        names.update(dict.fromkeys(d.name for d in self._running.values()))
        names.update(dict.fromkeys(record.name for record in self._finished))
        return tuple(names)


def _clean(text: str) -> str:
    """What a person reads of a line: terminal rewrites resolved, no control left to act."""
    return terminal_text(text)


def _shown_start(value: dict[str, Any]) -> bool:
    """Whether an activity's start is a line for people ("building '...drv'")."""
    text = value.get("text")
    level = value.get("level")
    return isinstance(text, str) and bool(text) and _is_int(level) and level <= LVL_INFO


def _step(step: _StepTuple | None) -> Step | None:
    return None if step is None else Step(*step)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _four_ints(fields: list[Any]) -> tuple[int, int, int, int] | None:
    if len(fields) < 4:
        return None
    done, expected, running, failed = fields[0], fields[1], fields[2], fields[3]
    numbers = (done, expected, running, failed)
    if all(_is_int(number) and 0 <= number < _COUNT_LIMIT for number in numbers):
        return numbers
    return None
