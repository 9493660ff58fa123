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

A tree is one whatever the state directory: two users, or one user with two `--state-dir`s,
building the same checkout would otherwise build it twice at once. So every tree is also locked
in a host-wide folder every state directory uses (`host_lock_directory`: /run/lock/
workbench-trees, sticky and writable by all, as /run/lock itself is), and whoever holds it
says so in a holder file of their own beside it (`DIGEST.UID.holder`: user, build, state
directory, supervisor pid), which is how a refusal names another user's build. The host-wide
lock files are readable by all (an flock needs no more): a user who can read the folder can
hold a tree's lock, as they could take any other lock of this host; `--force` starts anyway.
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

from workbench.atomic_file import replace_file
from workbench.errors import WorkbenchError
from workbench.history import private_state

LOCK_DIRECTORY = "locks"
HOST_LOCK_FOLDER = "workbench-trees"
HOST_LOCK_ENV = "WORKBENCH_HOST_LOCK_DIR"


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


def host_lock_directory() -> Path | None:
    """The host-wide folder of tree locks (made sticky and writable by all, like /tmp), or
    None when it cannot be used safely (a link, or writable by others without the sticky bit)."""
    import stat
    import tempfile

    chosen = os.environ.get(HOST_LOCK_ENV)
    if chosen:
        directory = Path(chosen)
    else:
        base = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
        directory = Path(base) / HOST_LOCK_FOLDER
    try:
        os.mkdir(directory, 0o1777)
        os.chmod(directory, 0o1777)  # the umask took bits away
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        found = os.lstat(directory)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode):
        return None
    if found.st_mode & 0o002 and not found.st_mode & stat.S_ISVTX:
        return None  # anyone could remove or replace the lock files in it
    return directory


def _host_digest(tree: str) -> str:
    return hashlib.sha256(tree.encode("utf-8", "surrogateescape")).hexdigest()[:20]


def _open_host(tree: str) -> tuple[int, Path] | None:
    """The host-wide lock file of a tree, open (created readable by all); None when none."""
    directory = host_lock_directory()
    if directory is None:
        return None
    path = directory / f"{_host_digest(tree)}.lock"
    flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        return None
    try:
        import stat

        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        if info.st_uid == os.geteuid():
            os.fchmod(fd, 0o644)
    except OSError:
        os.close(fd)
        return None
    return fd, path


def host_holder(tree: str) -> dict[str, Any]:
    """Who holds the tree's host-wide lock, from the live holders' files ({} if unknown)."""
    directory = host_lock_directory()
    if directory is None:
        return {}
    import psutil

    for path in sorted(directory.glob(f"{_host_digest(tree)}.*.holder")):
        try:
            with open(path, "rb") as handle:
                said: dict[str, Any] = json.loads(handle.read(65536) or b"{}")
            pid = int(said.get("pid") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        if pid and psutil.pid_exists(pid):
            return said
    return {}


def _inside_holder(tree: str) -> bool:
    """Whether this process runs inside the build that holds the tree's host-wide lock (it
    carries that build's marker, its log's path): a `workbench run` its build script starts,
    with a state directory of its own, is part of that build, as its `stop` ends it too."""
    from workbench.supervision.tree import BUILD_MARKER

    marker = os.environ.get(BUILD_MARKER)
    return bool(marker) and host_holder(tree).get("log") == marker


def _host_busy(tree: str) -> LockBusy:
    holder = host_holder(tree)
    if not holder:
        return LockBusy(
            tree,
            {},
            f"another build (another user's, or of another --state-dir) is building {tree}",
        )
    who = f"build #{holder.get('build_id')}" + (
        f" ({holder['name']})" if holder.get("name") else ""
    )
    user = holder.get("user")
    mine = holder.get("uid") == os.geteuid()
    whose = (
        f"{who} of the state directory {holder.get('state_directory')}"
        if mine
        else f"user {user}'s {who} (state directory {holder.get('state_directory')})"
    )
    follow = (
        f"; follow it with `workbench --state-dir {holder.get('state_directory')} attach "
        f"{holder.get('build_id')}`"
        if mine
        else ""
    )
    return LockBusy(
        tree,
        {},
        f"{whose} is already building {tree} (supervisor pid {holder.get('pid')}){follow}",
    )


def describe_host(trees: Iterable[str], **owner: Any) -> None:
    """Say in the host-wide folder who holds these trees' locks (a file of this user's per
    tree, replaced atomically); never raises."""
    directory = host_lock_directory()
    if directory is None:
        return
    import pwd
    import socket

    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = str(os.geteuid())
    said = {"uid": os.geteuid(), "user": user, "host": socket.gethostname(), **owner}
    data = json.dumps(said, sort_keys=True).encode()
    for tree in trees:
        path = directory / f"{_host_digest(tree)}.{os.geteuid()}.holder"
        with contextlib.suppress(OSError):
            # readable by all: it names the holder to other users
            replace_file(path, data, mode=0o644, durable=False)


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
                # The host-wide lock: one build of the tree whatever the state directory.
                opened = _open_host(tree)
                if opened is not None:
                    host_fd, host_path = opened
                    try:
                        fcntl.flock(host_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError as exc:
                        os.close(host_fd)
                        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                            raise
                        if _inside_holder(tree):
                            continue  # a build started by the holder's own build: part of it
                        raise _host_busy(tree) from None
                    held.fds.append(host_fd)
                    held.paths.append(host_path)
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
