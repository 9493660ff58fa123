"""One plan (issue 22, item 1): the matrix build and iterate take their jobs, and the memory
estimate with its warning, from the same planner as `workbench build` and the TUI's `b`
(`tuning.choose_jobs_for`, inside `planning.plan.prepare_build`). Iterate had a second
`JobsChoice` that gave `--jobs` and settings.toml's count no memory estimate at all, so a count
that cannot fit went without the warning `build` gives; a matrix dry run said no jobs at all.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from nix_testing import NIX_CONFIG, flake_on_the_standin, needs_nix

from workbench.configs.matrix import Matrix
from workbench.configs.settings import load_settings
from workbench.history.store import History
from workbench.iterate import session
from workbench.planning.launch import resolve_target
from workbench.planning.plan import prepare_build
from workbench.planning.tuning import choose_jobs_for

REPO = Path(__file__).resolve().parents[2]
ESTIMATE = re.compile(
    r"# memory at peak: (\d+ jobs? .*= [\d.]+ GiB) of [\d.]+ GiB available \((.+)\)"
)


def _prepared(matrix: Matrix, settings, name: str) -> session.Prepared:
    """What `choose_jobs` reads of a prepared iterate workspace: its target and settings (the
    workspace itself is not needed to choose jobs)."""
    return session.Prepared(
        target=resolve_target(name, matrix),
        paths=None,  # type: ignore[arg-type]
        state={},
        applied=None,  # type: ignore[arg-type]
        patches=[],
        wanted=[],
        settings=settings,
        config_directory=REPO / "configs",
        origin=None,  # type: ignore[arg-type]
    )


def test_iterate_takes_its_jobs_and_memory_warning_from_the_one_planner(
    tmp_path: Path, matrix: Matrix
) -> None:
    settings = load_settings(REPO / "configs", matrix)
    with History(tmp_path / "state") as history:
        for explicit, counted in ((4000, settings), (None, replace(settings, ninja_jobs=4000))):
            prepared = _prepared(matrix, counted, "cpu")
            iterate = session.choose_jobs(history, prepared, explicit)
            planned = choose_jobs_for(history, counted, "iterate cpu", False, explicit)
            # 4000 jobs × 0.30 GiB cannot fit here: iterate says so, as `build` does.
            assert iterate.jobs == planned.jobs == 4000
            assert iterate.source == planned.source
            assert (
                iterate.memory.figure()
                == planned.memory.figure()
                == "4000 jobs × 0.30 GiB = 1200.0 GiB"
            )
            assert iterate.warning is not None and iterate.warning.startswith(
                "4000 jobs x 0.30 GiB per job (default from settings.toml (cxx_job_memory_gb))"
            )
        # And "auto" is the planner's recommendation for earlier iterate builds of the target.
        auto = session.choose_jobs(history, _prepared(matrix, settings, "cpu"))
        assert auto.source == choose_jobs_for(history, settings, "iterate cpu", False, None).source


def test_build_plan_and_its_dry_run_show_one_estimate(tmp_path: Path, matrix: Matrix) -> None:
    with History(tmp_path / "state") as history:
        planned = prepare_build(REPO / "configs", history, ["cpu"], jobs=3)
    assert planned.jobs.jobs == 3 and planned.jobs.source == "--jobs"
    assert "--cores 3" in " ".join(planned.build.argv)
    assert planned.memory_line() in planned.lines()
    assert planned.memory.figure() == "3 jobs × 0.30 GiB = 0.9 GiB"
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG}
    state = ["--state-dir", str(tmp_path / "state")]
    dry = subprocess.run(
        [sys.executable, "-m", "workbench", *state, "build", "cpu", "--jobs", "3", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=240,
        check=False,
    )
    assert dry.returncode == 0, dry.stderr
    found = ESTIMATE.search(dry.stderr)
    assert found, dry.stderr
    assert found.groups() == (planned.memory.figure(), planned.memory.per_job.source)


@needs_nix[0]
def test_a_matrix_dry_run_says_the_jobs_and_estimate_of_the_one_plan(tmp_path: Path) -> None:
    repo = flake_on_the_standin(tmp_path, with_static_patches=False)
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG, "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def workbench(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "workbench", *args, "--state-dir", str(tmp_path / "state")],
            capture_output=True,
            text=True,
            cwd=repo,
            env=env,
            timeout=240,
            check=False,
        )

    many = workbench("build", "--match", "sm90 avx512", "--jobs", "5", "--dry-run")
    assert many.returncode == 0, many.stderr
    first = re.search(r"\.#([A-Za-z0-9._+-]+)", many.stdout)
    assert first, many.stdout
    one = workbench("build", first.group(1), "--jobs", "5", "--dry-run")
    assert one.returncode == 0, one.stderr

    def jobs_lines(text: str) -> list[str]:
        found = ESTIMATE.search(text)
        assert found, text
        said = [line for line in text.splitlines() if line.startswith("# 5 jobs from --jobs; ")]
        return [*said, *found.groups()]

    assert jobs_lines(many.stderr) == jobs_lines(one.stderr)
    # 5 CUDA jobs of settings.toml's default figure (nvcc_threads = 1).
    assert jobs_lines(one.stderr)[1] == "5 jobs × 5.00 GiB = 25.0 GiB"
