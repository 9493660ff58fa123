"""Folds a build's log lines, Nix internal-json or plain, into a `Progress` snapshot.

The supervisor calls `ProgressTracker.feed(line)` for every line the build writes (stdout and
stderr, decoded as UTF-8 with errors="replace") and `snapshot()` whenever it wants the state,
for example once a second. `feed` returns the line as a person should read it (`name> text` for
a Nix builder's line, like `nix build -L`), or None for Nix's own bookkeeping events.

`feed` is the hot path of the log pipeline: a plain line costs a few string tests, and the Nix
builder log line (`result` 101, most of a Nix build's log) is decoded without building a dict.
The tracker is not thread-safe: feed and snapshot from one thread, or hold a lock around both.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any

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
    NINJA,
    NinjaStatusParser,
    Step,
    clean_terminal_line,
    make_percent,
    ninja_counts,
)

# Nix writes JSON with sorted keys, so a builder's log line always starts like this; the fast
# path below reads the string with json's C scanner and never builds a dict for it.
_LOG_LINE_PREFIX = '@nix {"action":"result","fields":["'
_TEXT_AT = len(_LOG_LINE_PREFIX)  # where the string's characters start
_ID_KEY = '],"id":'
_ID_AT = len(_ID_KEY)
_TYPE_101 = ',"type":101}'
_TYPE_101_NEWLINE = _TYPE_101 + "\n"
# Only lines starting with one of these can be progress, failures or phases; every other
# line is passed through untouched.
_SPECIAL_FIRST = frozenset("[\r\x1bFmR")

_DRV_IN_QUOTES = re.compile(r"'(/nix/store/[^'\s]+\.drv)'")
_WILL_BE_BUILT = re.compile(
    r"^these (\d+) derivations will be built:|^this derivation will be built:"
)
_PHASE_LINE = "Running phase: "
_KEEP_FAILURES = 20

_StepTuple = tuple[str, int, int, str]


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
    """The latest readable line (what `feed` last returned)."""
    nix: bool
    """Whether any `@nix` line was seen, i.e. the derivation counts mean something."""


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
        self._failures: deque[str] = deque(maxlen=_KEEP_FAILURES)
        self._nix = False
        self._running_text: dict[str, _Running] = {}  # the same, keyed by the id's digits
        self._last_text = ""
        self.lines = 0
        """Lines fed so far."""
        self.source: str | None = None
        """The derivation whose builder wrote the latest line `feed` returned; None when that
        line was the build's own output or Nix's."""

    # -- feeding --------------------------------------------------------------------------

    def feed(self, line: str) -> str | None:
        """Fold one line in; return its text as a person reads it, or None for Nix bookkeeping.

        For a builder's line the text is the builder's own, and `source` names the derivation
        (show it as `f"{source}> {text}"`, as `nix build -L` does); for the build's own output
        `source` is None. A line that is not a progress or Nix line comes back unchanged
        (without its newline), so passing it through costs nothing.
        """
        self.lines += 1
        if line.startswith("@nix "):
            if line.startswith(_LOG_LINE_PREFIX):
                # The fast path for a builder's log line, most of a Nix build's log: Nix writes
                # '@nix {"action":"result","fields":["TEXT"],"id":N,"type":101}' (sorted keys).
                # json's C scanner reads TEXT; the activity is found by N's digits; no dict.
                if line.endswith(_TYPE_101_NEWLINE):
                    tail = len(line) - len(_TYPE_101_NEWLINE)
                elif line.endswith(_TYPE_101):
                    tail = len(line) - len(_TYPE_101)
                else:
                    tail = 0
                if tail:
                    try:
                        text, end = scanstring(line, _TEXT_AT)
                    except ValueError:
                        tail = 0
                    if tail and line.startswith(_ID_KEY, end):
                        drv = self._running_text.get(line[end + _ID_AT : tail])
                        if text[:1] in _SPECIAL_FIRST or self._ninja is not None:
                            text = self._plain(text, drv)
                        self._nix = True
                        self._last_text = text
                        self.source = None if drv is None else drv.name
                        return text
            return self._feed_nix(line)
        line = line.rstrip("\r\n")
        if line[:1] in _SPECIAL_FIRST or self._ninja is not None:
            line = self._plain(line, None)
        self._last_text = line
        self.source = None
        return line

    def feed_all(self, lines: Iterable[str]) -> int:
        """Fold many lines (a recorded log) in; returns how many."""
        feed = self.feed
        count = 0
        for line in lines:
            feed(line)
            count += 1
        return count

    def _plain(self, text: str, drv: _Running | None) -> str:
        """The slow half of a plain line: progress, failures, phases. Returns the text to show."""
        first = text[:1]
        if first == "[":
            # Steps are kept as tuples here and become `Step`s in snapshot(): cheaper per line.
            step: _StepTuple | None = None
            if text[4:6] == "%]":
                found = make_percent(text)
                if found is not None:
                    step = (MAKE, found[0], 100, found[1])
            else:
                counts = self._ninja_counts(text)
                if counts is not None:
                    step = (NINJA, *counts)
            if step is not None:
                self._step = step
                if drv is not None:
                    drv.step = step
        elif first == "\r" or first == "\x1b":
            text = clean_terminal_line(text)
            if text[:1] == "[":
                return self._plain(text, drv)
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
                self._step = (NINJA, *counts)
                if drv is not None:
                    drv.step = self._step
        return text

    def _feed_nix(self, line: str) -> str | None:
        """Any other `@nix` line: decode the JSON and fold the event in."""
        self._nix = True
        value = nix_log.decode(line)
        if value is None:
            return None
        try:
            shown = self._nix_event(value)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
            # Well-formed JSON with fields of unexpected types: ignore the line, never crash.
            return None
        if shown is not None:
            self._last_text, self.source = shown
            return shown[0]
        return None

    def _nix_event(self, value: dict[str, Any]) -> tuple[str, str | None] | None:
        """Fold a decoded event in; (text to show, its source) or None."""
        action = value.get("action")
        if action == "result":
            return self._result(value.get("id"), value.get("type"), value.get("fields"))
        if action == "start":
            text = self._start(value)
            return None if text is None else (text, None)
        if action == "stop":
            self._stop(value.get("id"))
            return None
        if action == "msg":
            text = value.get("msg")
            return (self._message(text), None) if isinstance(text, str) else None
        return None

    def _result(self, activity: Any, kind: Any, fields: Any) -> tuple[str, str | None] | None:
        if not isinstance(fields, list) or not fields:
            return None
        if kind in (RES_BUILD_LOG_LINE, RES_POST_BUILD_LOG_LINE):
            text = fields[0]
            if not isinstance(text, str):
                return None
            drv = self._running.get(activity)
            return self._plain(text, drv), None if drv is None else drv.name
        if kind == RES_SET_PHASE:
            drv = self._running.get(activity)
            if drv is not None and isinstance(fields[0], str):
                drv.phase = fields[0]
            return None
        if kind == RES_PROGRESS:
            numbers = _four_ints(fields)
            if numbers is not None:
                act_type = self._types.get(activity)
                if act_type == ACT_BUILDS:
                    self._builds[activity] = numbers
                elif act_type == ACT_COPY_PATHS:
                    self._copies[activity] = numbers
            return None
        if kind == RES_SET_EXPECTED:
            # [activityType, expected] on the Realise activity: only used when no Progress yet.
            if (
                len(fields) >= 2
                and fields[0] == ACT_BUILDS
                and _is_int(fields[1])
                and fields[1] >= 0
            ):
                self._planned_said = max(self._planned_said, fields[1])
            return None
        return None

    def _start(self, value: dict[str, Any]) -> str | None:
        activity = value.get("id")
        kind = value.get("type")
        if not _is_int(activity) or not _is_int(kind):
            return None
        self._types[activity] = kind
        if kind == ACT_BUILD:
            fields = value.get("fields")
            if isinstance(fields, list) and fields and isinstance(fields[0], str):
                drv = _Running(fields[0], self._clock())
                self._running[activity] = drv
                self._running_text[str(activity)] = drv
        text = value.get("text")
        level = value.get("level")
        if isinstance(text, str) and text and _is_int(level) and level <= LVL_INFO:
            return nix_log.strip_ansi(text)
        return None

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

    def _message(self, raw: str) -> str:
        text = nix_log.strip_ansi(raw)
        if self._collecting_plan:
            candidate = text.strip()
            if candidate.startswith("/nix/store/") and candidate.endswith(".drv"):
                self._planned_names[candidate] = None
                return text
            self._collecting_plan = False
        found = _WILL_BE_BUILT.match(text)
        if found is not None:
            self._collecting_plan = True
            count = int(found.group(1)) if found.group(1) else 1
            self._planned_said = max(self._planned_said, count)
        elif "failed" in text or "Cannot build" in text:
            # "builder for '/nix/store/...drv' failed with exit code 2" (Nix 2.x);
            # "Cannot build '/nix/store/...drv'." (Nix 2.19+). Not "dependencies couldn't be
            # built", which names a derivation that never ran.
            path = _DRV_IN_QUOTES.search(text)
            if path is not None and "dependencies couldn't be built" not in text:
                self._mark_failed(path.group(1))
        return text

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
        )

    @property
    def last_line(self) -> str:
        """The latest line `feed` returned, as `nix build -L` shows it ("name> text")."""
        if self.source is None:
            return self._last_text
        return f"{self.source}> {self._last_text}"

    def finished(self) -> tuple[FinishedDerivation, ...]:
        """Every derivation build that ended, in order (for the history's per-derivation times)."""
        return tuple(self._finished)

    def planned_derivations(self) -> tuple[str, ...]:
        """Store paths of the derivations Nix said it will build ("these N derivations ...")."""
        return tuple(self._planned_names)

    def derivation_names(self) -> tuple[str, ...]:
        """Names of every derivation planned or started: what the sampler attributes builders by."""
        names = dict.fromkeys(derivation_name(path) for path in self._planned_names)
        names.update(dict.fromkeys(d.name for d in self._running.values()))
        names.update(dict.fromkeys(record.name for record in self._finished))
        return tuple(names)


def _step(step: _StepTuple | None) -> Step | None:
    return None if step is None else Step(*step)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _four_ints(fields: list[Any]) -> tuple[int, int, int, int] | None:
    if len(fields) < 4:
        return None
    done, expected, running, failed = fields[0], fields[1], fields[2], fields[3]
    numbers = (done, expected, running, failed)
    if all(_is_int(number) and number >= 0 for number in numbers):
        return numbers
    return None
