"""Replacing a file whole: readers see the old file or the new one, never half of either.

The one way every file the workbench writes in place is written (settings, traces, ssh
configs, the iterate workspace's state, the keeper's and the lock holder's notes, screenshots):
a temporary file beside the target, created exclusively and never through a link, written
whole, flushed to disk, renamed over the target, and the directory flushed so the rename
itself survives a power cut. Standard library only: the keeper imports it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def replace_file(
    path: Path,
    data: bytes | str,
    *,
    mode: int = 0o600,
    durable: bool = True,
    owner: tuple[int, int] | None = None,
) -> None:
    """Replace `path` with `data` atomically; OSError (nothing changed) for the caller to word.

    `mode` is the new file's, exactly (the umask does not narrow it); `owner` (uid, gid) is
    given to it where this user may (else kept as created). `durable=False` skips the fsyncs:
    the new file may then be lost to a power cut, but is still never seen half written.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = path.parent if str(path.parent) else Path(".")
    temporary = directory / f".{path.name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)  # left by a process of this pid that died mid-write
    fd = os.open(temporary, flags, mode)
    try:
        try:
            os.fchmod(fd, mode)
            if owner is not None:
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, *owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if durable:
        directory_fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
