"""What a Nix build of some targets will run, before it runs: the exact command, the jobs and
where they come from, and the memory they may take. The TUI's `b` shows it and, once the user
agrees, starts exactly this plan (`control.start`), so what was shown is what runs.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.flake.nix_plan import NixPlan
from workbench.history.records import NewBuild
from workbench.history.store import History
from workbench.host.parallelism import GIB
from workbench.planning.launch import display
from workbench.planning.tuning import JobsChoice

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix
    from workbench.planning.launch import Target


@dataclass(frozen=True)
class BuildPreview:
    """A planned build and what the user should know before starting it."""

    plan: NewBuild
    choice: JobsChoice
    nvcc_threads: int
    available_bytes: int
    problems: tuple[str, ...]
    """Why a target cannot build here (wrong platform, toolkit too old); starting needs --force."""
    missing_tool: str | None
    """The command's program when it is not installed (then it cannot start)."""
    unread_configs: str | None = None
    """config_not_read_warning's line: the build does not read the chosen config directory."""
    checks_note: str | None = None
    """build_time_checks_notes' line: ISA variants' unit tests and import check are skipped."""
    nix_plan: NixPlan | None = None
    """Nix's own plan (`nix build --dry-run`): derivations to build, paths to fetch."""
    release_notes: tuple[str, ...] = ()
    """For a release other than the pin's: which, its pins, and each patch it goes without."""

    def plan_lines(self) -> list[str]:
        """Nix's plan in words, or nothing where it was not asked."""
        return self.nix_plan.lines() if self.nix_plan is not None else []

    @property
    def peak_gib(self) -> float:
        """jobs × nvcc threads × per-job peak."""
        return self.choice.jobs * max(1, self.nvcc_threads) * self.choice.job_memory.gb

    def lines(self) -> list[str]:
        """The preview as plain lines: command, directory, jobs, memory, warnings."""
        choice = self.choice
        threads = f" × {self.nvcc_threads} nvcc threads" if self.nvcc_threads > 1 else ""
        lines = [
            display(self.plan.argv),
            f"in {self.plan.cwd}",
            f"{choice.jobs} jobs{threads}, from {choice.source}",
            f"memory at peak: {choice.jobs} × {max(1, self.nvcc_threads)} × "
            f"{choice.job_memory.gb:.2f} GiB = {self.peak_gib:.1f} GiB of "
            f"{self.available_bytes / GIB:.1f} GiB available ({choice.job_memory.source})",
        ]
        lines += list(self.release_notes)
        if self.unread_configs:
            lines.append(f"warning: {self.unread_configs}")
        if choice.warning:
            lines.append(f"warning: {choice.warning}")
        lines += [f"cannot build here: {problem}" for problem in self.problems]
        if self.checks_note:
            lines.append(f"note: {self.checks_note}")
        if self.missing_tool:
            lines.append(f"{self.missing_tool}: command not found (install Nix: nix-bin)")
        return lines


def config_not_read_warning(config_directory: Path, flake: Path) -> str | None:
    """One line when the Nix build will not read `config_directory`: the flake evaluates the
    configs/ beside its own flake.nix (nix/config.nix's `configDir ? ../configs`), so a
    `--config DIR` elsewhere changes what the workbench shows and plans, not what is built."""
    chosen = config_directory.resolve()
    read = (flake / "configs").resolve()
    if chosen == read or not read.is_dir():  # a flake without configs/ is not ours to explain
        return None
    # The job counts are command-line options (--cores, --max-jobs): those do reach it.
    return (
        f"the Nix build evaluates {read}, not the chosen config directory {chosen}: only "
        f"its job counts reach the build (keep it as configs/ beside a flake.nix, or edit "
        f"{read})"
    )


def preview_targets(
    config_directory: Path, state: Path, names: list[str], ask_nix: bool = True
) -> BuildPreview:
    """The one `nix build .#A [.#B ...]` that building `names` runs: jobs from measured memory
    of the first target, else the settings (as `workbench build` chooses them); with `ask_nix`,
    Nix's own plan for it (what it builds, what it fetches)."""
    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.host.hardware import detect_memory
    from workbench.planning.availability import build_time_checks_notes
    from workbench.planning.launch import (
        LaunchError,
        default_flake_directory,
        plan_build,
        resolve_target,
        target_problems,
    )
    from workbench.planning.tuning import choose_jobs_for

    if not names:
        raise LaunchError("nothing selected to build")
    matrix = load_matrix(config_directory)
    settings = load_settings(config_directory, matrix)
    targets = [resolve_target(name, matrix, settings.ort_version) for name in names]
    problems = tuple(problem for target in targets for problem in target_problems(target))
    flake = default_flake_directory(config_directory)
    with History(state) as history:
        choice = choose_jobs_for(
            history, settings, targets[0].name, targets[0].cuda, None, nix=True
        )
    plan = plan_build(
        targets[0], "nix", flake, settings, choice.jobs, settings.max_jobs, choice.source
    )
    if len(targets) > 1:
        argv = list(plan.argv)
        first = argv.index(f".#{targets[0].attr}")
        argv[first + 1 : first + 1] = [f".#{target.attr}" for target in targets[1:]]
        # One out-link per target is what `nix build` cannot name: leave Nix's `result*`.
        if "--out-link" in argv:
            del argv[argv.index("--out-link") : argv.index("--out-link") + 2]
        plan = replace(
            plan,
            name=f"{len(targets)} targets",
            argv=tuple(argv),
            variant=None,
            target=" ".join(target.attr for target in targets),
        )
    threads = settings.nvcc_threads if targets[0].cuda else 1
    missing = plan.argv[0] if shutil.which(plan.argv[0]) is None else None
    note = build_time_checks_notes([target.variant for target in targets])
    unread = config_not_read_warning(config_directory, flake)
    available = detect_memory().available
    nix_plan = None
    if ask_nix and missing is None:
        from workbench.flake.nix_plan import plan_from_nix

        installables = [item for item in plan.argv if item.startswith(".#")]
        with History(state) as history:
            nix_plan = plan_from_nix(Path(plan.cwd), installables, history.last_derivation_times)
    return BuildPreview(
        plan,
        choice,
        threads,
        available,
        problems,
        missing,
        unread,
        note,
        nix_plan,
        _release_notes(matrix, config_directory, targets),
    )


def _release_notes(
    matrix: Matrix, config_directory: Path, targets: list[Target]
) -> tuple[str, ...]:
    """What the preview says of a release other than the pin's (nothing for the pin's own)."""
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
