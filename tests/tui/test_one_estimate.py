"""One memory estimate (issue 22, item 1): for the same variant and settings, the settings
screen, the `b` preview and `workbench build --dry-run` show the same peak figure on the same
basis. They disagreed: the settings screen said "8 jobs × 2 threads × 5 GiB = 80.0 GiB … OOM"
(settings.toml's CUDA default for the linkage flavour) while `b` on the ★ variant said
"8 × 1 × 0.30 GiB = 2.4 GiB" (the C++ figure of the variant, or what its builds measured)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from recorded_builds import end, job_peak_measured, new_build
from supervision.supervised import REPO, Bench
from textual.widgets import Static
from tui.driving import screen_still, wait_until

from workbench.history.records import JobRow
from workbench.history.store import History
from workbench.host.parallelism import GIB

STAR = "onnxruntime-python313-cpu-avx2"  # the recorded H100 host's ★ variant
JOB_PEAK = 700 * 1024**2
# "8 jobs × 0.68 GiB = 5.5 GiB of 62.6 GiB available (measured: build #1 of …)"
ESTIMATE = re.compile(r"(\d+ jobs? .*= [\d.]+ GiB) of [\d.]+ GiB available \((.+)\)")


def measured_build(state: Path, name: str, job_peak: int) -> None:
    """A finished build of `name` whose largest compile job peaked at `job_peak` bytes."""
    with History(state) as history:
        record = history.create(
            new_build(
                name,
                backend="nix",
                argv=("nix", "build", f".#{name}"),
                cwd=str(state),
                settings={"nvcc_threads": 1},
                eta_key=f"key-{name}",
                jobs=2,
            )
        )
        measured = job_peak_measured(record.id, job_peak)
        rows = [JobRow("conv.cc", "compiler", "g++", 30.0, job_peak, 0.0)]
        history.record_measurements(record.id, measured, rows)
        end(history, record.id, duration_s=100.0)


def estimate_in(text: str) -> tuple[str, str]:
    """(figure, basis) of the memory-at-peak line in `text`."""
    line = next(line for line in text.splitlines() if "emory at peak" in line)
    found = ESTIMATE.search(line)
    assert found, line
    return found.group(1), found.group(2)


@pytest.mark.slow  # `b` asks Nix for its plan (offline: one download attempt), the CLI too
async def test_settings_b_and_the_dry_run_show_one_estimate_for_the_same_variant(
    tui, bench: Bench, config_copy: Path
) -> None:
    from workbench.tui.screens.settings.settings_screen import SettingsScreen
    from workbench.tui.screens.variants.confirm_build import ConfirmBuild
    from workbench.tui.screens.variants.variants_screen import VariantsScreen

    shutil.copy(REPO / "flake.nix", config_copy.parent / "flake.nix")  # the flake beside them
    settings = config_copy / "settings.toml"
    text = settings.read_text()
    # The settings: 8 jobs, 2 nvcc threads, a CUDA linkage flavour (5 GiB per job).
    text = text.replace('ninja_jobs = "auto"', "ninja_jobs = 8")
    text = text.replace("nvcc_threads = 1", "nvcc_threads = 2")
    assert "ninja_jobs = 8" in text and "nvcc_threads = 2" in text
    settings.write_text(text)
    measured_build(bench.state, STAR, JOB_PEAK)
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await screen_still(pilot)
        app.screen._move_to(STAR)
        await pilot.pause()
        assert app.screen._highlighted() == STAR
        await pilot.press("s")
        await wait_until(
            pilot, "the settings screen", lambda: isinstance(app.screen, SettingsScreen)
        )
        await pilot.pause()
        advice = str(app.screen.query_one("#advice", Static).render())
        await pilot.press("escape")
        await wait_until(
            pilot, "the variants screen", lambda: isinstance(app.screen, VariantsScreen)
        )
        await pilot.press("b")
        await wait_until(pilot, "the preview", lambda: isinstance(app.screen, ConfirmBuild), 120)
        details = str(app.screen.query_one("#confirm-build-details", Static).render())
        confirm = app.screen
        await pilot.press("n")
        await pilot.pause()
        # Its Mount handled after it was answered (`n` at once on a loaded host: CI saw it)
        # finds its buttons gone and takes nothing down (it raised NoMatches).
        await wait_until(pilot, "the dialog gone", lambda: not confirm.query(Static))
        confirm.on_mount()
    dry = bench.run("--config", str(config_copy), "build", STAR, "--dry-run", timeout=120)
    assert dry.returncode == 0, dry.stderr
    shown = estimate_in(advice)
    # The variant's own measured figure, no nvcc threads (it compiles no CUDA): 8 × 0.68 GiB.
    assert shown[0] == f"8 jobs × {JOB_PEAK / GIB:.2f} GiB = {8 * JOB_PEAK / GIB:.1f} GiB", advice
    assert shown[1].startswith(f"measured: build #1 of {STAR} on "), advice
    assert f"Memory at peak for {STAR}: " in advice
    assert estimate_in(details) == shown, details
    assert estimate_in(dry.stderr) == shown, dry.stderr
