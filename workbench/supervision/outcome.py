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
used only when it parses (a torn rewrite is ignored, never half believed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from workbench.atomic_file import replace_file
from workbench.history import private_state

FILE = "outcome.json"
RESERVED = 1 << 16
_FIELDS = ("state", "ended", "duration_s", "exit_status", "signal", "note", "lines", "progress")


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

    def write(self, outcome: dict[str, Any]) -> str:
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


def _encode(outcome: dict[str, Any]) -> bytes:
    data = json.dumps(outcome, separators=(",", ":"), sort_keys=True).encode() + b"\n"
    if len(data) > RESERVED and isinstance(outcome.get("progress"), dict):
        # The derivations' list is what grows; the outcome itself is a few hundred bytes.
        slim = {**outcome, "progress": {"lines": outcome["progress"].get("lines")}}
        data = json.dumps(slim, separators=(",", ":"), sort_keys=True).encode() + b"\n"
    return data


def read(
    state_directory: Path, log_path: str, build_id: int, created: float
) -> dict[str, Any] | None:
    """A build's outcome as its supervisor wrote it, None if none (or none that parses, or
    one of another build of the same id)."""
    places = [Path(log_path).parent / FILE, _fallback(state_directory, build_id)]
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
            and said.get("state")
        ):
            return {field: said.get(field) for field in _FIELDS}
    return None


def discard(state_directory: Path, build_id: int) -> None:
    """Remove the off-disk copy once the history holds the outcome."""
    fallback = _fallback(state_directory, build_id)
    if fallback is not None:
        with contextlib.suppress(OSError):
            fallback.unlink()
