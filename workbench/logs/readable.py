"""One raw log line as a person reads it: Nix's `@nix {json}` events turned into text.

The supervisor's log holds what the build wrote byte for byte; for a Nix build that is
`--log-format internal-json`, one JSON event per line. `readable_line` turns one line into the
text `workbench logs` would print for it (a builder's line as `name> text`, a message as its
text) and a style hint; bookkeeping events that `workbench logs` leaves out become a short dimmed
description instead, so that a viewer can map screen rows to file lines one to one and render
only the visible ones.

`DerivationNames` learns which activity id builds which derivation, from the `start` events, by
a byte search over what was appended: the only state the per-line view needs.
"""

from __future__ import annotations

import json
import mmap
import re
from collections.abc import Mapping
from typing import Any

from workbench.logs.line_index import severity
from workbench.progress.nix_log import (
    ACT_BUILD,
    ACT_BUILDS,
    ACT_COPY_PATHS,
    LVL_ERROR,
    LVL_INFO,
    LVL_WARN,
    RES_BUILD_LOG_LINE,
    RES_POST_BUILD_LOG_LINE,
    RES_PROGRESS,
    RES_SET_EXPECTED,
    RES_SET_PHASE,
    derivation_name,
    strip_ansi,
)
from workbench.progress.visible import terminal_text, visible

PREFIX = "@nix "
DIM = "dim"
ERROR = "error"
WARNING = "warning"
# Longest text kept of one line: a minified blob must not cost a frame.
MAX_CHARACTERS = 4000

_STORE_PATH = re.compile(r"/nix/store/[0-9a-z]{32}-([^\s'\"`]+)")
# Looked up with whatever the JSON holds (an int when Nix wrote what it should).
_ACTIVITY_WORDS: dict[object, str] = {
    ACT_COPY_PATHS: "copying paths",
    ACT_BUILDS: "builds",
    ACT_BUILD: "build",
    102: "realise",
    100: "copy path",
    101: "download",
    108: "substitute",
    109: "query path info",
    110: "post-build hook",
    111: "waiting for a build slot",
    112: "fetch tree",
}


def _printable(text: str) -> str:
    """Terminal rewrites and colours resolved, other control characters made visible."""
    if len(text) > 4 * MAX_CHARACTERS:
        text = text[: 4 * MAX_CHARACTERS]  # bounds the work; "^X" may quadruple nothing more
    text = terminal_text(text)
    return text if len(text) <= MAX_CHARACTERS else text[:MAX_CHARACTERS] + "…"


def _short_paths(text: str) -> str:
    """/nix/store/HASH-name → name: the hash says nothing to a reader."""
    return _STORE_PATH.sub(r"\1", text) if "/nix/store/" in text else text


def plain_hint(text: str) -> str | None:
    """The severity ("error", "warning" or None) of for text that is already readable."""
    return severity(text)


def readable_line(text: str, names: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """(text a person reads, style hint) for one raw log line.

    The hint is "error" or "warning" (by the words in it, or a Nix message's level), "dim" for
    Nix bookkeeping (activities starting and stopping, progress counts), None otherwise.
    `names`: activity id digits → derivation name (from `DerivationNames`), so a builder's line
    reads `name> text` as `workbench logs` prints it.
    """
    if not text.startswith(PREFIX):
        shown = _printable(text)
        return shown, plain_hint(shown)
    try:
        value = json.loads(text[len(PREFIX) :])
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return _printable(text), DIM
    try:
        return _event(value, names or {})
    except (TypeError, ValueError, IndexError, KeyError, AttributeError):
        # Well-formed JSON of an unexpected shape: show it as it is, never fail a frame.
        return _printable(text), DIM


def _event(value: dict[str, Any], names: Mapping[str, str]) -> tuple[str, str | None]:
    action = value.get("action")
    activity = value.get("id")
    name = names.get(str(activity)) if isinstance(activity, int) else None
    if action == "result":
        kind = value.get("type")
        fields = value.get("fields") or []
        if kind in (RES_BUILD_LOG_LINE, RES_POST_BUILD_LOG_LINE) and isinstance(fields[0], str):
            shown = _printable(fields[0])
            return (f"{name}> {shown}" if name else shown), plain_hint(shown)
        if kind == RES_SET_PHASE and fields and isinstance(fields[0], str):
            return f"  {name or 'builder'}: {fields[0]}", DIM
        if kind == RES_PROGRESS and len(fields) >= 4:
            done, expected, running, failed = fields[:4]
            extra = f", {running} running" if running else ""
            extra += f", {failed} failed" if failed else ""
            return f"  progress {done}/{expected}{extra}", DIM
        if kind == RES_SET_EXPECTED and len(fields) >= 2:
            what = _ACTIVITY_WORDS.get(fields[0], f"type {fields[0]}")
            return f"  expecting {fields[1]} ({what})", DIM
        return f"  result {kind}: {_printable(json.dumps(fields))[:200]}", DIM
    if action == "msg":
        message = value.get("msg")
        shown = _printable(strip_ansi(message)) if isinstance(message, str) else ""
        level = value.get("level")
        if level == LVL_ERROR:
            return shown, ERROR
        if level == LVL_WARN:
            return shown, WARNING
        return shown, plain_hint(shown) if isinstance(level, int) and level <= LVL_INFO else DIM
    if action == "start":
        words = value.get("text")
        kind = value.get("type")
        if isinstance(words, str) and words:
            return f"▶ {_short_paths(_printable(strip_ansi(words)))}", DIM
        what = _ACTIVITY_WORDS.get(kind, f"activity type {kind}")
        return f"▶ {what}", DIM
    if action == "stop":
        return (f"■ {name} finished" if name else "■ activity ended"), DIM
    if action == "setPhase":
        return f"  phase {value.get('phase')}", DIM
    return _printable(json.dumps(value))[:200], DIM


_START_BUILD = b'@nix {"action":"start","fields":["/nix/store/'


class DerivationNames(dict[str, str]):
    """Activity id digits → derivation name, learnt from the log's Build activity starts."""

    def scan(self, data: bytes | mmap.mmap, start: int = 0, end: int | None = None) -> int:
        """Learn the Build starts in `data[start:end]` (bytes or an mmap); how many were new.

        Give it whole lines (`LineIndex.complete_size` bounds them): a start event cut at `end`
        is skipped, not remembered. A byte search for the start events' fixed prefix (Nix writes
        sorted keys), then one JSON decode per start: cheap against a log that grows by megabytes
        a second.
        """
        stop = len(data) if end is None else end
        found = 0
        position = data.find(_START_BUILD, start, stop)
        while position >= 0:
            line_end = data.find(b"\n", position, stop)
            if line_end < 0:
                break  # a start event still being written: the next scan takes it
            found += self._learn(bytes(data[position:line_end]))
            position = data.find(_START_BUILD, line_end, stop)
        return found

    def _learn(self, line: bytes) -> int:
        try:
            value = json.loads(line[len(PREFIX) :])
        except (ValueError, RecursionError):
            return 0
        if not isinstance(value, dict) or value.get("type") != ACT_BUILD:
            return 0
        fields, activity = value.get("fields"), value.get("id")
        if not (isinstance(fields, list) and fields and isinstance(fields[0], str)):
            return 0
        if not isinstance(activity, int):
            return 0
        self[str(activity)] = visible(derivation_name(fields[0]))
        return 1
