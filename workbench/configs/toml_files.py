"""Reading TOML with errors that name file, line and column; writing it atomically."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError

if TYPE_CHECKING:
    import tomlkit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_LOCATION = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_text(path: Path) -> str:
    """The file's text, or a ConfigError that says why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def load_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file into plain Python values (fast: stdlib tomllib)."""
    text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _LOCATION.search(message)
        reason = _LOCATION.sub("", message).strip()
        if found:
            line, column = found.groups()
            raise ConfigError(f"{path}:{line}:{column}: malformed TOML: {reason}") from None
        raise ConfigError(f"{path}: malformed TOML: {reason}") from None


def load_document(path: Path) -> tomlkit.TOMLDocument:
    """Parse a TOML file keeping comments, order and formatting, for editing."""
    # Imported here: tomlkit is only for editing, and reading the matrix (the TUI's first
    # screen) must not pay for it.
    import tomlkit
    import tomlkit.exceptions

    text = read_text(path)
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        reason = str(exc).split(" at line ")[0]
        raise ConfigError(f"{path}:{exc.line}:{exc.col}: malformed TOML: {reason}") from None


def line_of_key(text: str, key: str) -> int | None:
    """The 1-based line where `key = ...` is assigned at the start of a line, if any."""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=", re.MULTILINE)
    found = pattern.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else None


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so that readers see the old file or the new one, never half.

    Temp file in the same directory, fsync, rename over, fsync the directory; the file's mode
    is kept.
    """
    directory = path.parent
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as temp:
            temp.write(text)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    directory_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


@contextlib.contextmanager
def locked_directory(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on `directory` so two edits of its files cannot interleave."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
