"""The build history's SQLite connection, and the advice its failures become.

Every SQLite failure becomes a HistoryError that says what to do (a full disk, a read-only or
damaged file), never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError


class HistoryError(WorkbenchError):
    """The history database cannot be opened or has an unknown layout."""


def _disk_full(directory: Path) -> bool:
    """Whether the file system holding `directory` has no block left (SQLite reports a WAL
    that cannot grow as a "disk I/O error", not as SQLITE_FULL)."""
    try:
        return os.statvfs(directory).f_bavail == 0
    except OSError:
        return False


def _advice(path: Path, exc: sqlite3.Error) -> str:
    """What a SQLite failure means for the user, and what to do about it."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if (
        name == "SQLITE_FULL"
        or "disk is full" in str(exc)
        or (name.startswith("SQLITE_IOERR") and _disk_full(path.parent))
    ):
        return (
            f"{path}: the disk holding the build history is full ({exc}); free space there "
            f"(`df -h {path.parent}`) and run the command again, or choose another --state-dir"
        )
    if name.startswith("SQLITE_READONLY"):
        return (
            f"{path}: the build history is read-only ({exc}); make it and its folder writable "
            f"(`chmod u+w {path} {path.parent}`), or choose another --state-dir"
        )
    damaged = "malformed" in str(exc) or "not a database" in str(exc)
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or damaged:
        return (
            f"{path}: the build history is damaged ({exc}); move it aside "
            f"(`mv {path} {path}.damaged`) to start a new one: the logs in builds/ are kept "
            "and new build ids continue after them"
        )
    if name.startswith("SQLITE_IOERR"):
        return f"{path}: the disk reported an error reading or writing the build history ({exc})"
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return (
            f"{path}: the build history stayed locked by another process for 10 s ({exc}); "
            "try again"
        )
    return f"{path}: the build history cannot be used ({exc}); choose another --state-dir"


class _Rows:
    """A statement's rows, read at once so that a damaged page fails inside `Connection`."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self.rows = cursor.fetchall()
        self.lastrowid = cursor.lastrowid
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)


class Connection:
    """The database connection; every SQLite failure becomes a HistoryError that says what to do
    (a full disk, a read-only or damaged file), never a traceback."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self.connection = connection

    def execute(self, statement: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> _Rows:
        try:
            return _Rows(self.connection.execute(statement, parameters))
        except sqlite3.Error as exc:
            raise HistoryError(_advice(self.path, exc)) from None

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self.connection.executemany(statement, rows)
        except sqlite3.Error as exc:
            raise HistoryError(_advice(self.path, exc)) from None

    def close(self) -> None:
        self.connection.close()
