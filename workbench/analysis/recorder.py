"""Follows a running build's `.ninja_log` and turns it into exact, stored edges.

Where the log is:
- the build's own command says (`ninja -C DIR`, `ninja` in the working directory, `cmake
  --build DIR`): known before the build starts, so the entries already there are left out
  exactly;
- otherwise (a Nix builder in its temporary directory, ORT's build.sh, the iterate workspace's
  driver): every `ninja` process the sampler sees is asked for its working directory (where
  its `-C` took it) and targets, and the log there is followed from then on. Entries ninja
  wrote before it was found are taken back when they fit the running ninja: the tail of the
  log whose end times rise and fit the time since that ninja started.

A found ninja's build directory is its working directory (ninja's first act is `chdir` to its
`-C`), opened through the process's own view of the file system (`/proc/PID/cwd`): a sandboxed
Nix builder (Nix's Linux default) runs in a mount namespace of its own, and the `/build/...` that
`readlink /proc/PID/cwd` names does not exist in the supervisor's. The directory stays open
(`O_PATH`) after ninja exits, so the log, the manifest and `ninja -t graph` are read through
`/proc/<supervisor>/fd/N` until the recorder finishes; names (the stored log path, the work
key) stay ninja's own.

The ninja graph (`ninja -t graph`) is read as soon as a log is found (a Nix builder's directory
is gone when the build ends) and again at the end when the directory is still there and its
build.ninja changed (or an edge of the run wrote a manifest). The sampled compile jobs (1 Hz)
add their peak RSS and CPU seconds to the edges that compiled the same source at the same time
(`match_sampled`).

Edge times count from ninja's own clock, which starts after the ninja process did: after its
manifest is parsed, and, for a ninja a wrapper exec'd (`sh -c '...; exec ninja'`), after the
wrapper ran, since the process keeps the wrapper's start time. ninja flushes each entry as its
edge ends, so the log's modification time read just after an entry minus that entry's end is an
upper bound of ninja's start, as the process's start is a lower bound; the least upper bound seen
(within the first ninja run of the log) is taken (`EdgeRecorder.origin`).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.analysis.edges import Edge, EdgeAssembler
from workbench.analysis.graph import BuildGraph, GraphError, read_graph
from workbench.analysis.ninja_log import LOG_NAME, LogEntry, NinjaLogReader, parse_line

# Where CMake's configure step runs its throwaway try-compile builds (CMake >= 3.24 and before
# it): a ninja there is not the build's, and its log must never stand for the build's.
_CMAKE_SCRATCH = ("/CMakeFiles/CMakeScratch/", "/CMakeFiles/CMakeTmp")


def is_cmake_scratch(directory: Path | str) -> bool:
    """Whether `directory` is (inside) a CMake try-compile tree."""
    text = f"{directory}/"
    return any(part in text for part in _CMAKE_SCRATCH)


# ninja options that take a value (ninja --help): what is left are targets.
_NINJA_VALUE_OPTIONS = frozenset(("-C", "-f", "-j", "-k", "-l", "-d", "-t", "-w"))


@dataclass(frozen=True)
class NinjaCommand:
    """What a ninja command line builds: its directory and targets."""

    directory: Path
    targets: tuple[str, ...]


def ninja_command(argv: Sequence[str], cwd: Path) -> NinjaCommand | None:
    """The build tree and targets of `ninja ...` or `cmake --build DIR [--target T...]`."""
    if not argv:
        return None
    start = 0
    while start < len(argv) and (
        os.path.basename(argv[start]) in ("env", "nice", "time", "ionice", "taskset", "stdbuf")
        or "=" in argv[start]
        or (start > 0 and argv[start].startswith("-"))
    ):
        start += 1
    if start >= len(argv):
        return None
    program = os.path.basename(argv[start])
    rest = list(argv[start + 1 :])
    if program in ("ninja", "samu", "ninja-build"):
        directory, targets, index = cwd, [], 0
        while index < len(rest):
            arg = rest[index]
            if arg in _NINJA_VALUE_OPTIONS and index + 1 < len(rest):
                if arg == "-C":
                    directory = cwd / rest[index + 1]
                if arg == "-t":
                    return None  # a ninja tool, not a build
                index += 2
                continue
            if arg.startswith("-C") and len(arg) > 2:
                directory = cwd / arg[2:]
            elif arg == "--":
                targets += rest[index + 1 :]
                break
            elif not arg.startswith("-"):
                targets.append(arg)
            index += 1
        return NinjaCommand(Path(os.path.normpath(directory)), tuple(targets))
    if program == "cmake" and "--build" in rest:
        at = rest.index("--build")
        if at + 1 >= len(rest):
            return None
        directory = cwd / rest[at + 1]
        targets = []
        for index, arg in enumerate(rest):
            if arg in ("--target", "-t"):
                targets += [t for t in rest[index + 1 :] if not t.startswith("-")][:1]
        return NinjaCommand(Path(os.path.normpath(directory)), tuple(targets))
    return None


def work_key(command: NinjaCommand) -> str:
    """Builds with the same key built the same things: same build tree, same targets."""
    text = json.dumps([str(command.directory.resolve()), sorted(command.targets)])
    return "ninja:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def derivation_work_key(derivation: str, targets: Sequence[str]) -> str:
    """`work_key` of a Nix builder's ninja: the store path its derivation builds and its targets
    (its directory, /build/source/build in every sandbox, tells nothing). The same path is the
    same derivation: another release or variant is another work, found as another tree of the
    same sources (`History.runs_of_other_work`)."""
    text = json.dumps([derivation, sorted(targets)])
    return "nix:" + hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SampledJob:
    """A compile job the sampler saw (from `monitor.JobRecord`): its source, when, its peak
    and the CPU its processes used (at least: what the last sample of each saw)."""

    file: str | None
    started: float
    seconds: float
    peak_rss: int
    cpu_s: float | None = None


@dataclass(frozen=True)
class StoredEdge:
    """An edge as the history stores it (epoch times)."""

    outputs: tuple[str, ...]
    started: float
    ended: float
    session: int
    command_hash: str
    rule: str | None
    deps: tuple[str, ...] | None
    peak_rss: int | None
    cpu_s: float | None = None
    """Sampled: CPU its compiler's processes used (a lower bound); None when never sampled."""


@dataclass
class _Followed:
    reader: NinjaLogReader
    directory: Path
    """The build directory as ninja names it (stored, and the work key's)."""
    targets: tuple[str, ...]
    ninja_started: float | None
    opened: int | None = None
    """A found ninja's directory, open (O_PATH) through the process's own view; None: the
    directory is read by its name (the command's own, in the supervisor's view)."""
    assembler: EdgeAssembler = field(default_factory=EdgeAssembler)
    graph: BuildGraph | None = None
    graph_error: str | None = None
    # build.ninja as it was just before the graph was read: the same file at the end (and no
    # edge of this run rewrote a manifest) means the same graph, so it is not read again.
    manifest: tuple[int, int, int] | None = None
    derivation: str | None = None
    """A Nix builder's ninja: the store path its derivation builds (the builder's `out`), which
    tells one derivation's tree from another's where every sandbox names it /build/source/build;
    None: not a builder's (or its environment could not be read)."""
    argv: tuple[str, ...] = ()
    """A found ninja's command line (its -j: `planning.launch.jobs_in_argv`)."""
    # The least (log mtime - last entry's end) seen: ninja's clock started at or before it.
    started_by: float | None = None
    last_end_ms: int = -1
    one_run: bool = True  # no end time fell back: one ninja process wrote every entry read

    def add(self, entries: list[LogEntry]) -> list[Edge]:
        """Fold entries just read in; bound ninja's start from the log's modification time."""
        for entry in entries:
            if entry.end_ms < self.last_end_ms:
                self.one_run = False
            self.last_end_ms = max(self.last_end_ms, entry.end_ms)
        if entries and self.one_run:
            try:
                modified = self.reader.path.stat().st_mtime
            except OSError:
                modified = None
            if modified is not None:
                bound = modified - self.last_end_ms / 1000.0
                if self.started_by is None or bound < self.started_by:
                    self.started_by = bound
        return self.assembler.add(entries)

    @property
    def readable(self) -> Path:
        """Where the supervisor reads the build directory: through its open descriptor, or by
        name."""
        if self.opened is None:
            return self.directory
        return Path(f"/proc/{os.getpid()}/fd/{self.opened}")

    def close(self) -> None:
        """Let go of the open directory and log (the recorder finished)."""
        self.reader.close()
        if self.opened is not None:
            os.close(self.opened)
            self.opened = None


# Another build directory of the same sources beside this one (build/Linux/Release beside
# build/Linux/Debug, build-asan beside build): of the build directory's parent, at most this many
# subdirectories are looked at for a `.ninja_log`, and the newest `SIBLING_LOGS` of those are
# offered to the ETA (`sibling_logs`), a log larger than `SIBLING_LOG_BYTES` never.
SIBLING_DIRECTORIES = 64
SIBLING_LOGS = 5
SIBLING_LOG_BYTES = 16 << 20


def sibling_logs(directory: Path) -> list[Path]:
    """The `.ninja_log`s of `directory`'s siblings (its parent's other subdirectories), newest
    first; [] where the parent cannot be read."""
    found: list[tuple[float, Path]] = []
    try:
        with os.scandir(directory.parent) as entries:
            for index, entry in enumerate(entries):
                if index >= SIBLING_DIRECTORIES:
                    break
                if entry.name == directory.name or not entry.is_dir(follow_symlinks=False):
                    continue
                log = Path(entry.path) / LOG_NAME
                try:
                    stat = log.stat()
                except OSError:
                    continue
                if 0 < stat.st_size <= SIBLING_LOG_BYTES:
                    found.append((stat.st_mtime, log))
    except OSError:
        return []
    found.sort(reverse=True)
    return [log for _, log in found[:SIBLING_LOGS]]


def builder_output(pid: int) -> str | None:
    """The store path a Nix builder process builds: `out` in its environment, which its children
    inherit (Nix passes each output's path to the builder in the environment variable named
    after the output: NixOS/nix doc/manual/src/language/derivations.md, `outputs`; `nix-store
    --print-env` shows it); None for a process that is no builder's, or whose environment
    cannot be read (another user's, without root: the same access as its working directory)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environment = handle.read()
    except OSError:
        return None
    for entry in environment.split(b"\0"):
        if entry.startswith(b"out=/"):
            path = entry[4:].decode("utf-8", "surrogateescape")
            return path if "/store/" in path else None
    return None


def open_working_directory(pid: int) -> int:
    """Process `pid`'s working directory, opened O_PATH through `/proc/PID/cwd`: it is there in
    the process's mount namespace, which may not be ours (a sandboxed Nix builder's `/build`).
    Raises OSError."""
    return os.open(f"/proc/{pid}/cwd", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def _tail_of_this_run(path: Path, ninja_started: float, now: float) -> NinjaLogReader:
    """A reader of a log found while its ninja ran: the entries it already wrote come back."""
    reader = NinjaLogReader.at_build_start(path)
    try:
        modified = path.stat().st_mtime
        data = path.read_bytes()
    except OSError:
        return reader
    if modified < ninja_started:
        return reader  # nothing written since this ninja started
    lines = [line for line in data[: data.rfind(b"\n") + 1].split(b"\n")[1:] if line]
    limit_ms = (now - ninja_started) * 1000.0 + 1000.0
    taken: list[bytes] = []
    last_end: int | None = None
    for line in reversed(lines):
        entry = parse_line(line)
        if entry is None or entry.end_ms > limit_ms:
            break
        if last_end is not None and entry.end_ms > last_end:
            break  # end times fall going back within one run; a rise is the run before
        taken.append(line)
        last_end = entry.end_ms
    reader.take_back(taken)
    return reader


class EdgeRecorder:
    """Finds the build's ninja logs and follows them; see the module docstring."""

    def __init__(
        self,
        argv: Sequence[str],
        cwd: Path,
        clock: Callable[[], float] = time.time,
        graph_reader: Callable[[Path, Sequence[str]], BuildGraph] = read_graph,
    ) -> None:
        self.clock = clock
        self.started = clock()
        self.read_graph = graph_reader
        self.followed: dict[Path, _Followed] = {}
        self._seen: set[tuple[int, float]] = set()
        # A found ninja's directory by its (device, inode): two sandboxed builders both name
        # theirs /build/..., one ninja run after another in a directory is one log.
        self._found: dict[tuple[int, int], Path] = {}
        self.command = ninja_command(argv, Path(cwd))
        if self.command is not None:
            log = self.command.directory / LOG_NAME
            self.followed[log] = _Followed(
                NinjaLogReader.at_build_start(log),
                self.command.directory,
                self.command.targets,
                None,
            )

    @property
    def work_key(self) -> str | None:
        """What the command builds, when its command line says (see `work_key`)."""
        return work_key(self.command) if self.command is not None else None

    def before_build(self) -> tuple[Path, dict[str, float]] | None:
        """The log of the command's own build directory as it was before this build: its path
        and each output's seconds in its latest entry there (`NinjaLogReader.before_build`:
        ninja's earlier runs of this tree, under workbench or not); None when the command names
        no ninja directory or its log held no entry."""
        if self.command is None:
            return None
        log = self.command.directory / LOG_NAME
        followed = self.followed.get(log)
        if followed is None or not followed.reader.before_build:
            return None
        return log, followed.reader.before_build

    def sibling_logs(self) -> list[Path]:
        """The `.ninja_log`s of the build directory's siblings, newest first (`sibling_logs`);
        [] when the command names no ninja directory."""
        return [] if self.command is None else sibling_logs(self.command.directory)

    @property
    def log_path(self) -> Path | None:
        """The log followed with the most edges of this build (or the guessed one)."""
        found = [(len(f.assembler.edges), path) for path, f in self.followed.items()]
        best = max(found, key=lambda item: item[0], default=None)
        if best is not None and best[0] > 0:
            return best[1]
        return next(iter(self.followed), None)

    def observe(self, processes: Iterable[tuple[int, float, str]]) -> None:
        """The build's processes (pid, started epoch, tool): the logs of ninjas are followed."""
        for pid, started, tool in processes:
            if tool not in ("ninja", "samu") or (pid, started) in self._seen:
                continue
            self._seen.add((pid, started))
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    argv = [
                        arg.decode("utf-8", "surrogateescape")
                        for arg in handle.read().split(b"\0")
                        if arg
                    ]
                cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
            except OSError:
                continue
            command = ninja_command(argv, cwd)
            if command is None or is_cmake_scratch(cwd):
                continue
            try:
                opened = open_working_directory(pid)
            except OSError:
                continue  # the process ended
            status = os.fstat(opened)
            identity = (status.st_dev, status.st_ino)
            known = self._followed_directory(identity)
            if known is not None:
                os.close(opened)
                if known.ninja_started is None or started < known.ninja_started:
                    known.ninja_started = started
                continue
            # ninja's first act is chdir(-C): its working directory is the build directory.
            log = cwd / LOG_NAME
            if log in self.followed:  # another namespace's directory of the same name
                log = Path(f"{log} (ninja {pid})")
            self._found[identity] = log
            readable = Path(f"/proc/{os.getpid()}/fd/{opened}") / LOG_NAME
            reader = _tail_of_this_run(readable, started, self.clock())
            reader.hold_open()  # a Nix builder's directory goes as soon as the builder ends
            followed = _Followed(reader, cwd, command.targets, started, opened)
            followed.derivation = builder_output(pid)
            followed.argv = tuple(argv)
            self.followed[log] = followed
            self._read_graph(followed)

    def _followed_directory(self, identity: tuple[int, int]) -> _Followed | None:
        """The log already followed in the directory with this (device, inode): an earlier
        ninja's there, or the one the command named."""
        if identity in self._found:
            return self.followed[self._found[identity]]
        if self.command is None:
            return None
        try:
            status = os.stat(self.command.directory)
        except OSError:
            return None
        if (status.st_dev, status.st_ino) != identity:
            return None
        return self.followed.get(self.command.directory / LOG_NAME)

    def _read_graph(self, followed: _Followed) -> None:
        manifest = _manifest_stamp(followed.readable)
        if manifest is None:
            return
        followed.manifest = manifest
        try:
            followed.graph = self.read_graph(followed.readable, followed.targets)
            followed.graph_error = None
        except GraphError as error:
            followed.graph_error = str(error)

    def poll(self) -> list[Edge]:
        """Read what the logs gained; returns the edges completed since the last call."""
        return [edge for edges in self.poll_logs().values() for edge in edges]

    def poll_logs(self) -> dict[Path, list[Edge]]:
        """`poll`, by the log each edge is in."""
        new: dict[Path, list[Edge]] = {}
        for log, followed in self.followed.items():
            new[log] = followed.add(followed.reader.read_new())
            if followed.graph is None and followed.assembler.edges and followed.graph_error is None:
                self._read_graph(followed)
        return new

    def builder(self) -> tuple[Path, _Followed] | None:
        """The log of the Nix builder's ninja found last (the derivation building now, or the
        latest that did) and how it is followed; None when no builder's ninja was found."""
        found = [
            (followed.ninja_started or 0.0, log, followed)
            for log, followed in self.followed.items()
            if followed.derivation is not None
        ]
        if not found:
            return None
        _, log, followed = max(found, key=lambda item: item[0])
        return log, followed

    def origin_of(self, followed: _Followed) -> float:
        """The epoch `followed`'s edge times count from."""
        return self._origin(followed)

    def edges(self) -> list[Edge]:
        """Every edge so far (relative times)."""
        return [edge for followed in self.followed.values() for edge in followed.assembler.edges]

    def finish(self, jobs: Sequence[SampledJob] = ()) -> list[StoredEdge]:
        """The build ended: the last entries, the graph, the sampled peaks; epoch-timed edges."""
        stored: list[StoredEdge] = []
        for followed in self.followed.values():
            followed.add(followed.reader.read_new())
            followed.assembler.flush()
            edges = followed.assembler.edges
            if not edges:
                followed.close()
                continue
            if followed.readable.is_dir() and not _same_manifest(followed, edges):
                self._read_graph(followed)  # the final manifest (CMake may have re-run)
            followed.close()
            graph = followed.graph
            rules = {}
            dependencies = None
            if graph is not None:
                rules = {edge.output: graph.rule_of(edge.output) for edge in edges}
                dependencies = graph.executed_dependencies(edge.outputs for edge in edges)
            origin = self._origin(followed)
            sampled = match_sampled(edges, jobs, origin)
            for edge in edges:
                deps = None if dependencies is None else tuple(dependencies.get(edge.output, ()))
                job = sampled.get(edge.output)
                stored.append(
                    StoredEdge(
                        edge.outputs,
                        origin + edge.start_s,
                        origin + edge.end_s,
                        edge.session,
                        edge.command_hash,
                        rules.get(edge.output),
                        deps,
                        None if job is None else job.peak_rss,
                        None if job is None else job.cpu_s,
                    )
                )
        return stored

    def origin(self) -> float | None:
        """The epoch the first followed log's edge times count from (None: no log yet)."""
        for followed in self.followed.values():
            return self._origin(followed)
        return None

    def _origin(self, followed: _Followed) -> float:
        lower = followed.ninja_started if followed.ninja_started is not None else self.started
        if followed.started_by is None or not followed.one_run:
            return lower
        return max(lower, followed.started_by)

    def graph_problems(self) -> list[str]:
        """Why a graph could not be read, per log."""
        return [f.graph_error for f in self.followed.values() if f.graph_error]


def _manifest_stamp(directory: Path) -> tuple[int, int, int] | None:
    """build.ninja's inode, size and modification time; None when there is none."""
    try:
        status = (directory / "build.ninja").stat()
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def _same_manifest(followed: _Followed, edges: Sequence[Edge]) -> bool:
    """True when the graph read earlier is still the build's: build.ninja is the same file,
    unchanged, and no edge of this run wrote a manifest (CMake's re-run writes build.ninja and
    the files it includes; one that keeps build.ninja's bytes leaves its stamp alone)."""
    if followed.graph is None or followed.manifest is None:
        return False
    if any(output.endswith(".ninja") for edge in edges for output in edge.outputs):
        return False
    return _manifest_stamp(followed.readable) == followed.manifest


def _same_source(job_file: str, source: str) -> bool:
    job_file = job_file.replace("\\", "/")
    return job_file == source or job_file.endswith("/" + source) or source.endswith("/" + job_file)


def match_peaks(edges: Sequence[Edge], jobs: Sequence[SampledJob], origin: float) -> dict[str, int]:
    """Peak RSS per edge output from the sampled jobs that compiled its source while it ran."""
    return {output: job.peak_rss for output, job in match_sampled(edges, jobs, origin).items()}


def match_cpu(edges: Sequence[Edge], jobs: Sequence[SampledJob], origin: float) -> dict[str, float]:
    """CPU seconds per edge output (sampled, at least) from the job that compiled its source."""
    return {
        output: job.cpu_s
        for output, job in match_sampled(edges, jobs, origin).items()
        if job.cpu_s is not None
    }


def match_sampled(
    edges: Sequence[Edge], jobs: Sequence[SampledJob], origin: float
) -> dict[str, SampledJob]:
    """The sampled job of each edge output: the one that compiled its source while it ran.

    The same source compiled into several targets is several edges: the job whose start is
    nearest the edge's (epoch) start is the one."""
    matched: dict[str, SampledJob] = {}
    by_base: dict[str, list[SampledJob]] = {}
    for job in jobs:
        if job.file:
            by_base.setdefault(os.path.basename(job.file), []).append(job)
    for edge in edges:
        source = edge.source
        if source is None:
            continue
        candidates = [
            job
            for job in by_base.get(os.path.basename(source), ())
            if _same_source(job.file or "", source)
        ]
        start = origin + edge.start_s
        end = origin + edge.end_s
        # A job belongs to an edge when it started inside it (1 s of slack for clocks).
        near = [job for job in candidates if start - 1.0 <= job.started <= end + 1.0]
        if near:
            matched[edge.output] = min(near, key=lambda job: abs(job.started - start))
    return matched
