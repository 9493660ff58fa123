"""The state directory is private to its user: directories 0700, files 0600, no links followed.

Build logs hold whatever a build prints (tokens, paths, environment dumps), the history holds
every command line, and a lock another user could open is a lock another user could hold. So,
whatever the umask:

- the state directory must belong to the user running the workbench and must not be writable
  by anyone else (a directory others can write is one where they can plant a link or a file);
  a looser mode on the user's own directory is tightened to 0700;
- every directory the workbench makes in it is 0700, every file 0600 (modes are set with
  chmod after creation, since the umask only ever removes bits);
- files are opened with O_NOFOLLOW and must be regular files of the user: a symbolic link
  planted where a log or the database goes is refused, never written through.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

from workbench.errors import WorkbenchError

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


class StateError(WorkbenchError):
    """The state directory or a file in it is not safe to use; the message says what to do."""


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _shown(path: Path) -> str:
    """A path for a message, with bytes that are not UTF-8 shown as escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def require_utf8(path: Path) -> None:
    """Refuse a path that is not UTF-8: the history stores paths as text."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        raise StateError(
            f"{_shown(path)}: the state directory's path is not UTF-8 text, and the build "
            "history stores paths as text; choose a UTF-8 path with --state-dir or "
            "$WORKBENCH_STATE_DIR"
        ) from None


def ensure_state_directory(directory: Path) -> Path:
    """Create the state directory (0700) or check an existing one; returns it.

    Refuses a directory owned by another user or writable by others; tightens the user's own
    directory to 0700.
    """
    directory = Path(directory)
    require_utf8(directory)
    try:
        directory.mkdir(parents=True, mode=DIRECTORY_MODE, exist_ok=True)
        info = directory.stat()  # a link to the user's own directory elsewhere is fine
    except OSError as exc:
        raise StateError(
            f"{_shown(directory)}: cannot use it as the state directory "
            f"({exc.strerror or exc}); choose another with --state-dir"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(
            f"{_shown(directory)}: not a directory; choose a state directory with --state-dir"
        )
    me = os.geteuid()
    if info.st_uid != me:
        raise StateError(
            f"{_shown(directory)}: owned by {_user_name(info.st_uid)}, not by you "
            f"({_user_name(me)}); a state directory holds your build logs and locks and must "
            "be your own: choose one with --state-dir"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StateError(
            f"{_shown(directory)}: writable by others (mode {stat.S_IMODE(info.st_mode):04o}), "
            "so anyone could plant files or links in it; make it private "
            f"(chmod 700 {_shown(directory)}) or choose another with --state-dir"
        )
    if stat.S_IMODE(info.st_mode) != DIRECTORY_MODE:
        _chmod(directory, DIRECTORY_MODE)
    return directory


def _chmod(path: Path, mode: int) -> None:
    try:
        os.chmod(path, mode, follow_symlinks=False)
    except OSError as exc:
        if exc.errno != errno.EROFS:  # nothing can be planted on a read-only file system
            raise StateError(
                f"{_shown(path)}: cannot make it private ({exc.strerror}); fix its mode "
                "by hand or choose another --state-dir"
            ) from None


def private_directory(path: Path) -> Path:
    """A directory in the state directory: made 0700, refused when it is a link."""
    path = Path(path)
    try:
        os.mkdir(path, DIRECTORY_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StateError(f"{_shown(path)}: cannot create it: {exc.strerror}") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise StateError(
            f"{_shown(path)}: is a symbolic link; the workbench never follows links in its "
            "state directory: remove it"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(f"{_shown(path)}: not a directory; remove it")
    if info.st_uid != os.geteuid():
        raise StateError(
            f"{_shown(path)}: owned by {_user_name(info.st_uid)}, not by you; remove it"
        )
    if stat.S_IMODE(info.st_mode) != DIRECTORY_MODE:
        _chmod(path, DIRECTORY_MODE)
    return path


def make_directory(path: Path) -> None:
    """A new private directory that must not exist yet (FileExistsError if it does)."""
    os.mkdir(path, DIRECTORY_MODE)
    _chmod(path, DIRECTORY_MODE)


def _linked_file(path: Path) -> StateError:
    return StateError(
        f"{_shown(path)}: is a symbolic link; the workbench never writes through links "
        "in its state directory (one planted there could send a build's output to "
        "another file): remove it"
    )


def _mode_to_set(path: Path, info: os.stat_result) -> int | None:
    """The mode a state file (`info`: its stat) must be given, None when it has it already:
    group and other bits removed, the owner's left as they are. StateError when it is not a
    regular file of this user."""
    if not stat.S_ISREG(info.st_mode):
        raise StateError(f"{_shown(path)}: not a regular file; remove it")
    if info.st_uid != os.geteuid():
        raise StateError(
            f"{_shown(path)}: owned by {_user_name(info.st_uid)}, not by you; remove it"
        )
    mode = stat.S_IMODE(info.st_mode)
    wanted = mode & 0o700 or FILE_MODE
    return None if mode == wanted else wanted


def open_private(path: Path, flags: int) -> int:
    """os.open for a state file: O_NOFOLLOW, created 0600, a regular file of this user.

    Group and other bits of an existing file are removed; the owner's bits are left as they
    are (a read-only database stays read-only and is reported as such).
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _linked_file(path) from None
        raise
    try:
        wanted = _mode_to_set(path, os.fstat(fd))
        if wanted is not None:
            try:
                os.fchmod(fd, wanted)
            except OSError as exc:
                if exc.errno != errno.EROFS:
                    raise
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_private_file(path: Path, create: bool) -> None:
    """Check (and with `create`, create) a state file that another library opens by name.

    An existing file is checked with lstat, never opened: closing a descriptor of a file drops
    every POSIX lock this process holds on it, those of an SQLite connection this process keeps
    open to the same database included (SQLite's "How To Corrupt", 2.2). Another process then
    took the database for unused and deleted its -wal and -shm under the kept connection, whose
    later reads were stale and whose writes were lost."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return
        # O_EXCL: a file new to this process, on which it can hold no lock to drop. O_NONBLOCK
        # and O_NOFOLLOW (open_private): nothing planted meanwhile is followed or waited on.
        try:
            fd = open_private(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            info = os.lstat(path)  # made meanwhile: checked as any existing file
        else:
            os.close(fd)
            return
    if stat.S_ISLNK(info.st_mode):
        raise _linked_file(path)
    wanted = _mode_to_set(path, info)
    if wanted is not None:
        _chmod(path, wanted)
