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
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from nix_testing import NIX_CONFIG, flake_on_the_standin, needs_nix

from workbench.configs.matrix import Matrix
from workbench.configs.settings import load_settings
from workbench.history.store import History
from workbench.iterate import session
from workbench.planning.launch import display, resolve_target
from workbench.planning.plan import prepare_build
from workbench.planning.tuning import choose_jobs_for

REPO = Path(__file__).resolve().parents[2]
ESTIMATE = re.compile(
    r"# memory at peak: (\d+ jobs? .*= [\d.]+ GiB) of [\d.]+ GiB available \((.+)\)"
)


def workbench_in(repo: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in `repo` (a flake on the stand-in nixpkgs) with the test's state."""
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args, "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        timeout=240,
        check=False,
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
                "memory at peak: 4000 jobs × 0.30 GiB = 1200.0 GiB "
                "(default from settings.toml (cxx_job_memory_gb))"
            )
        # And "auto" is the planner's recommendation for earlier iterate builds of the target.
        auto = session.choose_jobs(history, _prepared(matrix, settings, "cpu"))
        assert auto.source == choose_jobs_for(history, settings, "iterate cpu", False, None).source


@pytest.mark.slow(reason="runs the real CLI's dry run, which asks Nix about the pin")
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

    def workbench(*args: str) -> subprocess.CompletedProcess[str]:
        return workbench_in(repo, tmp_path, *args)

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


@needs_nix[0]
@pytest.mark.slow  # Nix evaluates two targets of the stand-in nixpkgs, then the TUI asks again
async def test_b_on_several_marked_rows_plans_the_matrix_build_that_build_a_b_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The TUI's `b` on several rows ran one plain `nix build .#A .#B`: no hosts, no evaluation,
    # targets in the store built again. It now plans what `workbench build A B` runs.
    from recorded_host import recorded_doctor
    from tui.driving import screen_still, wait_until

    from workbench.remote.matrix_build import prepare_matrix_build
    from workbench.tui.app import make_app
    from workbench.tui.screens.variants.confirm_build import ConfirmBuild

    repo = flake_on_the_standin(tmp_path, with_static_patches=False)
    # A flag of this run's own changes every output path: none of them is in the store.
    settings = repo / "configs" / "settings.toml"
    unique = f'"-DWORKBENCH_TEST_ONE_PLAN_{uuid.uuid4().hex}"'
    text = settings.read_text()
    assert "optimization_flags = []" in text
    settings.write_text(text.replace("optimization_flags = []", f"optimization_flags = [{unique}]"))
    monkeypatch.setenv("NIX_CONFIG", NIX_CONFIG)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    names = ["onnxruntime-python313-cuda12_9-sm90-avx512", "cpu"]
    state = tmp_path / "state"
    with History(state) as history:
        planned = prepare_matrix_build(repo / "configs", state, history, names)
    assert planned.plan is not None
    cli = workbench_in(repo, tmp_path, "build", *names, "--dry-run")
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == display(planned.plan.build.argv)
    app = make_app(str(repo / "configs"), str(state), doctor=recorded_doctor())
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await screen_still(pilot)
        for name in names:
            app.screen._move_to(name)
            await pilot.pause()
            assert app.screen._highlighted() == name
            await pilot.press("space")
        await pilot.press("b")
        await wait_until(pilot, "the preview", lambda: isinstance(app.screen, ConfirmBuild), 120)
        shown = app.screen.preview
        await pilot.press("n")
        await pilot.pause()
    assert shown.build.argv == planned.plan.build.argv
    assert "--keep-going" in shown.build.argv
    assert shown.memory.figure() == planned.plan.memory.figure()


def test_a_dry_run_says_the_memory_at_peak_once(
    capsys: pytest.CaptureFixture[str], matrix: Matrix
) -> None:
    # The recommendation words its peak as the planner does (one estimator): a dry run of an
    # "auto" plan printed the same figure twice, once among the reasons and once below them.
    from workbench.cli.build_common import say_planned_jobs
    from workbench.host.parallelism import JobMemory
    from workbench.planning.tuning import choose_jobs

    settings = load_settings(REPO / "configs", matrix)
    job = JobMemory(0.30, "default from settings.toml (cxx_job_memory_gb)")
    choice = choose_jobs(replace(settings, ninja_jobs="auto"), None, job, 2, 20 * 2**30, False)
    assert any(reason.startswith("memory at peak: ") for reason in choice.reasons)
    say_planned_jobs(choice)
    said = capsys.readouterr().err.splitlines()
    peaks = [line for line in said if "memory at peak" in line]
    assert peaks == [f"# memory at peak: {choice.memory.line()}; limited by cores"], said
