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
from typing import TYPE_CHECKING, Any

from workbench.history.records import NewBuild
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

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix
    from workbench.configs.settings import BuildSettings
    from workbench.history.store import History
    from workbench.planning.launch import Target
    from workbench.planning.tuning import JobsChoice

Say = Callable[[str], None]
TOOLS = {"git": "git", "bash": "bash", "nix": "nix-bin"}


@dataclass
class Prepared:
    """The workspace, ready for its supervised build."""

    target: Target
    """The variant or flavour."""
    paths: WorkspacePaths
    state: dict[str, Any]
    applied: Applied
    patches: list[AppliedPatch]
    wanted: list[WantedPatch]
    settings: BuildSettings
    config_directory: Path
    origin: dev_env.Origin
    """The derivation whose environment the workspace uses: a flake's package (a variant's
    `.cpp`) or a Flox package file."""
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
    def flake(self) -> Path:
        """The flake, or the Flox environment, whose files the derivation is evaluated from."""
        return self.origin.directory

    @property
    def attr(self) -> str:
        return self.origin.attr

    @property
    def build_dir(self) -> Path:
        return Path(self.state.get("build_dir") or self.paths.build)

    def save(self, durable: bool = True) -> None:
        save_state(self.paths, self.state, durable)


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
    ort: str | None = None,
) -> Prepared:
    """The workspace for `name` (a variant, a flavour or its flake attribute, or a Flox
    package file .flox/pkgs/NAME.nix of one), up to date.

    `source_directory` is not used any more: the source is the derivation's own (its
    unpackPhase); giving one only adds a warning.
    """
    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.patches.series import load_series
    from workbench.planning.launch import default_flake_directory, resolve_target

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
    package_file = flox_package_file(name)
    if package_file is not None:
        target, origin = _flox_origin(package_file, matrix)
        # Its own workspace: the Flox file and the flake may well give other derivations.
        paths = workspace_paths(state_directory, f"{target.name}{FLOX_SUFFIX}")
    else:
        # The release: --ort, else the one the name carries, else settings.toml's.
        named = matrix.releases.split_name(name)[1] if matrix.releases else None
        release = ort or (named.version if named else settings.ort_version)
        target = resolve_target(name, matrix, release)
        flake = (flake_directory or default_flake_directory(config_directory)).resolve()
        if not (flake / "flake.nix").is_file():
            raise WorkspaceError(
                f"{flake}: no flake.nix there; iterate works in a flake's package (or a Flox "
                "package file: `workbench iterate .flox/pkgs/NAME.nix`)"
            )
        origin = dev_env.Origin(dev_env.develop_attr(target), flake=flake)
        paths = workspace_paths(state_directory, target.name)
    series = load_series(config_directory, matrix)
    wanted = wanted_patches(series, target.name)
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
        origin_now = origin.to_json()
        made_from = {key: state.get(key) for key in origin_now}
        if state and made_from != origin_now and any(made_from.values()):
            raise WorkspaceError(
                f"the workspace {paths.root} was made from "
                f"{made_from['package_file'] or made_from['flake']} ({made_from['attr']}), not "
                f"{origin.package_file or origin.flake} ({origin.attr}); to start again from "
                f"there, remove {paths.root} (your uncommitted edits there go with it)"
            )
        state.update({"target": target.name, **origin_now})
        state["kind"] = "variant" if target.variant is not None else "flavour"
        due: list[str] = []
        applied = Applied()
        patches: list[AppliedPatch] = []
        if (paths.src / ".git").is_dir() and state.get("upstream_commit"):
            git = Git(paths.src)
            history = read_history(git, state["upstream_commit"])
            # postPatch goes on top of the series again (phases.POST_PATCH says why), in the
            # recorded environment; the phases make it again if the derivation's changed too.
            layered = bool(state.get("layers"))
            post_patch = phases.post_patch_step(paths.root, quiet=True) if layered else None
            applied = update(git, state["upstream_commit"], wanted, say, history, post_patch)
            if not layered:
                due.append(
                    "the workspace was made with postPatch before the series: its nixpkgs "
                    "layers are made again in patchPhase's order"
                )
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
        fingerprint = dev_env.fingerprint(origin)
        drv: str | None = None
        if refresh:
            due.append("--refresh: the environment is recorded again")
        elif not (paths.root / dev_env.ENV_JSON).is_file():
            refresh = True
            if paths.src.exists():
                due.append("no recorded environment")
        elif fingerprint != state.get("flake_fingerprint"):
            drv = dev_env.drv_path(origin)
            if drv != state.get("drv_path"):
                refresh = True
                due.append(
                    f"the derivation changed ({_short_drv(state.get('drv_path'))} -> "
                    f"{_short_drv(drv)}): its environment is recorded again"
                )
            else:
                state["flake_fingerprint"] = fingerprint
        failed = (state.get("failed_phase") or {}).get("phase")
        if failed and paths.src.exists():
            due.append(f"the last cycle's {failed} failed: the phases run again")
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
        origin=origin,
        due=due,
        refresh=refresh,
        drv_path=drv,
        fingerprint=fingerprint,
        warnings=warnings,
        timings=timings,
    )


FLOX_SUFFIX = ".flox"


def flox_package_file(name: str) -> Path | None:
    """The Flox package file `name` names (a path ending in .nix), resolved; None when `name`
    is a variant or flavour."""
    if not name.endswith(".nix"):
        return None
    path = Path(name).expanduser()
    if not path.is_file():
        raise WorkspaceError(f"{name}: no such Flox package file")
    return path.resolve()


def _flox_origin(package_file: Path, matrix: Matrix) -> tuple[Target, dev_env.Origin]:
    """The target a .flox/pkgs file builds (its name is a variant's or a flavour's, as
    `workbench flox sync` writes them) and the derivation iterate works in."""
    from workbench.errors import WorkbenchError
    from workbench.planning.launch import resolve_target

    name = dev_env.flox_package_name(package_file)
    try:
        target = resolve_target(name, matrix)
    except WorkbenchError as exc:
        raise WorkspaceError(
            f"{package_file}: its package {name} is none of the variants and flavours the "
            f"series knows ({exc})"
        ) from None
    # A variant's package is its Python package; iterate builds the C++ library inside it.
    attr = "cpp" if target.variant is not None else ""
    return target, dev_env.Origin(attr, package_file=package_file, nixpkgs_rev=matrix.nixpkgs_rev)


def _short_drv(path: str | None) -> str:
    return Path(path).name[:12] if path else "none"


def history_name(prepared: Prepared) -> str:
    """What the history calls iterate builds of this target ("iterate cpu")."""
    return f"iterate {prepared.target.name}"


def choose_jobs(history: History, prepared: Prepared, explicit: int | None = None) -> JobsChoice:
    """The jobs of this cycle from the one planner (`tuning.choose_jobs_for`) every build
    takes its jobs from: `--jobs`, else settings.toml's ninja_jobs, else ("auto") the
    recommendation from what earlier iterate builds of this target measured; with the memory
    estimate and its warning whichever way the number came. The build tool runs here, not in
    a nix-daemon's builder."""
    from workbench.planning.tuning import choose_jobs_for

    return choose_jobs_for(
        history, prepared.settings, history_name(prepared), prepared.target.cuda, explicit
    )


def plan(prepared: Prepared, jobs: int, jobs_source: str) -> NewBuild:
    """The supervised build of this cycle, named "iterate TARGET" in the history."""
    from workbench.planning.launch import eta_key

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
            *_origin_arguments(prepared.origin),
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
    name = history_name(prepared)
    recorded = {
        "argv": list(argv),
        "cwd": str(cwd),
        "iterate": prepared.target.name,
        # A flake's builds keep the keys (and so the ETAs) they had before Flox files came.
        **{key: value for key, value in prepared.origin.to_json().items() if value is not None},
        "jobs": jobs,
        "jobs_source": jobs_source,
        "steps": prepared.due,
        "patches": [patch.name for patch in prepared.patches],
        # A first build and an incremental one take very different times: their ETAs must
        # come from earlier builds of the same kind.
        "build": "incremental" if (build / ".ninja_log").is_file() else "full",
    }
    if prepared.target.ort_version:  # the history's ORT column, as for `workbench build`
        recorded["ort_version"] = prepared.target.ort_version
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
            # The release is in the name already where it is not the pin's: the keys of
            # earlier builds stay what they were.
            {
                k: v
                for k, v in recorded.items()
                if k not in ("jobs", "argv", "steps", "patches", "ort_version")
            },
        ),
        nix=not prepared.fast,
        variant=variant.name if variant is not None else None,
        target=prepared.target.attr,
        jobs=jobs,
    )


def _origin_arguments(origin: dev_env.Origin) -> list[str]:
    """The phases program's arguments naming the derivation (phases.origin_of reads them)."""
    if origin.package_file is not None:
        return [
            "--package-file",
            str(origin.package_file),
            "--attr",
            origin.attr,
            "--nixpkgs-rev",
            origin.nixpkgs_rev,
        ]
    return ["--flake", str(origin.flake), "--attr", origin.attr]
