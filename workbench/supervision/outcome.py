"""A build's outcome kept beside its log, for when the history cannot be written.

A full state disk must not cost the build's result. The history's final row is one SQLite
transaction, which a full disk refuses; so the supervisor also writes the outcome (state, exit
status or signal, duration, note, progress) into `builds/N/outcome.json`, a file it filled with
allocated blocks as the build started: rewriting bytes already allocated needs no free block, so the
write succeeds on a disk that has none left. Where even that could not be reserved (the disk
was full before the build began), the outcome goes to a private folder on another file system
(`$XDG_RUNTIME_DIR` or /dev/shm), named after the state directory.

Readers (`liveness.check`, so `status`, `history`, `attach` and a following CLI) take an active
row's outcome from there: they record it in the history when it can be written ("written when
space returns") and otherwise show it as it is, without writing. The file is read whole and
used only when it parses (a torn rewrite is ignored, never half believed), and only as the
`Outcome` it must be: a file whose fields do not have the types and values a supervisor writes
(edited by hand, or by another program) is refused with an `OutcomeError` naming the file, the
field, its value and what is allowed, and the build it belongs to is judged without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from workbench.atomic_file import replace_file
from workbench.history import private_state
from workbench.history.records import FINAL_STATES, BuildState

FILE = "outcome.json"
RESERVED = 1 << 16


class Outcome(TypedDict):
    """How a build ended: what the supervisor writes here and into the history's row
    (`History.finish` takes these as its arguments)."""

    state: BuildState
    ended: float
    duration_s: float | None
    exit_status: int | None
    signal: int | None
    note: str | None
    lines: int
    progress: dict[str, Any]


class OutcomeError(ValueError):
    """An outcome file that parses but is not an `Outcome` (one field said, with its value)."""

    def __init__(self, path: Path, field: str, value: object, allowed: str) -> None:
        """`value`: the field's value; `...` when the field is missing."""
        shown = "missing" if value is ... else json.dumps(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        super().__init__(f"{path}: {field!r} is {shown}: allowed: {allowed}")
        self.path = path
        self.field = field


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_FINAL_VALUES = frozenset(state.value for state in FINAL_STATES)
_FINAL = ", ".join(f'"{state.value}"' for state in FINAL_STATES)
# Each field: whether a value is one a supervisor writes, and what is allowed, said.
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "state": (lambda v: isinstance(v, str) and v in _FINAL_VALUES, f"one of {_FINAL}"),
    "ended": (_number, "a number (seconds since the epoch)"),
    "duration_s": (lambda v: v is None or (_number(v) and v >= 0), "null or seconds (>= 0)"),
    "exit_status": (lambda v: v is None or _integer(v), "null or an integer"),
    "signal": (lambda v: v is None or (_integer(v) and v > 0), "null or a signal number"),
    "note": (lambda v: v is None or isinstance(v, str), "null or a string"),
    "lines": (lambda v: _integer(v) and v >= 0, "a count of lines (an integer >= 0)"),
    "progress": (lambda v: isinstance(v, dict), "an object (the build's last progress)"),
}


def outcome_from_json(said: dict[str, Any], path: Path) -> Outcome:
    """The outcome in a parsed file, checked field by field; OutcomeError for the first field
    that is missing or not what a supervisor writes."""
    for field, (valid, allowed) in _CHECKS.items():
        if not valid(said.get(field, ...)):
            raise OutcomeError(path, field, said.get(field, ...), allowed)
    return Outcome(
        state=BuildState(said["state"]),
        ended=float(said["ended"]),
        duration_s=None if said["duration_s"] is None else float(said["duration_s"]),
        exit_status=said["exit_status"],
        signal=said["signal"],
        note=said["note"],
        lines=said["lines"],
        progress=said["progress"],
    )


def _ours(directory: Path) -> bool:
    """A real folder (not a link) of this user's that nobody else may write."""
    try:
        found = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o022


def _fallback(state_directory: Path, build_id: int) -> Path | None:
    """The outcome's place off the state disk: a 0700 folder of this user's."""
    key = hashlib.sha256(str(Path(state_directory).resolve()).encode()).hexdigest()[:16]
    for base in (os.environ.get("XDG_RUNTIME_DIR"), "/dev/shm"):
        if base and os.path.isdir(base):
            return Path(base) / f"workbench-{os.getuid()}" / f"{key}-{build_id}.{FILE}"
    return None


class OutcomeFile:
    """The supervisor's side: reserve the file as the build starts, write the outcome at its
    end. Nothing here raises."""

    def __init__(
        self, state_directory: Path, build_directory: Path, build_id: int, created: float
    ) -> None:
        """`created`: the row's creation time, which tells this build from another of the same
        id (a history moved aside starts again at 1: an off-disk outcome may be an old one's)."""
        self.state_directory = Path(state_directory)
        self.build_id = build_id
        self.created = created
        self.path = Path(build_directory) / FILE
        self.fd: int | None = None
        self.where = ""
        """Where the outcome was written ("" before, or when nowhere would take it)."""

    def reserve(self) -> bool:
        """Allocate the file's blocks now; False when the disk is full."""
        if self.fd is not None:
            return True
        try:
            fd = private_state.open_private(self.path, os.O_RDWR | os.O_CREAT)
        except OSError:
            return False
        try:
            # Allocated now (not a sparse file's promise): a later rewrite needs no free block.
            os.posix_fallocate(fd, 0, RESERVED)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # never a partly reserved file that looks reserved
            os.close(fd)
            return False
        self.fd = fd
        return True

    def write(self, outcome: Outcome) -> str:
        """Write the outcome where it fits; returns where ("" when nowhere)."""
        data = _encode({"build_id": self.build_id, "created": self.created, **outcome})
        if self.reserve() and len(data) <= RESERVED:
            try:
                os.pwrite(self.fd, data.ljust(RESERVED, b" "), 0)  # type: ignore[arg-type]
                with contextlib.suppress(OSError):
                    os.fsync(self.fd)  # type: ignore[arg-type]
                self.where = str(self.path)
                return self.where
            except OSError:
                pass
        fallback = _fallback(self.state_directory, self.build_id)
        if fallback is not None:
            with contextlib.suppress(OSError):
                fallback.parent.mkdir(mode=0o700, exist_ok=True)
                if _ours(fallback.parent):
                    replace_file(fallback, data, mode=0o600, durable=False)
                    self.where = str(fallback)
                    return self.where
        return ""

    def close(self) -> None:
        """Close the reserved file."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def _encode(outcome: dict[str, object]) -> bytes:
    data = json.dumps(outcome, separators=(",", ":"), sort_keys=True).encode() + b"\n"
    progress = outcome.get("progress")
    if len(data) > RESERVED and isinstance(progress, dict):
        # The derivations' list is what grows; the outcome itself is a few hundred bytes.
        slim = {**outcome, "progress": {"lines": progress.get("lines")}}
        data = json.dumps(slim, separators=(",", ":"), sort_keys=True).encode() + b"\n"
    return data


def read(state_directory: Path, log_path: str, build_id: int, created: float) -> Outcome | None:
    """A build's outcome as its supervisor wrote it, None if none (or none that parses, or
    one of another build of the same id). OutcomeError when the only one there is of this
    build but is not an outcome a supervisor writes (see `outcome_from_json`)."""
    places = [Path(log_path).parent / FILE, _fallback(state_directory, build_id)]
    refused: OutcomeError | None = None
    for place in places:
        if place is None or (
            place.parent.name.startswith("workbench-") and not _ours(place.parent)
        ):
            continue
        try:
            with open(place, "rb") as handle:
                data = handle.read(1)
                if data != b"{":  # reserved, not written yet: no need to read it all
                    continue
                said = json.loads(data + handle.read(RESERVED))
        except (OSError, ValueError):
            continue
        if (
            isinstance(said, dict)
            and said.get("build_id") == build_id
            and said.get("created") == created
        ):
            try:
                return outcome_from_json(said, place)
            except OutcomeError as error:
                refused = refused or error
    if refused is not None:
        raise refused
    return None


def discard(state_directory: Path, build_id: int) -> None:
    """Remove the off-disk copy once the history holds the outcome."""
    fallback = _fallback(state_directory, build_id)
    if fallback is not None:
        with contextlib.suppress(OSError):
            fallback.unlink()
