"""`workbench iterate` hands its plan's warnings on with the build, as `build` does (issue 22,
item 1: one planning function, warnings included): the memory estimate's warning is said once
with the launch and is in the `--json` summary's warnings (before, iterate said it itself and
passed the launch none, so the summary never held it).

The cycle runs the real CLI against the stand-in flake (tests/iterate/conftest.py); its flake is
broken so that the cycle ends at Nix's evaluation, in seconds: the warning is the plan's, made
before the build whatever becomes of it."""

from __future__ import annotations

import json

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import set_setting


@pytest.mark.slow
@needs_tools
@needs_nix[0]
@needs_nix[1]
def test_the_memory_warning_goes_with_the_build_and_into_the_summary(loop: Loop) -> None:
    # 2 jobs × 1024 GiB each (settings.toml's figure until a build is measured): no host here
    # has that much, so the planner warns.
    set_setting(loop.configs, load_matrix(loop.configs), "cxx_job_memory_gb", "1024")
    assert loop.repo is not None
    flake = loop.repo / "flake.nix"
    flake.write_text(flake.read_text().replace("cmakeFlags = [", "cmakeFlags = [ undefinedThing"))
    result = loop.iterate()  # --json -j 2
    assert result.returncode == 2, result.stderr[-3000:]
    document = json.loads(result.stdout)
    memory = [w for w in document["warnings"] if w.startswith("memory at peak: ")]
    assert len(memory) == 1, document["warnings"]
    assert memory[0].startswith(
        "memory at peak: 2 jobs × 1024.00 GiB = 2048.0 GiB (default from settings.toml "
        "(cxx_job_memory_gb)), more than the "
    ), memory[0]
    # Said once, with the launch (before its `build #N` line), not a second time by iterate.
    said = [line for line in result.stderr.splitlines() if "memory at peak: " in line]
    assert said == [f"workbench: warning: {memory[0]}"], said
    lines = result.stderr.splitlines()
    build_line = next(n for n, line in enumerate(lines) if line.startswith("workbench: build #"))
    assert lines.index(said[0]) < build_line
