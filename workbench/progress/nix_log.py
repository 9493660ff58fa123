"""Nix's `--log-format internal-json` lines: `@nix {json}` on stderr, one event per line.

Nix writes four actions: `start` (an activity begins: `id`, `type`, `text`, `level`, `parent`,
`fields`), `stop` (`id`), `result` (`id`, `type`, `fields`) and `msg` (`level`, `msg`). Activity
and result types are numbers; new ones appear over Nix versions, so callers ignore the ones they
do not know. Anything malformed parses to None: a log line never raises.

Two things about Nix 2.8 (Debian's nix-bin) found while recording the fixtures:
- `nix build ... --log-format internal-json -L` prints plain text: `-L` resets the log format,
  so `-L` must come *before* `--log-format internal-json`. `nix-build` has no `-L`.
- internal-json carries the builder's log lines (result 101) even without `-L`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

PREFIX = "@nix "

# Activity types (nix/src/libutil/logging.hh, ActivityType).
ACT_UNKNOWN = 0
ACT_COPY_PATH = 100
ACT_FILE_TRANSFER = 101
ACT_REALISE = 102
ACT_COPY_PATHS = 103
ACT_BUILDS = 104
ACT_BUILD = 105
ACT_OPTIMISE_STORE = 106
ACT_VERIFY_PATHS = 107
ACT_SUBSTITUTE = 108
ACT_QUERY_PATH_INFO = 109
ACT_POST_BUILD_HOOK = 110
ACT_BUILD_WAITING = 111
ACT_FETCH_TREE = 112

# Result types (ResultType).
RES_FILE_LINKED = 100
RES_BUILD_LOG_LINE = 101
RES_UNTRUSTED_PATH = 102
RES_CORRUPTED_PATH = 103
RES_SET_PHASE = 104
RES_PROGRESS = 105
RES_SET_EXPECTED = 106
RES_POST_BUILD_LOG_LINE = 107

# Verbosity levels of `msg` and `start` (Verbosity).
LVL_ERROR = 0
LVL_WARN = 1
LVL_NOTICE = 2
LVL_INFO = 3
LVL_TALKATIVE = 4

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True, slots=True)
class NixStart:
    """An activity began; for a Build (105) `fields` is `(drvPath, host, round, nrRounds)`."""

    id: int
    type: int
    text: str
    level: int
    parent: int
    fields: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class NixStop:
    """An activity ended (successfully or not: failures arrive as `msg`)."""

    id: int


@dataclass(frozen=True, slots=True)
class NixResult:
    """A result of an activity: a log line (101), a phase (104), progress (105), ..."""

    id: int
    type: int
    fields: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class NixMessage:
    """A message for the user (errors, warnings, "these N derivations will be built:")."""

    level: int
    text: str
    """The message with its ANSI colours removed."""


NixEvent = NixStart | NixStop | NixResult | NixMessage


def strip_ansi(text: str) -> str:
    """Text without ANSI escape sequences (Nix colours its messages even in JSON)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def derivation_name(drv_path: str) -> str:
    """The name in a derivation's path: "/nix/store/HASH-ort-1.23.2.drv" gives "ort-1.23.2"."""
    base = drv_path.rpartition("/")[2]
    if base.endswith(".drv"):
        base = base[:-4]
    # A store path's base name is a 32-character hash, a dash, then the name.
    if len(base) > 33 and base[32] == "-":
        base = base[33:]
    return base


def decode(line: str) -> dict[str, Any] | None:
    """The JSON object of an `@nix` line, else None (not an @nix line, bad JSON, not an object)."""
    if not line.startswith(PREFIX):
        return None
    try:
        value = json.loads(line[5:])
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _int(value: Any, default: int = 0) -> int:
    # bool is an int subclass in Python but never an id or type in Nix's output.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def _fields(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, list) else ()


def event_from_json(value: dict[str, Any]) -> NixEvent | None:
    """The event an already decoded `@nix` object describes, else None."""
    action = value.get("action")
    if action == "result":
        return NixResult(
            _int(value.get("id")), _int(value.get("type"), -1), _fields(value.get("fields"))
        )
    if action == "start":
        text = value.get("text")
        return NixStart(
            _int(value.get("id")),
            _int(value.get("type"), -1),
            text if isinstance(text, str) else "",
            _int(value.get("level"), LVL_INFO),
            _int(value.get("parent")),
            _fields(value.get("fields")),
        )
    if action == "stop":
        return NixStop(_int(value.get("id")))
    if action == "msg":
        text = value.get("msg")
        return NixMessage(
            _int(value.get("level"), LVL_INFO), strip_ansi(text) if isinstance(text, str) else ""
        )
    if action == "setPhase":
        # What a builder itself writes to stderr; Nix turns it into result 104 for clients.
        phase = value.get("phase")
        return NixResult(0, RES_SET_PHASE, (phase,)) if isinstance(phase, str) else None
    return None


def parse_nix_line(line: str) -> NixEvent | None:
    """One `@nix {json}` line as an event; None for other lines and for anything malformed."""
    value = decode(line)
    return None if value is None else event_from_json(value)
