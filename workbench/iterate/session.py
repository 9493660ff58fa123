"""One `workbench iterate` cycle, up to the build: workspace, series, environment, build plan.

    prepare()   the working copy's patch commits in line with the series (when it exists), and
                whether the recorded environment still is the derivation's: the flake's files
                are fingerprinted, and only when they changed is Nix asked for the derivation
                (a new one means the environment is recorded again); the workspace's build lock
                is held meanwhile, so a running build of it is never changed under it
    plan()      the supervised build: the build phase's tool (ninja -C BUILD -j N) in the
                recorded environment when nothing else is due (the fast path), else
                `python -m workbench.iterate.phases` (record the environment, unpack, patch,
                configure, as far as needed, then the same build tool; iterate/phases.py)

The flake is the only place that knows the build: nothing here computes a flag. The CLI
(workbench/cli/iterate_command.py) follows the build, runs the smoke command and prints the
summary; nothing here prints.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.iterate import dev_env, phases
from workbench.iterate.workspace import (
    Applied,
    AppliedPatch,
    Git,
    WantedPatch,
    WorkspaceError,
    WorkspacePaths,
    load_state,
    read_history,
    save_state,
    update,
    wanted_patches,
    workspace_paths,
)
from workbench.supervision.history import NewBuild

Say = Callable[[str], None]
TOOLS = {"git": "git", "bash": "bash", "nix": "nix-bin"}


@dataclass
class Prepared:
    """The workspace, ready for its supervised build."""

    target: Any
    """The supervision.launch.Target (variant or flavour)."""
    paths: WorkspacePaths
    state: dict[str, Any]
    applied: Applied
    patches: list[AppliedPatch]
    wanted: list[WantedPatch]
    settings: Any
    config_directory: Path
    flake: Path
    attr: str
    """The flake attribute whose environment the workspace uses (a variant's `.cpp`)."""
    due: list[str] = field(default_factory=list)
    """Why this cycle goes through the phases (empty: the fast path, the build tool alone)."""
    refresh: bool = False
    """Record the environment again (the derivation changed, or none is recorded)."""
    drv_path: str | None = None
    fingerprint: str | None = None
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def fast(self) -> bool:
        return not self.due

    @property
    def build_dir(self) -> Path:
        return Path(self.state.get("build_dir") or self.paths.build)

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
    flake_directory: Path | None = None,
    refresh: bool = False,
) -> Prepared:
    """The workspace for `name` (a variant, a flavour or its flake attribute), up to date.

    `source_directory` is not used any more: the source is the derivation's own (its
    unpackPhase); giving one only adds a warning.
    """
    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.patches.series import load_series
    from workbench.supervision.launch import default_flake_directory, resolve_target

    missing = missing_tools()
    if missing:
        raise WorkspaceError(
            f"iterate needs {', '.join(missing)} (Debian: apt install {' '.join(missing)}): the "
            "workspace is made and built in the derivation's own environment (nix develop)"
        )
    timings: dict[str, float] = {}
    began = time.monotonic()
    config_directory = config_directory.resolve()
    matrix = load_matrix(config_directory)
    settings = load_settings(config_directory, matrix)
    target = resolve_target(name, matrix)
    series = load_series(config_directory, matrix)
    wanted = wanted_patches(series, target.name)
    flake = (flake_directory or default_flake_directory(config_directory)).resolve()
    if not (flake / "flake.nix").is_file():
        raise WorkspaceError(f"{flake}: no flake.nix there; iterate works in a flake's package")
    attr = dev_env.develop_attr(target)
    paths = workspace_paths(state_directory, target.name)
    warnings = []
    if source_directory is not None:
        warnings.append(
            f"--source {source_directory} is not used: the workspace's source is what the "
            f"derivation's unpackPhase gives (its src), so that it is nix build's source"
        )
    timings["configs"] = time.monotonic() - began

    began = time.monotonic()
    with workspace_lock(state_directory, paths):
        state = load_state(paths)
        loaded = dict(state)
        made_from = (state.get("flake"), state.get("attr"))
        if state and made_from != (str(flake), attr) and made_from != (None, None):
            raise WorkspaceError(
                f"the workspace {paths.root} was made from {made_from[0]}#{made_from[1]}, not "
                f"{flake}#{attr}; to start again from this flake, remove {paths.root} (your "
                "uncommitted edits there go with it)"
            )
        state.update({"target": target.name, "flake": str(flake), "attr": attr})
        state["kind"] = "variant" if target.variant is not None else "flavour"
        due: list[str] = []
        applied = Applied()
        patches: list[AppliedPatch] = []
        if (paths.src / ".git").is_dir() and state.get("upstream_commit"):
            git = Git(paths.src)
            history = read_history(git, state["upstream_commit"])
            applied = update(git, state["upstream_commit"], wanted, say, history)
            patches = (
                history.patches
                if applied.replaced_from is None
                else read_history(git, state["upstream_commit"]).patches
            )
        elif paths.src.exists():
            raise WorkspaceError(
                f"{paths.src} exists but is not a working copy iterate made (no .git, or "
                f"{paths.state_file} lost track of it); remove {paths.root} and run iterate again"
            )
        else:
            due.append("the workspace is made (unpackPhase, patchPhase, configurePhase)")
        fingerprint = dev_env.flake_fingerprint(flake)
        drv: str | None = None
        if refresh:
            due.append("--refresh: the environment is recorded again")
        elif not (paths.root / dev_env.ENV_JSON).is_file():
            refresh = True
            if paths.src.exists():
                due.append("no recorded environment")
        elif fingerprint != state.get("flake_fingerprint"):
            drv = dev_env.drv_path(flake, attr)
            if drv != state.get("drv_path"):
                refresh = True
                due.append(
                    f"the derivation changed ({_short_drv(state.get('drv_path'))} -> "
                    f"{_short_drv(drv)}): its environment is recorded again"
                )
            else:
                state["flake_fingerprint"] = fingerprint
        build_dir = Path(state.get("build_dir") or paths.build)
        if paths.src.exists() and not any(
            (build_dir / file).is_file() for file in ("build.ninja", "Makefile")
        ):
            due.append("the build directory has no build files (configure)")
        if refresh and not any("recorded" in reason or "made" in reason for reason in due):
            due.append("the environment is recorded")
        state["patches"] = [patch.to_json() for patch in patches]
        if state != loaded:
            save_state(paths, state)  # an unchanged workspace.json is not written each cycle
    timings["workspace"] = time.monotonic() - began
    return Prepared(
        target=target,
        paths=paths,
        state=state,
        applied=applied,
        patches=patches,
        wanted=wanted,
        settings=settings,
        config_directory=config_directory,
        flake=flake,
        attr=attr,
        due=due,
        refresh=refresh,
        drv_path=drv,
        fingerprint=fingerprint,
        warnings=warnings,
        timings=timings,
    )


def _short_drv(path: str | None) -> str:
    return Path(path).name[:12] if path else "none"


@dataclass(frozen=True)
class JobsChoice:
    """The jobs of an iterate build, where they came from, and any warning about them."""

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
    """The supervised build of this cycle, named "iterate TARGET" in the history."""
    from workbench.supervision.launch import eta_key

    root = prepared.paths.root.resolve()
    build = prepared.build_dir
    if prepared.fast:
        argv = phases.in_env_argv(root, phases.build_tool_argv(build, jobs))
        cwd = build
    else:
        argv = [
            sys.executable,
            "-m",
            "workbench.iterate.phases",
            str(root),
            "--flake",
            str(prepared.flake),
            "--attr",
            prepared.attr,
            "--config",
            str(prepared.config_directory),
            "--target",
            prepared.target.name,
            "--jobs",
            str(jobs),
        ]
        if prepared.refresh:
            argv.append("--refresh")
        if prepared.drv_path:
            argv += ["--drv-path", prepared.drv_path]
        if prepared.fingerprint:
            argv += ["--fingerprint", prepared.fingerprint]
        cwd = root
    name = f"iterate {prepared.target.name}"
    recorded = {
        "argv": list(argv),
        "cwd": str(cwd),
        "iterate": prepared.target.name,
        "flake": str(prepared.flake),
        "attr": prepared.attr,
        "jobs": jobs,
        "jobs_source": jobs_source,
        "steps": prepared.due,
        "patches": [patch.name for patch in prepared.patches],
        # A first build and an incremental one take very different times: their ETAs must
        # come from earlier builds of the same kind.
        "build": "incremental" if (build / ".ninja_log").is_file() else "full",
    }
    variant = prepared.target.variant
    return NewBuild(
        name=name,
        backend="run",
        argv=tuple(argv),
        cwd=str(cwd),
        checkout=str(prepared.paths.src.resolve()),
        settings=recorded,
        eta_key=eta_key(
            "run",
            name,
            {k: v for k, v in recorded.items() if k not in ("jobs", "argv", "steps", "patches")},
        ),
        nix=not prepared.fast,
        variant=variant.name if variant is not None else None,
        target=prepared.target.attr,
        jobs=jobs,
    )
