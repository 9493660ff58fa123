"""One build per checkout: an flock on a file in the state directory, keyed by the checkout path.

The CLI takes the lock before it creates anything and hands the open descriptor to the
supervisor it starts, which holds it for the life of the build. An flock belongs to the open
file, not to a process and not to the file's contents: when the supervisor exits, however it
exits (kill -9, a crash, a reboot), the kernel drops the lock, so a crashed run never leaves a
stale lock behind. The file only says who holds it, for the refusal message.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

LOCK_DIRECTORY = "locks"


class LockBusy(WorkbenchError):
    """Another build of the same checkout holds the lock."""

    def __init__(self, checkout: str, holder: dict[str, Any]) -> None:
        self.checkout = checkout
        self.holder = holder
        build = holder.get("build_id")
        who = f"build #{build}" if build else "another build"
        name = f" ({holder['name']})" if holder.get("name") else ""
        pid = f", supervisor pid {holder['pid']}" if holder.get("pid") else ""
        follow = (
            f"; follow it with `workbench attach {build}`, stop it with `workbench stop {build}`,"
            if build
            else ";"
        )
        super().__init__(
            f"{who}{name} is already running in {checkout}{pid}{follow} or pass --force to "
            "start another build of this checkout anyway"
        )


def lock_path(state_directory: Path, checkout: str) -> Path:
    """The lock file of a checkout (a hash of its path: any path fits in a file name)."""
    digest = hashlib.sha256(checkout.encode()).hexdigest()[:20]
    return state_directory / LOCK_DIRECTORY / f"{digest}.lock"


class BuildLock:
    """A held lock; `fd` is what the supervisor inherits to keep holding it."""

    def __init__(self, fd: int, path: Path, checkout: str) -> None:
        self.fd = fd
        self.path = path
        self.checkout = checkout

    @classmethod
    def acquire(cls, state_directory: Path, checkout: str) -> BuildLock:
        """Take the checkout's lock now, or raise LockBusy saying who holds it."""
        path = lock_path(state_directory, checkout)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise LockBusy(checkout, read_holder(path)) from None
            raise
        return cls(fd, path, checkout)

    def describe(self, **owner: Any) -> None:
        """Write who holds the lock (build id, name, supervisor pid) into the lock file."""
        data = json.dumps({"checkout": self.checkout, **owner}, sort_keys=True).encode()
        # The file must keep its inode (the lock is on it), so it is rewritten in place; a
        # reader that catches it half written gets no holder details, never a wrong one.
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        """Close the descriptor (dropping the lock unless a child inherited it)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def read_holder(path: Path) -> dict[str, Any]:
    """What the lock file says about its holder ({} if nothing readable)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def is_held(state_directory: Path, checkout: str) -> bool:
    """Whether some process holds the checkout's lock now."""
    path = lock_path(state_directory, checkout)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def adopt(fd: int) -> None:
    """In the supervisor: keep the inherited lock descriptor, but never pass it to the build."""
    os.set_inheritable(fd, False)
