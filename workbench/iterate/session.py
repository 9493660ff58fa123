"""One `workbench iterate` cycle, up to the build: workspace, series, configure, build plan.

    prepare()       the working copy made (or found) and its patch commits in line with the
                    series; the checkout's build lock is held meanwhile, so a running build of
                    the workspace is never changed under it
    configure()     `cmake -G Ninja` with the flake's flags, only when they changed
    plan()          the supervised `ninja -C build` (started by supervision.control.start)

The CLI (workbench/cli/iterate_command.py) follows the build, runs the smoke command and prints
the summary; nothing here prints.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from workbench.errors import WorkbenchError
from workbench.iterate import cmake_flags, source
from workbench.iterate.workspace import (
    Applied,
    AppliedPatch,
    Git,
    WantedPatch,
    WorkspaceError,
    WorkspacePaths,
    create,
    load_state,
    read_history,
    save_state,
    update,
    wanted_patches,
    workspace_paths,
)
from workbench.supervision.history import NewBuild

Say = Callable[[str], None]
TOOLS = {"git": "git", "cmake": "cmake", "ninja": "ninja-build"}
CONFIGURE_LOG = "configure.log"


class ConfigureError(WorkbenchError):
    """cmake failed in the workspace; the message has its last lines and the whole log's path."""


@dataclass
class Prepared:
    """The workspace, ready to configure and build."""

    target: Any
    """The supervision.launch.Target (variant or flavour)."""
    paths: WorkspacePaths
    state: dict[str, Any]
    applied: Applied
    patches: list[AppliedPatch]
    wanted: list[WantedPatch]
    flags: cmake_flags.FlakeFlags
    configure_argv: list[str]
    settings: Any
    launcher: str | None = None
    """ccache's path when compiles go through it."""
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def needs_configure(self) -> bool:
        configured = self.state.get("configured") or {}
        return (
            configured.get("argv") != self.configure_argv
            or not (self.paths.build / "build.ninja").is_file()
            or not (self.paths.build / "CMakeCache.txt").is_file()
        )

    def save(self) -> None:
        save_state(self.paths, self.state)


def missing_tools() -> list[str]:
    """Tools iterate needs that are not on PATH, as Debian package names."""
    return [package for tool, package in TOOLS.items() if shutil.which(tool) is None]


@contextlib.contextmanager
def workspace_lock(state_directory: Path, paths: WorkspacePaths) -> Iterator[None]:
    """The workspace's build lock while its files change: a running build of it is refused."""
    from workbench.supervision.lock import BuildLock

    lock = BuildLock.acquire(state_directory, str(paths.src.resolve()))
    try:
        yield
    finally:
        lock.release()


def prepare(
    config_directory: Path,
    state_directory: Path,
    name: str,
    source_directory: Path | None,
    say: Say,
) -> Prepared:
    """The workspace for `name` (a variant, a flavour or its flake attribute), up to date.

    Unknown names fail with the nearest known ones. A new workspace copies `source_directory`,
    or the flake's `src` on a Nix host. The series' enabled patches for the target are its
    commits; a changed series is re-applied (workspace.update).
    """
    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.patches.series import load_series
    from workbench.supervision.launch import default_flake_directory, resolve_target

    missing = missing_tools()
    if missing:
        raise WorkspaceError(
            f"iterate needs {', '.join(missing)} (Debian: apt install {' '.join(missing)})"
        )
    timings: dict[str, float] = {}
    began = time.monotonic()
    matrix = load_matrix(config_directory)
    settings = load_settings(config_directory, matrix)
    target = resolve_target(name, matrix)
    series = load_series(config_directory, matrix)
    wanted = wanted_patches(series, target.name)
    flags = cmake_flags.flake_flags(target, settings)
    launcher, ccache_warning = cmake_flags.ccache_launcher(settings.ccache)
    paths = workspace_paths(state_directory, target.name)
    timings["configs"] = time.monotonic() - began

    began = time.monotonic()
    with workspace_lock(state_directory, paths):
        state = load_state(paths)
        if (paths.src / ".git").is_dir():
            recorded = (state.get("source") or {}).get("path")
            if source_directory is not None and recorded is not None:
                wanted_source = str(source_directory.expanduser().resolve())
                if wanted_source != recorded:
                    raise WorkspaceError(
                        f"the workspace {paths.src} was made from {recorded}, not "
                        f"{wanted_source}; to start again from the new source, remove "
                        f"{paths.root} (your uncommitted edits there go with it)"
                    )
            git = Git(paths.src)
            upstream = state.get("upstream_commit") or _root_commit(git)
            state["upstream_commit"] = upstream
            applied = update(git, upstream, wanted, say)
        elif paths.src.exists():
            raise WorkspaceError(
                f"{paths.src} exists but is not a git working copy; remove {paths.root} and "
                "run iterate again"
            )
        else:
            tree = (
                source.from_directory(source_directory)
                if source_directory is not None
                else source.from_flake(
                    default_flake_directory(config_directory), source.source_attr(target), say
                )
            )
            state = {
                "target": target.name,
                "attr": target.attr,
                "kind": "variant" if target.variant is not None else "flavour",
                "source": tree.to_json(),
                "created": time.time(),
            }
            say(f"making the workspace {paths.src} from {tree.description}")
            try:
                upstream, applied = create(
                    paths,
                    lambda into: source.copy_source(tree, into),
                    tree.description,
                    wanted,
                    say,
                )
            except Exception:
                if (paths.src / ".git").is_dir():  # made, but a patch did not apply
                    state["upstream_commit"] = _root_commit(Git(paths.src))
                    save_state(paths, state)
                raise
            state["upstream_commit"] = upstream
        patches = read_history(Git(paths.src), state["upstream_commit"]).patches
        state["patches"] = [patch.to_json() for patch in patches]
        save_state(paths, state)
    timings["workspace"] = time.monotonic() - began
    warnings = [ccache_warning] if ccache_warning else []
    return Prepared(
        target=target,
        paths=paths,
        state=state,
        applied=applied,
        patches=patches,
        wanted=wanted,
        flags=flags,
        configure_argv=cmake_flags.configure_argv(flags, paths.src, paths.build, launcher),
        settings=settings,
        launcher=launcher,
        warnings=warnings,
        timings=timings,
    )


def _root_commit(git: Git) -> str:
    roots = git.text("rev-list", "--max-parents=0", "HEAD").split()
    if not roots:
        raise WorkspaceError(f"{git.tree} has no commits; remove {git.tree.parent} and start again")
    return roots[-1]


def configure(prepared: Prepared, stream: IO[str] | None = None) -> bool:
    """Run cmake when the flags (or the build directory) changed; whether it ran.

    Its output goes to build/configure.log and, line by line, to `stream`.
    """
    if not prepared.needs_configure:
        return False
    began = time.monotonic()
    build = prepared.paths.build
    build.mkdir(parents=True, exist_ok=True)
    log_path = build / CONFIGURE_LOG
    tail: list[str] = []
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            prepared.configure_argv,
            cwd=build,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            tail = [*tail[-19:], line.rstrip("\n")]
            if stream is not None:
                stream.write(line)
                stream.flush()
        status = process.wait()
    if status != 0:
        raise ConfigureError(
            f"cmake failed in {build} (exit {status}); last lines:\n"
            + "\n".join(tail)
            + f"\nwhole output: {log_path}"
        )
    prepared.state["configured"] = {"argv": prepared.configure_argv, "at": time.time()}
    prepared.save()
    prepared.timings["configure"] = time.monotonic() - began
    return True


@dataclass(frozen=True)
class JobsChoice:
    """The ninja jobs of an iterate build, where they came from, and any warning about them."""

    jobs: int
    source: str
    warning: str | None = None


def choose_jobs(history: Any, prepared: Prepared, explicit: int | None = None) -> JobsChoice:
    """`--jobs`, else settings.toml's ninja_jobs, else ("auto") the measured recommendation
    for earlier iterate builds of this target."""
    if explicit:
        return JobsChoice(explicit, "--jobs")
    settings = prepared.settings
    if settings.ninja_jobs != "auto":
        return JobsChoice(int(settings.ninja_jobs), "settings.toml (ninja_jobs)")
    from workbench.supervision.tuning import choose_jobs_for

    choice = choose_jobs_for(
        history, settings, f"iterate {prepared.target.name}", prepared.target.cuda, None
    )
    return JobsChoice(choice.jobs, choice.source, choice.warning)


def plan(prepared: Prepared, jobs: int, jobs_source: str) -> NewBuild:
    """The supervised `ninja -C BUILD -j N`, named "iterate TARGET" in the history."""
    from workbench.supervision.launch import eta_key

    build = prepared.paths.build.resolve()
    argv = ("ninja", "-C", str(build), "-j", str(jobs))
    name = f"iterate {prepared.target.name}"
    recorded = {
        "argv": list(argv),
        "cwd": str(build),
        "iterate": prepared.target.name,
        "jobs": jobs,
        "jobs_source": jobs_source,
        "cmake_flags": list(prepared.flags.cmake_flags),
        "compile_flags": list(prepared.flags.compile_flags),
        "ccache": prepared.launcher is not None,
        "patches": [patch.name for patch in prepared.patches],
        # A first build and an incremental one take very different times: their ETAs must
        # come from earlier builds of the same kind.
        "build": "incremental" if (build / ".ninja_log").is_file() else "full",
    }
    variant = prepared.target.variant
    return NewBuild(
        name=name,
        backend="run",
        argv=argv,
        cwd=str(build),
        checkout=str(prepared.paths.src.resolve()),
        settings=recorded,
        eta_key=eta_key("run", name, {k: v for k, v in recorded.items() if k != "jobs"}),
        nix=False,
        variant=variant.name if variant is not None else None,
        target=prepared.target.attr,
        jobs=jobs,
    )
