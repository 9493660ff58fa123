"""The one plan of a build of named targets, before it starts: the exact command, the jobs and
where they come from, the memory they may take at peak and its basis, and every warning.

`workbench build` (and its `--dry-run`) and the TUI's `b` preview read it; its jobs and memory
estimate come from `tuning.choose_jobs_for`, as the matrix build's, iterate's and the settings
screen's do, so no two of them show a different figure for the same target and settings. Once
the user agrees, the TUI starts exactly `BuildPlan.build` (what was shown is what runs).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.history.records import NewBuild
from workbench.planning.launch import display
from workbench.planning.tuning import JobsChoice, MemoryEstimate, choose_jobs_for

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix
    from workbench.configs.settings import BuildSettings
    from workbench.flake.nix_plan import NixPlan
    from workbench.history.store import History
    from workbench.planning.launch import Target


@dataclass(frozen=True)
class BuildPlan:
    """A planned build and what the user should know before starting it."""

    build: NewBuild
    """What starts: argv, directory, the settings the history records."""
    targets: tuple[Target, ...]
    jobs: JobsChoice
    """The jobs, where they come from (`source`, `reasons`) and the memory estimate."""
    max_jobs: int
    problems: tuple[str, ...] = ()
    """Why a target cannot build here (wrong platform, toolkit too old); starting needs --force."""
    missing_tool: str | None = None
    """The command's program when it is not installed (then it cannot start)."""
    unread_configs: str | None = None
    """config_not_read_warning's line: the build does not read the chosen config directory."""
    checks_note: str | None = None
    """build_time_checks_notes' line: ISA variants' unit tests and import check are skipped."""
    nix_plan: NixPlan | None = None
    """Nix's own plan (`nix build --dry-run`): derivations to build, paths to fetch."""
    release_notes: tuple[str, ...] = ()
    """For a release other than the pin's: which, its pins, and each patch it goes without."""
    notes: tuple[str, ...] = ()
    """What a matrix build says before it starts: targets and hosts left out, targets in the
    store already, the nix-daemon's view of the hosts."""

    @property
    def memory(self) -> MemoryEstimate:
        return self.jobs.memory

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the supervisor shows beside the build (the memory warning)."""
        return (self.jobs.warning,) if self.jobs.warning else ()

    def plan_lines(self) -> list[str]:
        """Nix's plan in words, or nothing where it was not asked."""
        return self.nix_plan.lines() if self.nix_plan is not None else []

    def jobs_line(self) -> str:
        choice = self.jobs
        threads = f" × {choice.nvcc_threads} nvcc threads" if choice.nvcc_threads > 1 else ""
        return f"{choice.jobs} jobs{threads}, from {choice.source}"

    def memory_line(self) -> str:
        return f"memory at peak: {self.memory.line()}"

    def lines(self) -> list[str]:
        """The plan as plain lines: command, directory, jobs, memory, warnings."""
        lines = [
            display(self.build.argv),
            f"in {self.build.cwd}",
            self.jobs_line(),
            self.memory_line(),
        ]
        lines += list(self.release_notes)
        lines += list(self.notes)
        if self.unread_configs:
            lines.append(f"warning: {self.unread_configs}")
        if self.jobs.warning:
            lines.append(f"warning: {self.jobs.warning}")
        lines += [f"cannot build here: {problem}" for problem in self.problems]
        if self.checks_note:
            lines.append(f"note: {self.checks_note}")
        if self.missing_tool:
            lines.append(f"{self.missing_tool}: command not found (install Nix: nix-bin)")
        return lines


def program_of(argv: Sequence[str]) -> str:
    """The program a build's argv runs: past flox's `env NIX_CONFIG=...`."""
    if argv and argv[0] == "env":
        rest = [word for word in argv[1:] if "=" not in word]
        return rest[0] if rest else argv[0]
    return argv[0]


def prepare_build(
    config_directory: Path,
    history: History,
    names: Sequence[str],
    *,
    jobs: int | None = None,
    max_jobs: int | None = None,
    backend: str = "nix",
    flake: Path | None = None,
    ort: str | None = None,
    forced: bool = False,
    settings: BuildSettings | None = None,
    ask_nix: bool = False,
) -> BuildPlan:
    """The one build of `names` (one `nix build .#A [.#B ...]`, or `flox build A`): jobs from
    `jobs`, else settings.toml's ninja_jobs, else the recommendation from what earlier builds
    of the first target measured; with `ask_nix`, Nix's own plan for it (what it builds and
    fetches). `settings`: ones already loaded (and filled in) by the caller."""
    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.planning.availability import build_time_checks_notes
    from workbench.planning.build_preview import config_not_read_warning
    from workbench.planning.launch import (
        LaunchError,
        default_flake_directory,
        plan_build,
        resolve_target,
        target_problems,
    )

    if not names:
        raise LaunchError("nothing selected to build")
    matrix = load_matrix(config_directory)
    settings = settings or load_settings(config_directory, matrix)
    version = ort or settings.ort_version
    targets = [resolve_target(name, matrix, version) for name in names]
    problems = tuple(problem for target in targets for problem in target_problems(target))
    flake = flake or default_flake_directory(config_directory)
    # A Nix build: its builders may run in a nix-daemon's cgroup, whose limit is what binds.
    choice = choose_jobs_for(history, settings, targets[0].name, targets[0].cuda, jobs, nix=True)
    chosen_max = max_jobs or settings.max_jobs
    build = plan_build(
        targets[0], backend, flake, settings, choice.jobs, chosen_max, choice.source, forced
    )
    if len(targets) > 1:
        build = _several(build, targets)
    program = program_of(build.argv)
    missing = program if shutil.which(program, path=os.environ.get("PATH")) is None else None
    nix_plan = None
    if ask_nix and missing is None and backend == "nix":
        from workbench.planning.timed_nix_plan import nix_plan_for

        nix_plan = nix_plan_for(history, Path(build.cwd), build.argv)
    return BuildPlan(
        build=build,
        targets=tuple(targets),
        jobs=choice,
        max_jobs=chosen_max,
        problems=problems,
        missing_tool=missing,
        unread_configs=config_not_read_warning(config_directory, flake),
        checks_note=build_time_checks_notes([target.variant for target in targets]),
        nix_plan=nix_plan,
        release_notes=_release_notes(matrix, config_directory, targets),
    )


def _several(build: NewBuild, targets: list[Target]) -> NewBuild:
    """One `nix build` of every target: the first target's plan with the others' installables."""
    argv = list(build.argv)
    first = argv.index(f".#{targets[0].attr}")
    argv[first + 1 : first + 1] = [f".#{target.attr}" for target in targets[1:]]
    # One out-link per target is what `nix build` cannot name: leave Nix's `result*`.
    if "--out-link" in argv:
        del argv[argv.index("--out-link") : argv.index("--out-link") + 2]
    return replace(
        build,
        name=f"{len(targets)} targets",
        argv=tuple(argv),
        variant=None,
        target=" ".join(target.attr for target in targets),
    )


def _release_notes(
    matrix: Matrix, config_directory: Path, targets: list[Target]
) -> tuple[str, ...]:
    """What the plan says of a release other than the pin's (nothing for the pin's own)."""
    from workbench.planning.launch import release_notes

    version = targets[0].ort_version
    release = matrix.release(version or None)
    if release.nixpkgs_own:
        return ()
    pins = ", ".join(f"{d.fetchcontent} {d.tag or (d.rev or '')[:8]}" for d in release.deps)
    lines = [f"ONNX Runtime {release.version} ({release.tag}; settings.toml ort_version): {pins}"]
    for target in targets:
        lines += [f"warning: {line}" for line in release_notes(target, config_directory)]
    return tuple(lines)
