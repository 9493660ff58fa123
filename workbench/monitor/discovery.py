"""Which processes belong to a build, and which build processes run on the host at all.

A build's processes are the launched command and its descendants (single-user Nix, cmake,
ninja, make, ./build.sh) and, with a nix-daemon, the builders the daemon forks: those run as
`nixbld*` users as children of a `nix-daemon` process, not of `nix build`. A daemon serves every
user's builds at once, so once this build's derivations are known (`BuildDerivations`) a builder
is attributed to it by the store path it builds (`out` in its environment) where its environment
can be read, else by its derivation's name: from its working directory
(`/tmp/nix-build-<name>.drv-N` without a sandbox; `/build` inside one) or its arguments. Two
builds of derivations of the same name at once (two users' onnxruntime-1.22.0 with different
patches) are told apart only the first way.

Newer Nix can allocate builder uids itself (`auto-allocate-uids`): those have no user name, so
the "parent is nix-daemon" rule is what finds them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from workbench.monitor import procfs
from workbench.monitor.classification import ProcessKind, classify
from workbench.monitor.derivation_file import derivation_name, read_outputs, scratch_path

NIX_DAEMON = "nix-daemon"
_NIXBLD = re.compile(r"^nixbld\d*$")
_BUILD_DIR = re.compile(r"/nix-build-(.+)\.drv-\d+(?:/|$)")
_ENV_NAMES = ("name", "out", "NIX_BUILD_TOP")


def is_nixbld_user(user: str) -> bool:
    """Whether a user name is one of Nix's build users (nixbld, nixbld1, nixbld32, ...)."""
    return _NIXBLD.match(user) is not None


def derivation_from_build_dir(path: str) -> str | None:
    """The derivation name in a Nix build directory, else None.

    "/tmp/nix-build-onnxruntime-1.23.2.drv-0/source" gives "onnxruntime-1.23.2".
    """
    found = _BUILD_DIR.search(path)
    return found.group(1) if found else None


def builder_derivation(environment: dict[str, str], cwd: str | None) -> str | None:
    """The derivation name a builder process works for, from its environment or directory."""
    name = environment.get("name")
    if name:
        return name
    for text in (environment.get("NIX_BUILD_TOP"), cwd):
        if text:
            found = derivation_from_build_dir(text)
            if found:
                return found
    out = environment.get("out", "")
    base = out.rpartition("/")[2]
    # A store path's base name is "<32-char hash>-<name>".
    if len(base) > 33 and base[32] == "-":
        return base[33:]
    return None


def builder_name(pid: int) -> str | None:
    """The derivation name the builder process `pid` works for (its environment, its build
    directory, else a build directory in its arguments), None when it says none.

    A user other than root may read neither the environment nor the working directory of a
    `nixbld*` process (both need ptrace access), only its arguments, which are world-readable:
    a compiler's absolute source path (`/tmp/nix-build-NAME.drv-0/...`, as CMake writes
    them) names the derivation it compiles for."""
    found = builder_derivation(procfs.read_environ(pid, _ENV_NAMES), procfs.read_cwd(pid))
    return found if found is not None else derivation_in_argv(procfs.read_cmdline(pid))


def derivation_in_argv(argv: list[str]) -> str | None:
    """The derivation whose build directory an argument names, when exactly one does."""
    found = {name for arg in argv[1:] if (name := derivation_from_build_dir(arg)) is not None}
    return found.pop() if len(found) == 1 else None


class BuildDerivations:
    """The derivations one build builds, as its supervisor learns them from the Nix log: their
    names and, where the derivation file could be read, the store paths of their outputs."""

    __slots__ = ("_drv_paths", "_named_only", "names", "outputs")

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.outputs: set[str] = set()
        """Store paths the build's builders write (`out`): its derivations' outputs, read from
        their `.drv` files, and where Nix builds each again beside a present copy."""
        # Names of a derivation whose outputs are not known (given by name alone, its .drv not
        # readable here, or an output whose path Nix only learns as it builds it).
        self._named_only: set[str] = set()
        self._drv_paths: set[str] = set()

    def add(self, names: Iterable[str] = (), drv_paths: Iterable[str] = ()) -> bool:
        """Learn derivations by name (matched by name only) or by `.drv` path (by their outputs,
        read once here); whether any was new."""
        new_names = set(names) - self._named_only
        new_paths = set(drv_paths) - self._drv_paths
        self._named_only |= new_names
        self.names |= new_names
        for path in new_paths:
            self._drv_paths.add(path)
            name = derivation_name(path)
            self.names.add(name)
            outputs = read_outputs(path)
            if outputs is None or "" in outputs.values():
                self._named_only.add(name)
                continue
            # A builder's `out` is its output's path, or where Nix builds it again beside a
            # present copy (`nix build --rebuild` without a sandbox).
            for output in outputs.values():
                self.outputs.update((output, scratch_path(path, output)))
        return bool(new_names or new_paths)

    def by_name_only(self, name: str) -> bool:
        """Whether builders of `name` are attributed by their name alone: some derivation of
        that name is known without its outputs."""
        return name in self._named_only


def attribute_builder(pid: int, derivations: BuildDerivations) -> str | None:
    """Which of this build's derivations the builder process `pid` builds (its name), else None
    (another build's, or not known yet).

    Where its environment can be read (root; single-user Nix), by the exact store path it builds
    (`out`): of two derivations of the same name built at once (another user's build of the
    same release with other patches), only this build's counts. Where it cannot (a user other
    than root, under a nix-daemon: the environment of a `nixbld*` process is closed to it), or
    for a derivation whose outputs are not known (`BuildDerivations.by_name_only`), by its
    derivation's name only (`builder_name`): that fallback cannot tell same-named derivations
    apart, and takes another build's builder of a derivation named as one of this build's."""
    environment = procfs.read_environ(pid, _ENV_NAMES)
    found = builder_derivation(environment, procfs.read_cwd(pid))
    if found is None:
        found = derivation_in_argv(procfs.read_cmdline(pid))
    if found is None or found not in derivations.names:
        return None
    out = environment.get("out", "")
    if out.startswith("/") and not derivations.by_name_only(found):
        return found if out in derivations.outputs else None
    return found


@dataclass(frozen=True, slots=True)
class HostBuildProcess:
    """A build-related process found anywhere on the host (for the pre-launch warning)."""

    pid: int
    user: str
    kind: ProcessKind
    tool: str
    file: str | None
    cwd: str | None


# Kinds worth warning about: another build competes for cores and memory.
_WARN_KINDS = (ProcessKind.DRIVER, ProcessKind.COMPILER, ProcessKind.CUDA, ProcessKind.LINKER)


def find_host_build_processes(exclude: Collection[int] = ()) -> list[HostBuildProcess]:
    """Build processes running on this host now: drivers, compilers, CUDA tools, linkers,
    and processes of Nix build users, each with what it is working on.

    `exclude`: PIDs to leave out (the caller's own). One pass over /proc; meant for preflight.
    """
    found: list[HostBuildProcess] = []
    for pid in procfs.list_pids():
        if pid in exclude:
            continue
        result = procfs.read_stat(pid)
        if result is None:
            continue
        stat = result[1]
        uid = procfs.uid_of(pid)
        user = procfs.user_name(uid) if uid is not None else "?"
        what = classify(stat.comm, procfs.read_cmdline(pid))
        if what.kind in _WARN_KINDS or (is_nixbld_user(user) and stat.state != "Z"):
            found.append(
                HostBuildProcess(pid, user, what.kind, what.tool, what.file, procfs.read_cwd(pid))
            )
    return found
