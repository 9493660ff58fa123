"""One build per tree: flocks on files in the state directory, one per tree a build works in.

A build is keyed on every tree it writes: the checkout it is launched from and the build tree
its command names (`ninja -C DIR`, `make -C DIR`, `cmake --build DIR`, ORT's
`build.sh --build_dir DIR`) with that tree's own checkout, so `ninja -C OTHER/build` started
elsewhere is refused while another build builds OTHER (`launch.build_trees` finds them).
A Nix build is keyed on its targets too ("the Nix target ATTR", from any flake directory): Nix
locks a derivation's outputs itself and gives each builder a new directory, so neither is a
tree to lock, but a second build of a target that a lost build still builds would wait on Nix's
lock without a word; it is refused instead, naming the build and `workbench stop N`.

The CLI takes the locks before it creates anything and hands the open descriptors to the
supervisor it starts, which passes them on to the build command. An flock belongs to the open
file description, not to a process: it is held as long as any process holding a copy lives.
So the lock outlives a supervisor killed with -9 while the build's compilers still run (they
hold copies), and is dropped by the kernel when the last of them exits, however they exit:
never a stale lock, never a tree built twice at once. The file only says who holds it.

Lock files are private (0600 in a 0700 folder, opened without following links): a lock file
another user can open is one another user can hold, blocking every build of the tree.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.supervision import private_state

LOCK_DIRECTORY = "locks"


class LockBusy(WorkbenchError):
    """Another build holds the lock of one of the trees this build works in."""

    def __init__(self, tree: str, holder: dict[str, Any], detail: str | None = None) -> None:
        self.tree = tree
        self.checkout = tree
        self.holder = holder
        self.detail = detail
        build = holder.get("build_id")
        who = f"build #{build}" if build else "another build"
        name = f" ({holder['name']})" if holder.get("name") else ""
        pid = f", supervisor pid {holder['pid']}" if holder.get("pid") else ""
        what = detail or f"{who}{name} is already building {tree}{pid}"
        follow = (
            f"; follow it with `workbench attach {build}`, stop it with `workbench stop {build}`,"
            if build
            else ";"
        )
        super().__init__(
            f"{what}{follow} or pass --force to start another build of this tree anyway"
        )


def lock_path(state_directory: Path, tree: str) -> Path:
    """The lock file of a tree (a hash of its path: any path fits in a file name)."""
    digest = hashlib.sha256(tree.encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return state_directory / LOCK_DIRECTORY / f"{digest}.lock"


def _open(state_directory: Path, tree: str) -> tuple[int, Path]:
    path = lock_path(state_directory, tree)
    private_state.private_directory(path.parent)
    return private_state.open_private(path, os.O_RDWR | os.O_CREAT), path


class BuildLock:
    """Held locks; `fds` are what the supervisor inherits, and the build after it."""

    def __init__(
        self, fds: list[int] | int, paths: list[Path] | Path, trees: tuple[str, ...] | str
    ) -> None:
        # One descriptor and one tree is how a supervisor of the single-lock days (still
        # running across an upgrade) hands over its checkout's lock.
        self.fds = [fds] if isinstance(fds, int) else list(fds)
        self.paths = [paths] if isinstance(paths, Path) else list(paths)
        self.trees = (trees,) if isinstance(trees, str) else tuple(trees)

    @property
    def checkout(self) -> str:
        """The first tree (kept for callers that name one)."""
        return self.trees[0] if self.trees else ""

    @classmethod
    def acquire(cls, state_directory: Path, trees: str | Iterable[str]) -> BuildLock:
        """Take every tree's lock now, or none: LockBusy names the first one held elsewhere."""
        wanted = (trees,) if isinstance(trees, str) else tuple(dict.fromkeys(trees))
        private_state.ensure_state_directory(state_directory)
        held = cls([], [], ())
        try:
            for tree in sorted(wanted):
                fd, path = _open(state_directory, tree)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    os.close(fd)
                    if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise LockBusy(tree, read_holder(path)) from None
                    raise
                held.fds.append(fd)
                held.paths.append(path)
        except BaseException:
            held.release()
            raise
        held.trees = wanted
        return held

    @classmethod
    def adopted(cls, fds: list[int], trees: tuple[str, ...]) -> BuildLock:
        """The locks a supervisor inherited (it only rewrites who holds them)."""
        return cls(list(fds), [Path()] * len(fds), trees)

    def describe(self, **owner: Any) -> None:
        """Write who holds the locks (build id, name, supervisor pid) into the lock files."""
        data = json.dumps({"trees": list(self.trees), **owner}, sort_keys=True).encode()
        for fd in self.fds:
            # The file must keep its inode (the lock is on it), so it is rewritten in place; a
            # reader that catches it half written gets no holder details, never a wrong one.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)

    def release(self) -> None:
        """Close the descriptors (dropping the locks unless another process holds copies)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def read_holder(path: Path) -> dict[str, Any]:
    """What the lock file says about its holder ({} if nothing readable)."""
    try:
        fd = private_state.open_private(path, os.O_RDONLY)
    except (OSError, WorkbenchError):
        return {}
    try:
        with os.fdopen(fd, "rb") as handle:
            value = json.loads(handle.read(65536).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def is_held(state_directory: Path, tree: str) -> bool:
    """Whether some process holds the tree's lock now."""
    path = lock_path(state_directory, tree)
    try:
        fd = private_state.open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def holders(paths: Iterable[Path]) -> list[int]:
    """PIDs of this user's processes that hold one of these lock files open (via /proc)."""
    wanted = set()
    for path in paths:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            wanted.add((info.st_dev, info.st_ino))
    if not wanted:
        return []
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        directory = f"/proc/{name}/fd"
        try:
            for fd in os.listdir(directory):
                info = os.stat(f"{directory}/{fd}")
                if (info.st_dev, info.st_ino) in wanted:
                    found.append(int(name))
                    break
        except OSError:
            continue
    return found


def adopt(fd: int) -> None:
    """In the supervisor: keep an inherited lock descriptor out of other programs it starts
    (it is passed to the build command explicitly, with Popen's pass_fds)."""
    os.set_inheritable(fd, False)
