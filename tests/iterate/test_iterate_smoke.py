"""The smoke step of `workbench iterate` against the stand-in flake (tests/iterate/standin_flake:
a STAND-IN for the builder flake's onnxruntime-cpu, built by real Nix): remembered, run after
the build with the libraries it just linked, a hang captured with real gdb and diagnosed."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from debugging.debug_programs import build_all, ptrace_works
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix

pytestmark = [needs_tools, *needs_nix, pytest.mark.slow]


@pytest.fixture
def hung_program(tmp_path: Path) -> Path:
    """The provider-bridge loop of the debugging tests (spins at -O2), compiled with g++."""
    if not ptrace_works():
        pytest.skip("gdb cannot attach here (no gdb, or ptrace is not permitted)")
    directory = tmp_path / "programs"
    directory.mkdir()
    return build_all(directory, ["bridge_o2"])["bridge_o2"]


def test_smoke_is_remembered_and_a_hang_is_captured_and_diagnosed(
    loop: Loop, hung_program: Path
) -> None:
    # A relative program is found in the build directory and remembered as its full path;
    # it runs against the library the build just linked (libfixture.so, shared by postPatch).
    first = loop.iterate_json("--smoke", "--", "./fixture_main")
    assert first["smoke"]["status"] == "passed", first["smoke"]
    state = json.loads((loop.workspace / "workspace.json").read_text())
    assert state["smoke"]["argv"] == [str(loop.build / "fixture_main")]
    # The next cycle runs it again without being told; --no-smoke skips it once.
    again = loop.iterate_json()
    assert again["smoke"]["status"] == "passed"
    assert again["smoke"]["argv"] == [str(loop.build / "fixture_main")]
    skipped = loop.iterate_json("--no-smoke")
    assert skipped["smoke"] is None and skipped["smoke_note"] == "skipped (--no-smoke)"

    # A smoke command that hangs: past --smoke-timeout its stacks are captured and diagnosed,
    # then it is stopped; iterate exits 3.
    result = loop.iterate("--smoke-timeout", "1", "--smoke", "--", str(hung_program))
    assert result.returncode == 3, result.stderr[-3000:]
    smoke = json.loads(result.stdout)["smoke"]
    assert smoke["status"] == "hung" and smoke["timeout_s"] == 1.0
    diagnosis = smoke["capture"]["diagnosis"]
    assert diagnosis["kind"] == "call-cycle"
    assert diagnosis["bridge"]["counterpart"] == "DataTypeImpl::GetType<float>"
    assert smoke["message"].startswith("hung: ProviderHostImpl::DataTypeImpl__GetType_float")
    assert [p for p in psutil.process_iter(["exe"]) if p.info["exe"] == str(hung_program)] == []
    state = json.loads((loop.workspace / "workspace.json").read_text())
    assert state["smoke"] == {"argv": [str(hung_program)], "timeout_s": 1.0}
    assert state["last"]["smoke"] == "hung"

    # In words: the summary names the hang and what it is.
    text = loop.iterate(json=False)
    assert text.returncode == 3
    assert "smoke:     smoke (command)" in text.stdout and "HUNG" in text.stdout
    assert "diagnosis: call-cycle" in text.stdout
