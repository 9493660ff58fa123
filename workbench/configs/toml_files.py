"""Reading TOML with errors that name file, line and column; writing it atomically."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.atomic_file import replace_file
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
        data = exc.object
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"{path}:{line}:{column}: not UTF-8 text ({exc.reason}: byte "
            f"0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


# TOML itself has no limit on a number's digits or on nesting; Python's int conversion refuses
# more than 4300 digits (a ValueError, not a TOML error) and tomllib recurses once per level.
_LONG_NUMBER = re.compile(r"[0-9][0-9_]{99,}")
_MAX_NESTING = 100


def _too_long_number(path: Path, text: str) -> ConfigError | None:
    found = _LONG_NUMBER.search(text)
    if found is None:
        return None
    line = text.count("\n", 0, found.start()) + 1
    column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
    digits = len(found.group().replace("_", ""))
    return ConfigError(
        f"{path}:{line}:{column}: a number with {digits} digits: refused (out of range); "
        "no setting takes more than 19 digits: fix or delete that line"
    )


def _too_deep(path: Path, text: str) -> ConfigError:
    """Where nesting first passes the limit (brackets outside strings and comments)."""
    depth = 0
    line = 1
    quote = ""
    comment = False
    for index, char in enumerate(text):
        if char == "\n":
            line += 1
            comment = False
            continue
        if comment:
            continue
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = ""
            continue
        if char in "\"'":
            quote = char
        elif char == "#":
            comment = True
        elif char in "[{":
            depth += 1
            if depth > _MAX_NESTING:
                break
        elif char in "]}":
            depth -= 1
    return ConfigError(
        f"{path}:{line}: malformed TOML: values nested more than {_MAX_NESTING} levels deep; "
        "no setting nests more than one list: fix that line"
    )


def load_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file into plain Python values (fast: stdlib tomllib)."""
    text = read_text(path)
    try:
        document: dict[str, Any] = tomllib.loads(text)  # Any where tomli has no types (3.10)
        return document
    except RecursionError:
        raise _too_deep(path, text) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _LOCATION.search(message)
        reason = _LOCATION.sub("", message).strip()
        if found:
            line, column = found.groups()
            raise ConfigError(f"{path}:{line}:{column}: malformed TOML: {reason}") from None
        if "(at end of document)" in reason:
            # The last line, just after its last character (where the parser ran out).
            reason = reason.replace("(at end of document)", "").strip()
            body = text.rstrip("\n")
            line = body.count("\n") + 1
            column = len(body) - (body.rfind("\n") + 1) + 1
            raise ConfigError(
                f"{path}:{line}:{column}: malformed TOML: {reason}, at the end of the file"
            ) from None
        raise ConfigError(f"{path}:1: malformed TOML: {reason}") from None
    except ValueError as exc:  # Python's limit on int conversion, raised through tomllib
        raise _too_long_number(path, text) or ConfigError(f"{path}: {exc}") from None


def load_document(path: Path) -> tomlkit.TOMLDocument:
    """Parse a TOML file keeping comments, order and formatting, for editing."""
    # Imported here: tomlkit is only for editing, and reading the matrix (the TUI's first
    # screen) must not pay for it.
    import tomlkit
    import tomlkit.exceptions

    text = read_text(path)
    try:
        return tomlkit.parse(text)
    except RecursionError:
        raise _too_deep(path, text) from None
    except tomlkit.exceptions.ParseError as exc:
        too_long = _too_long_number(path, text)
        if too_long is not None and isinstance(exc, tomlkit.exceptions.InvalidNumberError):
            raise too_long from None
        reason = str(exc).split(" at line ")[0]
        raise ConfigError(f"{path}:{exc.line}:{exc.col}: malformed TOML: {reason}") from None
    except ValueError as exc:
        raise _too_long_number(path, text) or ConfigError(f"{path}: {exc}") from None


def locate_key(text: str, key: str) -> tuple[int, int] | None:
    """(line, column), 1-based, where top-level `key` is given a value: `key = ...`, quoted
    (`"key" = ...`, `'key' = ...`), dotted (`key.sub = ...`) or as a table (`[key]`,
    `[key.sub]`, `[[key]]`); else the first line that holds the key's text; None if none does."""
    name = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    patterns = (
        rf"^[ \t]*({name})[ \t]*(?:=|\.)",
        rf"^[ \t]*\[\[?[ \t]*({name})[ \t]*[\].]",
    )
    found = [m for p in patterns if (m := re.search(p, text, re.MULTILINE)) is not None]
    if not found:
        plain = re.search(re.escape(key), text)
        if plain is None:
            return None
        start = plain.start()
    else:
        start = min(match.start(1) for match in found)
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


def line_of_key(text: str, key: str) -> int | None:
    """The 1-based line where `key` is given a value (`locate_key`), if any."""
    found = locate_key(text, key)
    return found[0] if found else None


def _line_endings_of(path: Path, text: str) -> str:
    """`text` with the line endings the file at `path` uses now (CRLF kept as CRLF)."""
    try:
        with open(path, "rb") as handle:
            old = handle.read(1 << 20)
    except OSError:
        return text
    crlf = old.count(b"\r\n")
    if crlf and crlf * 2 >= old.count(b"\n"):
        return re.sub(r"(?<!\r)\n", "\r\n", text)
    return text


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so that readers see the old file or the new one, never half.

    `workbench.atomic_file.replace_file`: temp file beside it, fsync, rename over, fsync the
    directory. A symbolic link
    is followed: its target is what changes (the link stays a link). The file's mode, owner
    (where this user may set it) and line endings are kept; a read-only file is refused, not
    replaced. An unwritable directory or a full disk is a ConfigError that says what to do.
    """
    path = Path(os.path.realpath(path)) if os.path.islink(path) else path
    directory = path.parent
    try:
        info: os.stat_result | None = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror}") from None
    mode = 0o644 if info is None else info.st_mode & 0o7777
    if info is not None and not mode & 0o200:
        # Root may write any file; a file its owner made read-only is still not to be edited.
        raise ConfigError(
            f"{path}: read-only (mode {mode:04o}): refused; make it writable "
            f"(chmod u+w {path}) to change it, or edit a copy (--config DIR)"
        )
    text = _line_endings_of(path, text)
    owner = None if info is None else (info.st_uid, info.st_gid)
    try:
        replace_file(path, text.encode("utf-8"), mode=mode, owner=owner)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise ConfigError(
                f"{directory}: cannot write there ({exc.strerror}); {path.name} is changed by "
                f"writing a new copy beside it: make {directory} writable, or copy the configs "
                "to a folder of yours and pass --config DIR"
            ) from None
        raise ConfigError(
            f"{path}: cannot write it ({exc.strerror}); nothing was changed: free space "
            f"on its disk or make {directory} writable, then try again"
        ) from None


@contextlib.contextmanager
def locked_directory(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on `directory` so two edits of its files cannot interleave."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError as exc:
        raise ConfigError(f"{directory}: cannot open the folder: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
